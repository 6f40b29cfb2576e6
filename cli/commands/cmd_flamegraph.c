/*
 * cmd_flamegraph: record the target for a while and show where its time
 * went (probing/profile, then probing/flamegraph).
 *
 * The file's name picks the format; without -o, a terminal gets a table
 * of the hottest functions and a pipe gets folded stacks.  While it
 * records, a progress line on stderr (a terminal only) counts down.  When
 * the profiler already runs (probing perf --cc), its samples of the
 * coming DURATION are used and it is left running.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "cmd.h"
#include "sampling.h"
#include "subprocs.h"
#include "render/folded.h"

#define FG_DEFAULT_MS 10000
#define FG_RENDER_TIMEOUT_MS 120000
#define FG_TOP_DEFAULT 20

struct fg_opts {
	int duration_ms;
	int hz;	     /* 0: the agent's profile.hz */
	int native, idle, lines, threads, tasks, recorded, cpu;
	int subprocesses, inject;
	int top;
	const char *output;
	const char *format; /* the agent's name of it */
	enum cli_format table_fmt;
};

static double num(const cJSON *o, const char *key, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static int write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return cli_error(CLI_EFAIL, "cannot write %s: %s", path,
				 strerror(errno));
	if (fwrite(data, 1, len, f) != len || fclose(f) != 0)
		return cli_error(CLI_EFAIL, "cannot write %s: %s", path,
				 strerror(errno));
	return CLI_OK;
}

static void pct(char *out, size_t len, uint64_t n, uint64_t total)
{
	snprintf(out, len, "%.1f", total ? 100.0 * (double)n / (double)total : 0);
}

