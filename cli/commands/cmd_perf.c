/*
 * cmd_perf: the profiler's switch and status (probing/profile).
 * `perf --cc` samples C/C++ stacks too, until `perf --stop`.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void when(double t, char *out, size_t len)
{
	time_t s = (time_t)t;
	struct tm tm;

	if (t <= 0 || !localtime_r(&s, &tm)) {
		snprintf(out, len, "-");
		return;
	}
	strftime(out, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static int show(const cJSON *b, enum cli_format fmt)
{
	static const char *const names[] = {"what", "value"};
	int running = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "running"));
	double started = num(b, "startedAt"), stopped = num(b, "stoppedAt");
	double end = running ? num(b, "now") : stopped;
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(b, "error");
	const cJSON *note = cJSON_GetObjectItemCaseSensitive(b, "note");
	char v[16][600]; /* the note is the longest */
	const char *rows[16][2] = {{0}};
	struct cli_table *t;
	int n = 0;

	if (fmt == CLI_FORMAT_JSON) {
		char *text = cJSON_Print(b);

		printf("%s\n", text ? text : "{}");
		free(text);
		return CLI_OK;
	}
#define ROW(name, ...)                                                         \
	do {                                                                   \
		snprintf(v[n], sizeof(v[n]), __VA_ARGS__);                     \
		rows[n][0] = name;                                             \
		rows[n][1] = v[n];                                             \
		n++;                                                           \
	} while (0)
	ROW("state", "%s", running ? "running" : started > 0 ? "stopped"
							    : "never started");
	ROW("rate", "%.0f Hz", num(b, "hz"));
	ROW("stacks", "%s", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
				    b, "native"))
				    ? "Python and native (C/C++)"
				    : "Python");
	when(started, v[n], sizeof(v[n]));
	rows[n][0] = "started";
	rows[n][1] = v[n];
	n++;
	ROW("recorded for", "%.1f s", started > 0 && end > started
					       ? end - started
					       : 0);
	if (num(b, "durationMs") > 0 && running)
		ROW("time left", "%.1f s", num(b, "remainingMs") / 1000);
	ROW("samples", "%.0f (%.0f in the tables, %.0f removed by retention)",
	    num(b, "samples"), num(b, "written"), num(b, "deleted"));
	ROW("threads", "%.0f in the last tick", num(b, "threads"));
	ROW("cost", "%.1f us per thread sample (max %.0f us), %.1f us per "
		    "tick",
	    num(b, "sampleUs"), num(b, "sampleUsMax"), num(b, "tickUs"));
	if (num(b, "nativeSamples") || num(b, "nativeFailed"))
		ROW("native", "%.0f samples with native frames, %.0f Python "
			      "only (%.0f no answer in time, %.0f stack moved)",
		    num(b, "nativeSamples"), num(b, "nativeFailed"),
		    num(b, "nativeUnanswered"), num(b, "nativeStale"));
	if (num(b, "nativeRequested"))
		ROW("signals", "%.0f sent, %.0f unwound (%.1f us each, %.1f us "
			       "for the Python leaf), %.0f lost to a full "
			       "ring, %.0f late",
		    num(b, "nativeRequested"), num(b, "nativeCaptured"),
		    num(b, "nativeUnwindUs"), num(b, "nativeLeafUs"),
		    num(b, "nativeDropped"), num(b, "nativeLate"));
	if (num(b, "dropped") || num(b, "missedTicks"))
		ROW("lost", "%.0f samples dropped, %.0f ticks late",
		    num(b, "dropped"), num(b, "missedTicks"));
	if (cJSON_IsString(err) && *err->valuestring)
		ROW("error", "%s", err->valuestring);
	/* Native stacks stopped (the program took their signal over), or
	 * threads without state (descriptors scarce): sampler.h. */
	if (cJSON_IsString(note) && *note->valuestring)
		ROW("note", "%s", note->valuestring);
#undef ROW
	t = cli_table_new(2, names);
	if (!t)
		return cli_error(CLI_EFAIL, "out of memory");
	for (int i = 0; i < n; i++)
		cli_table_add(t, rows[i]);
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
	return CLI_OK;
}

