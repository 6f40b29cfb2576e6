/*
 * cmd_trace: `probing trace` — what the agent records over a while, as one
 * timeline (a Chrome Trace Event / Perfetto JSON file): torch module and
 * optimizer spans, collectives, samples, memory (sql/tracereq.h).
 *
 * Live, for the duration: the sampler runs (or is borrowed: sampling.h)
 * and torch module tracing is on (as torch.step_rate picks the steps:
 * by default every step long enough to trace within the agent's budget;
 * as it was, when it was on already); both are put back as they were,
 * then the agent
 * answers probing/trace for the window.  On a recording, the whole run
 * or its last DURATION.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "sampling.h"

#define TRACE_DEFAULT_MS 10000
#define TRACE_DRAIN_MS 400   /* the agent writes torch rows every 100 ms */
#define TRACE_RENDER_MS 120000

struct trace_opts {
	int duration_ms, duration_given;
	int hz, native, samples, torch;
	int recorded; /* switch nothing on: what is recorded already */
	const char *step_rate; /* while tracing; NULL: torch.step_rate's */
	const char *output;
};

/*
 * Torch module tracing on for the window when it is off: *was holds
 * torch.step_rate as it was ("" when tracing was on: left alone).
 */
static int torch_on(struct cmd_ctx *ctx, const struct trace_opts *o,
		    char *was, size_t len)
{
	struct dap_message *resp = NULL;
	cJSON *set;
	int rc = cli_config(ctx, NULL, 0, &resp);

	was[0] = '\0';
	if (rc != CLI_OK)
		return rc;
	if (!strcmp(cli_setting(resp, "torch.profiling"), "on")) {
		if (o->step_rate)
			cli_error(CLI_OK,
				  "note: torch tracing is on already "
				  "(torch.step_rate %s): its steps are traced "
				  "as they are, --step-rate is not applied",
				  cli_setting(resp, "torch.step_rate"));
		dap_message_free(resp);
		return CLI_OK;
	}
	snprintf(was, len, "%s", cli_setting(resp, "torch.step_rate"));
	dap_message_free(resp);
	resp = NULL;
	set = cJSON_CreateObject();
	cJSON_AddStringToObject(set, "torch.profiling", "on");
	if (o->step_rate)
		cJSON_AddStringToObject(set, "torch.step_rate", o->step_rate);
	/* For the window: should this CLI die, the agent puts it back. */
	rc = cli_config(ctx, set, CLI_LEASE_MS(o->duration_ms), &resp);
	dap_message_free(resp);
	if (rc != CLI_OK)
		was[0] = '\0';
	return rc;
}

static int torch_back(struct cmd_ctx *ctx, const char *was)
{
	struct dap_message *resp = NULL;
	cJSON *set;
	int rc;

	if (!was[0])
		return CLI_OK;
	set = cJSON_CreateObject();
	cJSON_AddStringToObject(set, "torch.profiling", "off");
	cJSON_AddStringToObject(set, "torch.step_rate", was);
	rc = cli_config(ctx, set, 0, &resp);
	dap_message_free(resp);
	return rc;
}

/* The window without the sampler: the agent's clock now, then the
 * duration (Ctrl-C ends early). */
static int wait_window(struct cmd_ctx *ctx, int ms, double *since,
		       double *until)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *now;
	int rc;

	cJSON_AddStringToObject(args, "action", "status");
	rc = cli_request(ctx, "probing/profile", args, ctx->timeout_ms, &resp);
	if (rc != CLI_OK)
		return rc;
	now = cJSON_GetObjectItemCaseSensitive(resp->body, "now");
	*since = cJSON_IsNumber(now) ? now->valuedouble : (double)time(NULL);
	dap_message_free(resp);
	*until = *since + ms / 1000.0;
	if (cli_wait_ms(ms)) {
		struct timespec t;

		clock_gettime(CLOCK_REALTIME, &t);
		*until = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
	}
	return CLI_OK;
}

