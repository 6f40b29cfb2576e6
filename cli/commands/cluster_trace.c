/*
 * cluster_trace: `probing cluster trace` — every rank's timeline of the
 * same window in one Chrome trace, a process per rank on one clock.
 *
 * As `probing trace` does for one process, on every rank at once: torch
 * module tracing on where it is off, the sampler started (with the
 * duration as its lease), both put back; then each rank's agent answers
 * probing/trace for the window (sql/tracereq.h) and the traces are joined
 * (render/cluster_chrome.h: each rank's times moved onto the earliest
 * one's clock by its startTime).  A rank whose process has ended answers
 * from its recording.  Each rank is given the window as seconds before
 * its own now, so no two clocks need agree for the asking.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "render/cluster_chrome.h"

#define TRACE_DEFAULT_MS 10000
#define TRACE_DRAIN_MS 400
#define TRACE_GRACE_MS 60000 /* each rank's rendering, past the timeout */

struct ctrace_opts {
	int duration_ms, hz, samples, torch;
	const char *step_rate, *output;
};

/* Where each node is at: what was asked of it worked (ok), what to put
 * back (was: torch.step_rate, "" when tracing was on or not reached). */
struct ctrace {
	const struct cluster_opts *co;
	const struct fanout_node *nodes;
	size_t n;
	struct fanout_result *res;
	char (*was)[64];
	int *sampling;
};

static double mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Sends command (args owned) to the nodes where want[i] (NULL: all); the
 * answers in ct->res, those before released.  Returns how many
 * succeeded; sets ok[i] (when given) for them. */
static size_t ask(struct ctrace *ct, const int *want, const char *command,
		  cJSON *args, int timeout_ms, int *ok)
{
	struct fanout_node *sub = calloc(ct->n ? ct->n : 1, sizeof(*sub));
	size_t *idx = calloc(ct->n ? ct->n : 1, sizeof(*idx));
	struct fanout_result *r = calloc(ct->n ? ct->n : 1, sizeof(*r));
	size_t k = 0, good = 0;

	if (ok)
		memset(ok, 0, ct->n * sizeof(*ok));
	if (sub && idx && r) {
		for (size_t i = 0; i < ct->n; i++)
			if (!want || want[i]) {
				sub[k] = ct->nodes[i];
				idx[k++] = i;
			}
		if (k && fanout_run(sub, k, command, args, timeout_ms, r))
			k = 0;
		for (size_t j = 0; j < k; j++) {
			size_t i = idx[j];
			int fine = r[j].rc == CLI_OK && r[j].resp->success;

			fanout_result_release(&ct->res[i]);
			ct->res[i] = r[j];
			good += fine;
			if (ok)
				ok[i] = fine;
		}
	}
	free(sub);
	free(idx);
	free(r);
	cJSON_Delete(args);
	return good;
}

/* A rank where a step failed, on stderr; the trace goes on without what
 * it would have added there. */
static void warn_failed(const struct ctrace *ct, const int *want,
			const int *ok, const char *what)
{
	for (size_t i = 0; i < ct->n; i++)
		if (want[i] && !ok[i])
			fprintf(stderr, "probing: rank %lld (%s): %s: %s\n",
				(long long)ct->nodes[i].rank,
				ct->nodes[i].addr[0] ? ct->nodes[i].addr
						     : "recorded",
				what, cluster_why_failed(&ct->res[i]));
}

/* Torch module tracing on where it is off (live ranks). */
static void torch_on(struct ctrace *ct, const struct ctrace_opts *o,
		     int *want, int *ok)
{
	cJSON *args, *set;

	for (size_t i = 0; i < ct->n; i++)
		want[i] = !ct->nodes[i].rec[0];
	ask(ct, want, "probing/config", cJSON_CreateObject(),
	    ct->co->node_timeout_ms, ok);
	warn_failed(ct, want, ok, "its settings not read (torch tracing "
				  "left as it is)");
	for (size_t i = 0; i < ct->n; i++) {
		const struct dap_message *r = ct->res[i].resp;

		want[i] = want[i] && ok[i] &&
			  strcmp(cli_setting(r, "torch.profiling"), "on");
		if (want[i])
			snprintf(ct->was[i], sizeof(ct->was[i]), "%s",
				 cli_setting(r, "torch.step_rate"));
	}
	args = cJSON_CreateObject();
	set = cJSON_AddObjectToObject(args, "set");
	cJSON_AddStringToObject(set, "torch.profiling", "on");
	if (o->step_rate)
		cJSON_AddStringToObject(set, "torch.step_rate", o->step_rate);
	/* For the window: should this CLI die, each agent puts it back. */
	cJSON_AddNumberToObject(args, "restoreAfterMs",
				CLI_LEASE_MS(o->duration_ms));
	ask(ct, want, "probing/config", args, ct->co->node_timeout_ms, ok);
	warn_failed(ct, want, ok, "torch tracing not switched on");
	for (size_t i = 0; i < ct->n; i++)
		if (!want[i] || !ok[i])
			ct->was[i][0] = '\0';
}