static int cmd_perf_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"cc", no_argument, NULL, 'c'},
		{"native", no_argument, NULL, 'c'},
		{"start", no_argument, NULL, 's'},
		{"stop", no_argument, NULL, 'x'},
		{"hz", required_argument, NULL, 'H'},
		{"duration", required_argument, NULL, 'd'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	struct dap_message *resp = NULL;
	const char *action = "status";
	int c, rc, native = 0, hz = 0, duration = 0;
	cJSON *args;

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--torch"))
			return cmd_perf_torch(ctx, argc, argv);
	while ((c = getopt_long(argc, argv, ":f:d:", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			native = 1;
			action = "start";
			break;
		case 's':
			action = "start";
			break;
		case 'x':
			action = "stop";
			break;
		case 'H':
			if (cli_parse_ms(optarg, &hz) < 0 || hz > 10000)
				return cli_usage_error(&cmd_perf_entry,
						       "--hz must be in [1, "
						       "10000]");
			break;
		case 'd':
			if (cli_parse_duration(optarg, 0, &duration) < 0)
				return cli_duration_error(&cmd_perf_entry,
							  "--duration", optarg);
			break;
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		default:
			return cli_option_error(&cmd_perf_entry, c, argc, argv);
		}
	}
	if (cli_args_done(&cmd_perf_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "action", action);
	if (native)
		cJSON_AddBoolToObject(args, "native", 1);
	if (hz)
		cJSON_AddNumberToObject(args, "hz", hz);
	if (duration)
		cJSON_AddNumberToObject(args, "durationMs", duration);
	rc = cli_request(ctx, "probing/profile", args, ctx->timeout_ms, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success)
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	else
		rc = show(resp->body, fmt);
	dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_perf_entry = {
	.name = "perf",
	.alias = "p performance",
	.usage = "[--cc | --start | --stop] [--hz N] [--duration D]\n"
		 "       probing perf --torch [--stop] [--duration D] "
		 "[--step-rate N|auto]\n"
		 "                    [--module-rate N] [--watch VAR@FUNC;...]",
	.summary = "Start, stop or show the sampling profiler",
	.help = "Without options, shows the profiler's state: rate, samples, "
		"cost per sample.\n"
		"The samples go to the profile.* tables (probing query) and to "
		"'probing\n"
		"flamegraph', which uses a running profiler's samples.\n"
		"\n"
		"Options:\n"
		"      --cc, --native start sampling C/C++ stacks as well as "
		"Python ones (each\n"
		"                     running thread is signalled and unwinds "
		"itself; Python\n"
		"                     frames are spliced in where the "
		"interpreter runs them)\n"
		"      --start        start sampling Python stacks only\n"
		"      --stop         stop sampling\n"
		"      --hz N         samples per second (default: the "
		"agent's profile.hz)\n"
		"  -d, --duration D   stop by itself after D (10s, 500ms, 2m; "
		"a unit is\n"
		"                     needed: bare numbers were milliseconds "
		"here)\n"
		"  -f, --format F     table, json or csv\n"
		"\n"
		"Torch module tracing (python.torch_trace; docs/torch.md):\n"
		"      --torch        switch it on (the torch.* settings) and "
		"show them;\n"
		"                     with --stop, switch it off\n"
		"  -d, --duration D   with --torch: trace for D (5s), "
		"then show time\n"
		"                     per module and stage (and switch it off "
		"again if it was)\n"
		"      --step-rate N  trace one optimizer step in N (auto, the "
		"default:\n"
		"                     N keeps tracing near 0.5% of the steps' "
		"time)\n"
		"      --module-rate N  in a traced step, one module in N\n"
		"      --watch LIST   record these locals per traced step "
		"(loss@train;acc@train)\n"
		"      --top N        rows of the summary (default 50)\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 perf --cc --hz 200\n"
		"  probing -t 1234 flamegraph --recorded -d 60s -o last-minute.svg\n"
		"  probing -t 1234 perf --stop\n"
		"  probing -t 1234 perf --torch --duration 5s\n",
	.flags = CMD_TARGET,
	.exec = cmd_perf_exec,
};