static double num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* Writes the trace where asked and says what it holds on stderr. */
static int write_trace(const struct trace_opts *o, const cJSON *body)
{
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(body, "data");
	const cJSON *notes = cJSON_GetObjectItemCaseSensitive(body, "notes");
	const cJSON *n;
	FILE *f;
	size_t len;

	if (!cJSON_IsString(data))
		return cli_error(CLI_EFAIL, "the agent's trace has no data");
	len = strlen(data->valuestring);
	f = o->output ? fopen(o->output, "w") : stdout;
	if (!f)
		return cli_error(CLI_EFAIL, "cannot write %s: %s", o->output,
				 strerror(errno));
	if (fwrite(data->valuestring, 1, len, f) != len) {
		int e = errno;

		if (o->output)
			fclose(f);
		return cli_error(CLI_EFAIL, "cannot write %s: %s",
				 o->output ? o->output : "the output",
				 strerror(e));
	}
	if ((o->output ? fclose(f) : fflush(f)) != 0)
		return cli_error(CLI_EFAIL, "cannot write %s: %s",
				 o->output ? o->output : "the output",
				 strerror(errno));
	fprintf(stderr,
		"probing: %s%s%s%.0f events over %.1f s: %.0f spans, %.0f "
		"asynchronous collectives, %.0f samples, %.0f counter "
		"values%s\n",
		o->output ? "wrote " : "", o->output ? o->output : "",
		o->output ? " (" : "", num(body, "events"),
		num(body, "until") - num(body, "since"), num(body, "spans"),
		num(body, "async"), num(body, "samples"), num(body, "counters"),
		o->output ? "; open it in https://ui.perfetto.dev or "
			    "chrome://tracing)"
			  : "");
	cJSON_ArrayForEach(n, notes)
	{
		if (cJSON_IsString(n))
			fprintf(stderr, "probing: note: %s\n", n->valuestring);
	}
	if (num(body, "events") == 0)
		fprintf(stderr,
			"probing: nothing was recorded in the window (is the "
			"program running Python?  'probing config' shows what "
			"records)\n");
	return CLI_OK;
}