/* Torch tracing put back where it was switched on: each rank its own
 * step rate, a request each (only the ranks this trace switched). */
static void torch_back(struct ctrace *ct, int *want, int *ok)
{
	for (size_t i = 0; i < ct->n; i++) {
		struct ctrace one = *ct;
		cJSON *args, *set;
		int w = 1;

		ok[i] = 1;
		want[i] = ct->was[i][0] != '\0';
		if (!want[i])
			continue;
		args = cJSON_CreateObject();
		set = cJSON_AddObjectToObject(args, "set");
		cJSON_AddStringToObject(set, "torch.profiling", "off");
		cJSON_AddStringToObject(set, "torch.step_rate", ct->was[i]);
		one.nodes = &ct->nodes[i];
		one.n = 1;
		one.res = &ct->res[i];
		ask(&one, &w, "probing/config", args, ct->co->node_timeout_ms,
		    &ok[i]);
	}
	warn_failed(ct, want, ok, "torch tracing not switched back off");
}

static int write_joined(const struct ctrace *ct, const struct ctrace_opts *o,
			char **data, size_t got)
{
	int64_t *ranks = calloc(ct->n ? ct->n : 1, sizeof(*ranks));
	const char **hosts = calloc(ct->n ? ct->n : 1, sizeof(*hosts));
	char *out = NULL, err[512];
	size_t len = 0;
	FILE *f;
	int rc = CLI_OK;

	if (!ranks || !hosts) {
		free(ranks);
		free(hosts);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	for (size_t i = 0; i < ct->n; i++) {
		ranks[i] = ct->nodes[i].rank;
		hosts[i] = ct->nodes[i].host;
	}
	if (cluster_chrome_join(ranks, hosts, (const char *const *)data, ct->n,
				&out, &len, err, sizeof(err)))
		rc = cli_error(CLI_EFAIL, "%s", err);
	free(ranks);
	free(hosts);
	if (rc != CLI_OK)
		return rc;
	f = o->output ? fopen(o->output, "w") : stdout;
	if (!f || fwrite(out, 1, len, f) != len) {
		rc = cli_error(CLI_EFAIL, "cannot write %s: %s",
			       o->output ? o->output : "the output",
			       strerror(errno));
		if (f && o->output)
			fclose(f);
	} else if ((o->output ? fclose(f) : fflush(f)) != 0)
		rc = cli_error(CLI_EFAIL, "cannot write %s: %s",
			       o->output ? o->output : "the output",
			       strerror(errno));
	else
		fprintf(stderr,
			"probing: %s%s%s%zu of %zu ranks' traces, a process "
			"per rank%s\n",
			o->output ? "wrote " : "", o->output ? o->output : "",
			o->output ? " (" : "", got, ct->n,
			o->output ? "; open it in https://ui.perfetto.dev or "
				    "chrome://tracing)"
				  : "");
	free(out);
	return rc;
}

static int record(struct ctrace *ct, const struct ctrace_opts *o,
		  char **data, size_t *got)
{
	int *want = calloc(ct->n ? ct->n : 1, sizeof(*want));
	int *ok = calloc(ct->n ? ct->n : 1, sizeof(*ok));
	struct timespec nap = {0, 100 * 1000000L};
	double t_start, t_stop, t_ask;
	cJSON *args;
	int rc;

	if (!want || !ok) {
		free(want);
		free(ok);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	cli_sigint_catch(); /* Ctrl-C ends the window, never the put-back */
	if (o->torch)
		torch_on(ct, o, want, ok);
	t_start = mono_s();
	if (o->samples) {
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "action", "start");
		/* The agents stop on their own, should this CLI go away. */
		cJSON_AddNumberToObject(args, "durationMs", o->duration_ms);
		if (o->hz)
			cJSON_AddNumberToObject(args, "hz", o->hz);
		for (size_t i = 0; i < ct->n; i++)
			want[i] = !ct->nodes[i].rec[0];
		ask(ct, want, "probing/profile", args, ct->co->node_timeout_ms,
		    ct->sampling);
		warn_failed(ct, want, ct->sampling,
			    "the sampler not started (its samples, if it "
			    "runs, are used)");
	}
	if (cli_isatty(stderr))
		fprintf(stderr, "probing: tracing %zu ranks for %.1f s\n",
			ct->n, o->duration_ms / 1000.0);
	while (mono_s() - t_start < o->duration_ms / 1000.0 && !cli_sigint)
		nanosleep(&nap, NULL);
	cli_sigint = 0;
	if (o->samples) {
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "action", "stop");
		ask(ct, ct->sampling, "probing/profile", args,
		    ct->co->node_timeout_ms, ok);
	}
	t_stop = mono_s();
	if (o->torch) {
		torch_back(ct, want, ok);
		nanosleep(&(struct timespec){0, TRACE_DRAIN_MS * 1000000L},
			  NULL);
	}
	t_ask = mono_s();
	args = cJSON_CreateObject();
	cJSON_AddNumberToObject(args, "since", -(t_ask - t_start));
	cJSON_AddNumberToObject(args, "until", -(t_ask - t_stop));
	cJSON_AddBoolToObject(args, "samples", o->samples);
	ask(ct, NULL, "probing/trace", args,
	    ct->co->node_timeout_ms + TRACE_GRACE_MS, ok);
	*got = 0;
	for (size_t i = 0; i < ct->n; i++) {
		const cJSON *d = ok[i] ? cJSON_GetObjectItemCaseSensitive(
						 ct->res[i].resp->body, "data")
				       : NULL;

		if (cJSON_IsString(d) && (data[i] = strdup(d->valuestring)))
			(*got)++;
		else
			ok[i] = 0;
	}
	rc = cluster_report(ct->nodes, ct->n, ct->res, ok, "trace");
	free(want);
	free(ok);
	return rc;
}

