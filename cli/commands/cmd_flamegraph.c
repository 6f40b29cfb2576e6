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

#include "cmd.h"
#include "render/folded.h"

#define FG_DEFAULT_MS 10000
#define FG_POLL_MS 250
#define FG_RENDER_TIMEOUT_MS 120000
#define FG_TOP_DEFAULT 20

struct fg_opts {
	int duration_ms;
	int hz;	     /* 0: the agent's profile.hz */
	int native, idle, lines, threads, recorded, cpu;
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

/* probing/profile with args; *body is the response's body (caller frees
 * resp).  CLI_OK or an exit code after saying why. */
static int profile(struct cmd_ctx *ctx, cJSON *args,
		   struct dap_message **resp)
{
	int rc = cli_request(ctx, "probing/profile", args, ctx->timeout_ms,
			     resp);

	if (rc == CLI_OK && !(*resp)->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(*resp));
		dap_message_free(*resp);
		*resp = NULL;
	}
	return rc;
}

static int simple(struct cmd_ctx *ctx, const char *action, cJSON **body)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	int rc;

	cJSON_AddStringToObject(args, "action", action);
	rc = profile(ctx, args, &resp);
	if (rc == CLI_OK && body)
		*body = cJSON_Duplicate(resp->body, 1);
	if (resp)
		dap_message_free(resp);
	return rc;
}

static void progress(int tty, int pid_known, const char *target, double left,
		     double samples, int hz)
{
	if (!tty)
		return;
	fprintf(stderr,
		"\rprobing: recording %s%s at %d Hz: %.1f s left, %.0f "
		"samples\033[K",
		pid_known ? "pid " : "", target, hz, left > 0 ? left : 0,
		samples);
	fflush(stderr);
}

/* The profile's note (sampler.h: native stacks stopped because the
 * program took their signal over, threads left without state because
 * descriptors are scarce), kept from the latest status. */
static void keep_note(const cJSON *st, char *note, size_t len)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(st, "note");

	if (cJSON_IsString(n) && n->valuestring[0])
		snprintf(note, len, "%s", n->valuestring);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL); /* Ctrl-C cuts it short */
}

/*
 * Records (or waits while the running profiler records) for the duration;
 * *since and *until bound the samples to render.  Ctrl-C ends early.
 */