/* The hottest functions of a folded profile as a table. */
static int show_top(const char *folded, const struct fg_opts *o,
		    const cJSON *body)
{
	static const char *const names[] = {"self%", "total%", "self",
					    "total", "function", "where"};
	static const char *const cpu_names[] = {"self%", "total%", "self ms",
						"total ms", "function",
						"where"};
	struct folded_top t;
	struct cli_table *tab;
	char err[256], cells[6][512];
	const char *row[6];
	int rc, n, tty = cli_isatty(stdout);

	rc = folded_top(folded, &t, err, sizeof(err));
	if (rc) {
		folded_top_release(&t);
		return cli_error(CLI_EFAIL, "the profile does not read back: "
				 "%s", err);
	}
	tab = cli_table_new(6, o->cpu ? cpu_names : names);
	if (!tab) {
		folded_top_release(&t);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	n = (int)t.n < o->top ? (int)t.n : o->top;
	for (int i = 0; i < n; i++) {
		const struct folded_fn *f = &t.fns[i];

		pct(cells[0], sizeof(cells[0]), f->self, t.samples);
		pct(cells[1], sizeof(cells[1]), f->total, t.samples);
		if (o->cpu) {
			/* Microseconds of CPU, shown in milliseconds. */
			snprintf(cells[2], sizeof(cells[2]), "%.1f",
				 (double)f->self / 1e3);
			snprintf(cells[3], sizeof(cells[3]), "%.1f",
				 (double)f->total / 1e3);
		} else {
			snprintf(cells[2], sizeof(cells[2]), "%llu",
				 (unsigned long long)f->self);
			snprintf(cells[3], sizeof(cells[3]), "%llu",
				 (unsigned long long)f->total);
		}
		folded_label_split(f->label, cells[4], sizeof(cells[4]),
				   cells[5], sizeof(cells[5]));
		for (int c = 0; c < 6; c++)
			row[c] = cells[c];
		cli_table_add(tab, row);
	}
	for (int c = 0; c < 4; c++)
		cli_table_align_right(tab, c);
	cli_table_upper_header(tab);
	cli_table_print(tab, stdout, o->table_fmt, tty);
	cli_table_free(tab);
	if (tty && o->table_fmt <= CLI_FORMAT_TABLE && o->cpu)
		printf("%.3f s of CPU time over %.1f s at %.0f Hz\n",
		       (double)t.samples / 1e6,
		       num(body, "until", 0) - num(body, "since", 0),
		       num(body, "hz", 0));
	else if (tty && o->table_fmt <= CLI_FORMAT_TABLE)
		printf("%llu samples%s over %.1f s at %.0f Hz; %s\n",
		       (unsigned long long)t.samples,
		       o->idle ? "" : " on CPU",
		       num(body, "until", 0) - num(body, "since", 0),
		       num(body, "hz", 0),
		       o->idle ? "idle and GIL waits included"
			       : "--idle adds idle and GIL-waiting time");
	folded_top_release(&t);
	return CLI_OK;
}

static int render(struct cmd_ctx *ctx, const struct fg_opts *o, double since,
		  double until)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *data;
	int table = !o->output && (o->table_fmt != CLI_FORMAT_AUTO ||
				   cli_isatty(stdout));
	int wait = ctx->timeout_ms > FG_RENDER_TIMEOUT_MS ? ctx->timeout_ms
						       : FG_RENDER_TIMEOUT_MS;
	int rc;

	cJSON_AddStringToObject(args, "format", table ? "folded" : o->format);
	cJSON_AddNumberToObject(args, "since", since);
	if (until != 0) /* 0: up to now */
		cJSON_AddNumberToObject(args, "until", until);
	cJSON_AddBoolToObject(args, "idle", o->idle);
	cJSON_AddBoolToObject(args, "lines", o->lines);
	cJSON_AddBoolToObject(args, "threads", o->threads);
	if (o->tasks)
		cJSON_AddBoolToObject(args, "tasks", 1);
	if (o->cpu)
		cJSON_AddStringToObject(args, "weight", "cpu");
	rc = cli_request_ok(ctx, "probing/flamegraph", args, wait, &resp);
	if (rc != CLI_OK)
		return rc;
	data = cJSON_GetObjectItemCaseSensitive(resp->body, "data");
	if (!cJSON_IsString(data)) {
		dap_message_free(resp);
		return cli_error(CLI_EFAIL, "probing/flamegraph: reply without "
				 "data");
	}
	if (o->tasks) {
		const cJSON *why = cJSON_GetObjectItemCaseSensitive(
			resp->body, "tasksNote");

		if (cJSON_IsString(why))
			cli_error(CLI_OK, "note: %s", why->valuestring);
		else if (num(resp->body, "taskSamples", 0) == 0 &&
			 num(resp->body, "samples", 0) > 0)
			cli_error(CLI_OK, "note: no sample ran an asyncio task "
					  "(no asyncio event loop ran one — "
					  "uvloop's are not seen —, or "
					  "profile.tasks is off): the stacks "
					  "are the threads'");
	}
	if (table) {
		rc = show_top(data->valuestring, o, resp->body);
	} else if (o->output) {
		rc = write_file(o->output, data->valuestring,
				strlen(data->valuestring));
		/* The samples it holds: those on CPU unless --idle (the
		 * progress line counted every sample taken). */
		if (rc == CLI_OK)
			fprintf(stderr, "probing: wrote %s (%s, %.0f samples%s)\n",
				o->output, o->format,
				num(resp->body, "samples", 0),
				o->idle ? ", idle and GIL waits included"
					: " on CPU; --idle adds idle and "
					  "GIL-waiting ones");
	} else {
		fputs(data->valuestring, stdout);
	}
	dap_message_free(resp);
	return rc;
}

/* --subprocesses: the target and its Python children recorded at once,
 * each under a root frame naming it (subprocs.h, cluster_fg.c). */
static int subprocesses(struct cmd_ctx *ctx, const struct fg_opts *o,
			const char *as)
{
	struct subprocs *s;
	struct cluster_fg_procs p = {.duration_ms = o->duration_ms,
				     .hz = o->hz,
				     .idle = o->idle,
				     .lines = o->lines,
				     .tasks = o->tasks,
				     .top = o->top,
				     .output = o->output,
				     .as = as ? as
					 : o->output ? o->format
						     : NULL,
				     .fmt = o->table_fmt};
	int rc;

	if (ctx->rec || o->recorded || o->native || o->threads || o->cpu ||
	    (p.as && !strcmp(p.as, "chrome")))
		return cli_usage_error(&cmd_flamegraph_entry,
				       "--subprocesses records live processes "
				       "at once: not with --recorded, "
				       "--native, --threads, --cpu or a Chrome "
				       "trace (probing trace, per process)");
	s = calloc(1, sizeof(*s));
	if (!s)
		return cli_error(CLI_EFAIL, "out of memory");
	rc = subprocs_find(ctx, o->inject, s);
	if (rc == CLI_OK) {
		p.labels = s->label_of;
		rc = cluster_flamegraph_procs(s->nodes, s->n, &p);
	}
	free(s);
	return rc;
}