int cluster_trace(struct cmd_ctx *ctx, const struct cluster_opts *co,
		  const struct fanout_node *nodes, size_t n, int argc,
		  char **argv)
{
	static const struct option opts[] = {
		{"duration", required_argument, NULL, 'd'},
		{"output", required_argument, NULL, 'o'},
		{"hz", required_argument, NULL, 'H'},
		{"no-samples", no_argument, NULL, 'S'},
		{"no-torch", no_argument, NULL, 'T'},
		{"step-rate", required_argument, NULL, 's'},
		{"nodes", required_argument, NULL, 'N'},
		{NULL, 0, NULL, 0},
	};
	struct ctrace_opts o = {.duration_ms = TRACE_DEFAULT_MS,
				.samples = 1,
				.torch = 1};
	struct ctrace ct = {.co = co, .nodes = nodes, .n = n};
	char **data = NULL;
	size_t got = 0;
	int c, rc, rate;

	optind = 0;
	while ((c = getopt_long(argc, argv, ":d:o:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (cli_parse_duration(optarg, 1000, &o.duration_ms))
				return cli_duration_error(ctx->entry,
							  "--duration", optarg);
			break;
		case 'o':
			o.output = optarg;
			break;
		case 'H':
			if (cli_parse_ms(optarg, &o.hz) < 0 || o.hz > 10000)
				return cli_usage_error(ctx->entry,
						       "--hz must be in [1, "
						       "10000]");
			break;
		case 'S':
			o.samples = 0;
			break;
		case 'T':
			o.torch = 0;
			break;
		case 's':
			if (strcmp(optarg, "auto") &&
			    cli_parse_ms(optarg, &rate) < 0)
				return cli_usage_error(ctx->entry,
						       "--step-rate must be "
						       "auto or a positive "
						       "number");
			o.step_rate = optarg;
			break;
		case 'N':
			break; /* read by the caller */
		default:
			return cli_option_error(ctx->entry, c, argc, argv);
		}
	}
	if (optind < argc &&
	    cli_parse_duration(argv[optind++], 1000, &o.duration_ms))
		return cli_duration_error(ctx->entry, "DURATION",
					  argv[optind - 1]);
	if (optind < argc)
		return cli_usage_error(ctx->entry, "trace: unexpected '%s'",
				       argv[optind]);
	if (!o.output && cli_isatty(stdout))
		return cli_usage_error(ctx->entry,
				       "trace: a trace is a file: give -o "
				       "FILE.json (or send it to a pipe)");
	data = calloc(n ? n : 1, sizeof(*data));
	ct.res = calloc(n ? n : 1, sizeof(*ct.res));
	ct.was = calloc(n ? n : 1, sizeof(*ct.was));
	ct.sampling = calloc(n ? n : 1, sizeof(*ct.sampling));
	if (!data || !ct.res || !ct.was || !ct.sampling)
		rc = cli_error(CLI_EFAIL, "out of memory");
	else
		rc = record(&ct, &o, data, &got);
	if (got) {
		int rc2 = write_joined(&ct, &o, data, got);

		rc = rc2 != CLI_OK ? rc2 : rc;
	} else if (data && ct.res && ct.was && ct.sampling && rc == CLI_OK) {
		rc = cli_error(CLI_EFAIL, "no rank gave a trace");
	}
	for (size_t i = 0; data && i < n; i++)
		free(data[i]);
	for (size_t i = 0; ct.res && i < n; i++)
		fanout_result_release(&ct.res[i]);
	free(data);
	free(ct.res);
	free(ct.was);
	free(ct.sampling);
	return rc;
}