static int record(struct cmd_ctx *ctx, const struct fg_opts *o,
		  double *since, double *until)
{
	struct dap_message *resp = NULL;
	cJSON *st = NULL, *args;
	int tty = cli_isatty(stderr), started = 0, rc, hz;
	double t0, end, samples0 = 0;
	char note[600] = "";

	rc = simple(ctx, "status", &st);
	if (rc != CLI_OK)
		return rc;
	t0 = num(st, "now", 0);
	hz = (int)num(st, "hz", 0);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "running"))) {
		/* Someone else's profile: use its samples, leave it be. */
		int native = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(st, "native"));

		if ((o->native && !native) || (o->hz && o->hz != hz))
			cli_error(CLI_OK,
				  "note: the profiler already runs at %d Hz%s; "
				  "its samples are used as they are",
				  hz, native ? " with native stacks" : "");
		samples0 = num(st, "samples", 0);
		*since = t0;
	} else {
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "action", "start");
		cJSON_AddNumberToObject(args, "durationMs", o->duration_ms);
		if (o->hz)
			cJSON_AddNumberToObject(args, "hz", o->hz);
		if (o->native)
			cJSON_AddBoolToObject(args, "native", 1);
		rc = profile(ctx, args, &resp);
		if (rc != CLI_OK) {
			cJSON_Delete(st);
			return rc;
		}
		started = 1;
		*since = num(resp->body, "startedAt", t0);
		hz = (int)num(resp->body, "hz", hz);
		dap_message_free(resp);
	}
	cJSON_Delete(st);
	end = *since + o->duration_ms / 1000.0;
	cli_sigint = 0;
	for (;;) {
		double now, left;
		int running;

		st = NULL;
		if ((rc = simple(ctx, "status", &st)) != CLI_OK)
			return rc;
		now = num(st, "now", end);
		running = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(st, "running"));
		left = end - now;
		progress(tty, ctx->target && strspn(ctx->target, "0123456789") ==
					 strlen(ctx->target),
			 ctx->target ? ctx->target : "", left,
			 num(st, "samples", 0) - samples0, hz);
		keep_note(st, note, sizeof(note));
		cJSON_Delete(st);
		if (left <= 0 || (started && !running) || cli_sigint)
			break;
		/* Jittered: a poll in step with the target's periodic work
		 * would take the CPU from it at the same phase each time. */
		sleep_ms(left * 1000 < FG_POLL_MS
				 ? (int)(left * 1000) + 1
				 : FG_POLL_MS / 2 + rand() % FG_POLL_MS);
	}
	if (tty)
		fputs("\r\033[K", stderr);
	/* Our profile ends here (early on Ctrl-C); the stop also waits
	 * for the last samples to reach the tables. */
	st = NULL;
	if (started && (rc = simple(ctx, "stop", &st)) != CLI_OK)
		return rc;
	*until = st ? num(st, "stoppedAt", end) : end;
	if (!started)
		*until = end;
	if (st)
		keep_note(st, note, sizeof(note));
	cJSON_Delete(st);
	if (note[0]) {
		if (tty)
			fputs("\r\033[K", stderr);
		cli_error(CLI_OK, "note: %s", note);
	}
	if (cli_sigint)
		cli_sigint = 0;
	return CLI_OK;
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
	if (o->cpu)
		cJSON_AddStringToObject(args, "weight", "cpu");
	rc = cli_request(ctx, "probing/flamegraph", args, wait, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
		dap_message_free(resp);
		return rc;
	}
	data = cJSON_GetObjectItemCaseSensitive(resp->body, "data");
	if (!cJSON_IsString(data)) {
		dap_message_free(resp);
		return cli_error(CLI_EFAIL, "probing/flamegraph: reply without "
				 "data");
	}
	if (table) {
		rc = show_top(data->valuestring, o, resp->body);
	} else if (o->output) {
		rc = write_file(o->output, data->valuestring,
				strlen(data->valuestring));
		if (rc == CLI_OK)
			fprintf(stderr, "probing: wrote %s (%s, %.0f samples)\n",
				o->output, o->format,
				num(resp->body, "samples", 0));
	} else {
		fputs(data->valuestring, stdout);
	}
	dap_message_free(resp);
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
		{"recorded", no_argument, NULL, 'r'},
		{"cpu", no_argument, NULL, 'C'},
		{"format", required_argument, NULL, 'f'},
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
		case 'r':
			o.recorded = 1;
			break;
		case 'C':
			o.cpu = 1;
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
		rc = record(ctx, &o, &since, &until);
	}
	if (rc != CLI_OK)
		return rc;
	return render(ctx, &o, since, until);
}

const struct cmd_entry cmd_flamegraph_entry = {
	.name = "flamegraph",
	.alias = "fg",
	.usage = "[-d DURATION] [--hz N] [--native] [--idle] [--cpu] "
		 "[-o FILE] [--top N]",
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
		"      --recorded    record nothing: use the samples of the "
		"last DURATION\n"
		"      --cpu         weigh each sample by the CPU time its "
		"thread used since\n"
		"                    the one before (CPU time, not samples)\n"
		"  -f, --format F    the table as table, json or csv\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 flamegraph\n"
		"  probing -t 1234 flamegraph -d 30s --hz 1000 -o train.svg\n"
		"  probing -t 1234 flamegraph --native -o "
		"train.speedscope.json\n"
		"On a process that has ended (its recording: probing runs), "
		"the samples it\n"
		"recorded, all of them or the last DURATION of the run.\n",
	.flags = CMD_TARGET | CMD_RECORDED,
	.exec = cmd_flamegraph_exec,
};