static int cmd_flamegraph_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"duration", required_argument, NULL, 'd'},
		{"hz", required_argument, NULL, 'H'},
		{"native", no_argument, NULL, 'N'},
		{"idle", no_argument, NULL, 'i'},
		{"output", required_argument, NULL, 'o'},
		{"as", required_argument, NULL, 'a'},
		{"top", required_argument, NULL, 'n'},
		{"lines", no_argument, NULL, 'l'},
		{"threads", no_argument, NULL, 'T'},
		{"tasks", no_argument, NULL, 'K'},
		{"recorded", no_argument, NULL, 'r'},
		{"cpu", no_argument, NULL, 'C'},
		{"format", required_argument, NULL, 'f'},
		{"subprocesses", no_argument, NULL, 'S'},
		{"inject", no_argument, NULL, 'J'},
		{NULL, 0, NULL, 0},
	};
	struct fg_opts o = {.duration_ms = FG_DEFAULT_MS,
			    .top = FG_TOP_DEFAULT,
			    .format = "folded",
			    .table_fmt = ctx->format};
	double since = 0, until = 0;
	const char *as = NULL;
	int c, rc, duration_given = 0;

	while ((c = getopt_long(argc, argv, ":d:o:n:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (cli_parse_duration(optarg, 1000, &o.duration_ms) < 0)
				return cli_usage_error(
					&cmd_flamegraph_entry,
					"--duration must be like 10s, 500ms "
					"or 2m, not '%s'",
					optarg);
			duration_given = 1;
			break;
		case 'H':
			o.hz = atoi(optarg);
			if (o.hz < 1 || o.hz > 10000 ||
			    strspn(optarg, "0123456789") != strlen(optarg))
				return cli_usage_error(&cmd_flamegraph_entry,
						       "--hz must be in [1, "
						       "10000]");
			break;
		case 'N':
			o.native = 1;
			break;
		case 'i':
			o.idle = 1;
			break;
		case 'o':
			o.output = optarg;
			break;
		case 'a':
			as = optarg;
			break;
		case 'n':
			if (cli_parse_ms(optarg, &o.top) < 0)
				return cli_usage_error(&cmd_flamegraph_entry,
						       "--top must be a "
						       "positive number");
			break;
		case 'l':
			o.lines = 1;
			break;
		case 'T':
			o.threads = 1;
			break;
		case 'K':
			o.tasks = 1;
			break;
		case 'r':
			o.recorded = 1;
			break;
		case 'C':
			o.cpu = 1;
			break;
		case 'S':
			o.subprocesses = 1;
			break;
		case 'J':
			o.inject = 1;
			break;
		case 'f':
			if (cli_format_parse(optarg, &o.table_fmt))
				return CLI_EUSAGE;
			break;
		default:
			return cli_option_error(&cmd_flamegraph_entry, c, argc,
						argv);
		}
	}
	if (cli_args_done(&cmd_flamegraph_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (as) {
		if (strcmp(as, "svg") && strcmp(as, "folded") &&
		    strcmp(as, "speedscope") && strcmp(as, "chrome"))
			return cli_usage_error(&cmd_flamegraph_entry,
					       "--as must be svg, folded, "
					       "speedscope or chrome");
		o.format = as;
	} else if (o.output) {
		o.format = folded_format_of(o.output);
		if (!o.format)
			return cli_usage_error(
				&cmd_flamegraph_entry,
				"cannot tell the format of '%s': name it "
				".svg, .folded, .speedscope.json or .json "
				"(Chrome trace), or give --as",
				o.output);
	}
	if (o.inject && !o.subprocesses)
		return cli_usage_error(&cmd_flamegraph_entry,
				       "--inject goes with --subprocesses");
	if (o.subprocesses)
		return subprocesses(ctx, &o, as);
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	cli_sigint_catch();
	if (ctx->rec) {
		/* A recording: what it holds, the whole run or its last
		 * DURATION. */
		o.recorded = 1;
		since = duration_given ? -o.duration_ms / 1000.0 : 0;
		rc = CLI_OK;
	} else if (o.recorded) {
		/* What is recorded already: the last DURATION. */
		since = -o.duration_ms / 1000.0;
		rc = CLI_OK;
	} else {
		struct sampling_opts so = {.duration_ms = o.duration_ms,
					   .hz = o.hz,
					   .native = o.native};

		rc = sampling_record(ctx, &so, &since, &until);
	}
	if (rc != CLI_OK)
		return rc;
	return render(ctx, &o, since, until);
}

const struct cmd_entry cmd_flamegraph_entry = {
	.name = "flamegraph",
	.alias = "fg",
	.usage = "[-d DURATION] [--hz N] [--native] [--idle] [--cpu] "
		 "[--tasks] [-o FILE] [--top N] [--subprocesses [--inject]]",
	.summary = "Sample the target's stacks for a while and show where "
		   "the time goes",
	.help = "Records every thread's stack DURATION long (default 10s) at "
		"the profiler's rate,\n"
		"then writes the profile.  The format follows the file name:\n"
		"  FILE.svg              an interactive flamegraph (click to "
		"zoom, Ctrl-F to search)\n"
		"  FILE.folded           collapsed stacks (flamegraph.pl, "
		"speedscope, inferno)\n"
		"  FILE.speedscope.json  speedscope's format "
		"(https://speedscope.app)\n"
		"  FILE.json             Chrome trace events (Perfetto, "
		"chrome://tracing)\n"
		"Without -o, a terminal gets the hottest functions (self and "
		"total) and a pipe\n"
		"gets folded stacks.  Ctrl-C stops early and shows what was "
		"recorded.  When the\n"
		"profiler already runs (probing perf --cc), its samples are "
		"used and it keeps\n"
		"running.\n"
		"\n"
		"Options:\n"
		"  -d, --duration D  how long to record: 10s, 500ms, 2m "
		"(default 10s)\n"
		"      --hz N        samples per second (default: the agent's "
		"profile.hz, 100)\n"
		"      --native      C/C++ frames too, Python frames spliced "
		"in\n"
		"      --idle        include idle and GIL-waiting samples, "
		"marked as such\n"
		"  -o, --output FILE write the profile to FILE\n"
		"      --as FORMAT   svg, folded, speedscope or chrome, "
		"whatever FILE's name\n"
		"  -n, --top N       rows of the table (default 20)\n"
		"      --lines       a frame per line, not per function\n"
		"      --threads     a root frame per thread (folded, svg)\n"
		"      --tasks       in an asyncio program, a sample that ran "
		"a task: its stack\n"
		"                    from the task's coroutine on, under a "
		"root frame \"task NAME\"\n"
		"                    (docs/asyncio.md; what ran outside tasks "
		"keeps its stack)\n"
		"      --recorded    record nothing: use the samples of the "
		"last DURATION\n"
		"      --cpu         weigh each sample by the CPU time its "
		"thread used since\n"
		"                    the one before (CPU time, not samples)\n"
		"  -f, --format F    the table as table, json or csv\n"
		"      --subprocesses  the target's Python children too "
		"(DataLoader workers,\n"
		"                    multiprocessing pools) that have an "
		"agent (PROBING=2), all\n"
		"                    recorded at once, each stack under a "
		"frame naming its\n"
		"                    process (\"process PID (comm)\"); "
		"children without one are\n"
		"                    named on stderr\n"
		"      --inject      with --subprocesses: give those children "
		"an agent first\n"
		"                    (probing -t CHILD inject)\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 flamegraph\n"
		"  probing -t 1234 flamegraph -d 30s --hz 1000 -o train.svg\n"
		"  probing -t 1234 flamegraph --native -o "
		"train.speedscope.json\n"
		"  probing -t 1234 flamegraph --subprocesses --inject -o "
		"all.svg\n"
		"On a process that has ended (its recording: probing runs), "
		"the samples it\n"
		"recorded, all of them or the last DURATION of the run.\n",
	.flags = CMD_TARGET | CMD_RECORDED,
	.exec = cmd_flamegraph_exec,
};