static int cmd_trace_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"duration", required_argument, NULL, 'd'},
		{"output", required_argument, NULL, 'o'},
		{"hz", required_argument, NULL, 'H'},
		{"native", no_argument, NULL, 'N'},
		{"no-samples", no_argument, NULL, 'S'},
		{"no-torch", no_argument, NULL, 'T'},
		{"step-rate", required_argument, NULL, 's'},
		{"recorded", no_argument, NULL, 'r'},
		{NULL, 0, NULL, 0},
	};
	struct trace_opts o = {.duration_ms = TRACE_DEFAULT_MS,
			       .samples = 1,
			       .torch = 1};
	struct dap_message *resp = NULL;
	double since = 0, until = 0;
	char was[64] = "";
	cJSON *args;
	int c, rc, rate;

	while ((c = getopt_long(argc, argv, ":d:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (cli_parse_duration(optarg, 1000, &o.duration_ms) < 0)
				return cli_duration_error(&cmd_trace_entry,
							  "--duration", optarg);
			o.duration_given = 1;
			break;
		case 'o':
			o.output = optarg;
			break;
		case 'H':
			if (cli_parse_ms(optarg, &o.hz) < 0 || o.hz > 10000)
				return cli_usage_error(&cmd_trace_entry,
						       "--hz must be in [1, "
						       "10000]");
			break;
		case 'N':
			o.native = 1;
			break;
		case 'S':
			o.samples = 0;
			break;
		case 'T':
			o.torch = 0;
			break;
		case 'r':
			o.recorded = 1;
			break;
		case 's':
			if (strcmp(optarg, "auto") &&
			    cli_parse_ms(optarg, &rate) < 0)
				return cli_usage_error(&cmd_trace_entry,
						       "--step-rate must be "
						       "auto or a positive "
						       "number");
			o.step_rate = optarg;
			break;
		default:
			return cli_option_error(&cmd_trace_entry, c, argc,
						argv);
		}
	}
	if (cli_args_done(&cmd_trace_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (!o.output && cli_isatty(stdout))
		return cli_usage_error(&cmd_trace_entry,
				       "a trace is a file: give -o FILE.json "
				       "(or send it to a pipe)");
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	cli_sigint_catch();
	args = cJSON_CreateObject();
	if (ctx->rec) {
		/* A recording: the whole run, or its last DURATION. */
		if (o.duration_given)
			cJSON_AddNumberToObject(args, "since",
						-o.duration_ms / 1000.0);
	} else if (o.recorded) {
		/* What the agent holds already: the last DURATION (a hang's
		 * minutes before, with the sampler or tracing on then). */
		cJSON_AddNumberToObject(args, "since", -o.duration_ms / 1000.0);
	} else {
		if (o.torch && (rc = torch_on(ctx, &o, was, sizeof(was))) !=
				       CLI_OK) {
			cJSON_Delete(args);
			return rc;
		}
		if (o.samples) {
			struct sampling_opts so = {.duration_ms = o.duration_ms,
						   .hz = o.hz,
						   .native = o.native};

			rc = sampling_record(ctx, &so, &since, &until);
		} else {
			rc = wait_window(ctx, o.duration_ms, &since, &until);
		}
		/* Put back even after a failure; then the rows of the
		 * window's last stages reach the tables. */
		if (torch_back(ctx, was) != CLI_OK && rc == CLI_OK)
			rc = CLI_EFAIL;
		if (rc != CLI_OK) {
			cJSON_Delete(args);
			return rc;
		}
		if (o.torch)
			cli_sleep_ms(TRACE_DRAIN_MS);
		cJSON_AddNumberToObject(args, "since", since);
		cJSON_AddNumberToObject(args, "until", until);
	}
	cJSON_AddBoolToObject(args, "samples", o.samples);
	/* Ctrl-C cancels the agent's writing of it. */
	rc = cli_request_cancellable(ctx, "probing/trace", args,
				     ctx->timeout_ms > TRACE_RENDER_MS
					     ? ctx->timeout_ms
					     : TRACE_RENDER_MS,
				     1, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success)
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	else
		rc = write_trace(&o, resp->body);
	dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_trace_entry = {
	.name = "trace",
	.usage = "[-d DURATION] [-o FILE.json] [--hz N] [--native] "
		 "[--no-samples] [--no-torch] [--step-rate N|auto] "
		 "[--recorded]",
	.summary = "Record a timeline (Perfetto / chrome://tracing JSON) of "
		   "torch, collectives, samples and memory",
	.help = "Records DURATION (default 10s) and writes one Chrome trace "
		"(JSON; open it in\n"
		"https://ui.perfetto.dev or chrome://tracing): a track per "
		"thread with the torch\n"
		"module stages and optimizer steps a span each inside a span "
		"per step, the\n"
		"collectives (synchronous ones as spans, asynchronous ones as "
		"async events with\n"
		"their group, seq and bytes), every sample as an instant "
		"event (its stack in\n"
		"args), and the process's memory (and the GPUs') as "
		"counters.  Meanwhile the\n"
		"sampler runs (borrowed when it already runs) and torch "
		"module tracing is on\n"
		"(the steps torch.step_rate picks: auto traces a step when "
		"that keeps tracing\n"
		"near 0.5% of the steps' time), unless it was on already "
		"(then as it is); both\n"
		"are put back after.  Ctrl-C ends the window early.  Past 8 "
		"MiB of trace, a\n"
		"shorter window or fewer steps (--step-rate) is asked for.\n"
		"\n"
		"Options:\n"
		"  -d, --duration D     how long to record: 10s, 500ms, 2m "
		"(default 10s)\n"
		"  -o, --output FILE    write the trace to FILE (without it: "
		"to a pipe)\n"
		"      --hz N           samples per second (default: the "
		"agent's profile.hz)\n"
		"      --native         the samples' stacks with C/C++ "
		"frames\n"
		"      --no-samples     no sampler, no sample events\n"
		"      --no-torch       leave torch module tracing as it is\n"
		"      --step-rate N    trace one step in N while recording "
		"(1: every step;\n"
		"                       default: torch.step_rate, auto)\n"
		"      --recorded       switch nothing on: what the agent "
		"recorded in the last\n"
		"                       DURATION (the sampler's, torch's "
		"and memory's rows)\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 trace -o run.json\n"
		"  probing -t 1234 trace -d 30s --no-samples -o steps.json\n"
		"  probing -t 4242 trace -o run.json   (an ended process: its "
		"whole recording)\n"
		"Every rank of a job in one file: probing -t RANK cluster "
		"trace -o job.json.\n",
	.flags = CMD_TARGET | CMD_RECORDED,
	.exec = cmd_trace_exec,
};
