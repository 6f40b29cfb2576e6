/*
 * cmd_runs: the recordings on this machine (docs/recording.md): one row
 * per process, oldest first, with how each ended.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "recorded.h"

#define RUNS_MAX 100000

struct runs {
	struct run_info *v;
	size_t n, cap;
};

static void add(const struct run_info *ri, void *arg)
{
	struct runs *r = arg;

	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct run_info *v;

		if (cap > RUNS_MAX || !(v = realloc(r->v, cap * sizeof(*v))))
			return;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *ri;
}

static int by_start(const void *a, const void *b)
{
	const struct run_info *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmd_runs_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"last", required_argument, NULL, 'n'},
		{"pid", required_argument, NULL, 'p'},
		{"since", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	static const char *const cols[] = {
		"run", "pid", "rank",	 "job", "started", "ended",
		"how", "mb",  "command", "dir", "report",
	};
	enum cli_format fmt = ctx->format;
	struct runs r = {0};
	struct cli_table *t;
	char root[RUNDIR_PATH_MAX], *end;
	int c, n, tty = cli_isatty(stdout), since_ms = 0;
	int last = 0, want_pid = 0;
	long days;
	double since_s = 0;
	size_t first = 0, kept = 0;

	while ((c = getopt_long(argc, argv, ":f:", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		case 'n':
			if (cli_parse_ms(optarg, &last) < 0)
				return cli_usage_error(&cmd_runs_entry,
						       "--last takes a count "
						       "of runs, from 1");
			break;
		case 'p':
			if (cli_parse_ms(optarg, &want_pid) < 0)
				return cli_usage_error(&cmd_runs_entry,
						       "--pid takes a process "
						       "id");
			break;
		case 's':
			/* Days too (7d): recordings are kept for weeks. */
			days = strtol(optarg, &end, 10);
			if (end != optarg && !strcmp(end, "d") && days > 0 &&
			    days <= 3650) {
				since_s = days * 86400.0;
				break;
			}
			if (cli_parse_duration(optarg, 1000, &since_ms) < 0 ||
			    since_ms <= 0)
				return cli_usage_error(
					&cmd_runs_entry,
					"--since %s: give 30m, 2h, 24h or 7d "
					"(a bare number: seconds)",
					optarg);
			since_s = since_ms / 1000.0;
			break;
		default:
			return cli_option_error(&cmd_runs_entry, c, argc, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error(&cmd_runs_entry, "runs takes no "
							"arguments");
	n = recorded_runs(add, &r, root, sizeof(root));
	if (n == -ENOENT)
		return cli_error(CLI_EFAIL,
				 "PROBING_DATA_DIR is off: there are no "
				 "recordings");
	if (n < 0)
		return cli_error(CLI_EFAIL, "%s: %s", root, strerror(-n));
	if (r.n)
		qsort(r.v, r.n, sizeof(*r.v), by_start);
	/* The filters, then the newest `last` of what is left (shown
	 * oldest first still). */
	for (size_t i = 0; i < r.n; i++) {
		if ((want_pid && r.v[i].pid != want_pid) ||
		    (since_s && r.v[i].start < (double)time(NULL) - since_s))
			continue;
		r.v[kept++] = r.v[i];
	}
	r.n = kept;
	if (last && r.n > (size_t)last)
		first = r.n - (size_t)last;
	t = cli_table_new(fmt <= CLI_FORMAT_TABLE ? 9 : 11, cols);
	if (!t) {
		free(r.v);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	cli_table_upper_header(t);
	cli_table_align_right(t, 1);
	cli_table_align_right(t, 7);
	for (size_t i = first; i < r.n; i++) {
		const struct run_info *ri = &r.v[i];
		char pid[16], rank[16], start[32], end[32], how[32], mb[32];
		const char *row[11] = {ri->name,    pid,     rank,	ri->job,
				       start,	    end,     how,	mb,
				       ri->command, ri->dir, ri->report};

		snprintf(pid, sizeof(pid), "%d", ri->pid);
		if (ri->rank >= 0)
			snprintf(rank, sizeof(rank), "%d", ri->rank);
		else
			snprintf(rank, sizeof(rank), "-");
		recorded_utc(ri->start, start, sizeof(start));
		recorded_utc(ri->end, end, sizeof(end));
		recorded_how(ri, how, sizeof(how));
		snprintf(mb, sizeof(mb), "%.1f", (double)ri->bytes / 1048576);
		cli_table_add(t, row);
	}
	if (r.n == 0 && tty && fmt <= CLI_FORMAT_TABLE)
		printf(want_pid || since_s ? "No recordings under %s match.\n"
				      : "No recordings under %s.\n",
		       root);
	else
		cli_table_print(t, stdout, fmt, tty);
	cli_table_free(t);
	free(r.v);
	return CLI_OK;
}

const struct cmd_entry cmd_runs_entry = {
	.name = "runs",
	.alias = NULL,
	.usage = "[--last N] [--pid P] [--since D] [-f table|json|csv]",
	.summary = "Show the recordings of processes on this machine",
	.help = "Lists the recordings under the data directory "
		"(PROBING_DATA_DIR, else\n"
		"$XDG_STATE_HOME/probing or ~/.local/state/probing), oldest "
		"first: the run's\n"
		"name, pid, rank and job (torchrun), start and end (UTC), how "
		"it ended\n"
		"(exit N, signal N, exception, running, or unknown: killed or "
		"os._exit),\n"
		"its size and command.  Needs no target.  Read one with\n"
		"`probing -t RUN query SQL` (or -t PID once the process has "
		"ended, or -t DIR).\n"
		"\n"
		"Options:\n"
		"      --last N         only the N newest (still oldest "
		"first)\n"
		"      --pid P          only the runs of process id P\n"
		"      --since D        only the runs started in the last D "
		"(30m, 2h, 7d)\n"
		"  -f, --format FORMAT  table (default), json or csv (with "
		"the directory\n"
		"                       and the crash report file, when "
		"there is one)\n",
	.flags = CMD_PAGED,
	.exec = cmd_runs_exec,
};
