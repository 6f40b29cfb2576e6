/*
 * cluster_fg: `probing cluster flamegraph` — every rank profiled at once
 * and the profiles put together.
 *
 * Each agent records (probing/profile start/stop, all at once), then
 * gives its profile of that time (probing/flamegraph): folded stacks,
 * which the CLI adds up (cluster_fgout.h) into folded text, the top
 * table, an SVG or a speedscope file — merged, or per rank with
 * --per-rank; or, for a Chrome trace, its own trace, and the CLI joins
 * them (a timeline has no "merged": it is always one process per rank).
 * So no profile travels twice and no agent draws another's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "render/cluster_chrome.h"
#include "render/cluster_fgout.h"
#include "render/folded.h"

#define FG_DEFAULT_MS 10000
#define FG_TOP_DEFAULT 20
#define FG_GRACE_MS 30000 /* rendering, on top of the node timeout */

struct fg_opts {
	int duration_ms, hz, idle, lines, tasks, per_rank, top;
	const char *const *labels; /* a root frame per node: processes */
	const char *output;
	const char *as; /* folded, svg, speedscope, chrome; NULL: folded
			   text or the table */
	enum cli_format fmt;
};

/* Writes data to path (stdout when NULL); a file written is said on
 * stderr, with what it holds, as `flamegraph -o` says it. */
static int write_out(const char *path, const char *data, size_t len,
		     const char *what)
{
	FILE *f = path ? fopen(path, "w") : stdout;

	if (!f)
		return cli_error(CLI_EFAIL, "cannot write %s: %s", path,
				 strerror(errno));
	if (fwrite(data, 1, len, f) != len || (path && fclose(f) != 0))
		return cli_error(CLI_EFAIL, "cannot write %s: %s",
				 path ? path : "the output", strerror(errno));
	if (path)
		fprintf(stderr, "probing: wrote %s (%s)\n", path, what);
	return CLI_OK;
}

/* One action of probing/profile on every node still in (ok[i]); those
 * that fail drop out. */
static void profile_all(const struct cluster_opts *co,
			const struct fanout_node *nodes, size_t n, cJSON *args,
			int *ok, struct fanout_result *why)
{
	struct fanout_result *res = calloc(n, sizeof(*res));

	if (!res) {
		memset(ok, 0, n * sizeof(*ok));
		return;
	}
	fanout_run(nodes, n, "probing/profile", args, co->node_timeout_ms, res);
	for (size_t i = 0; i < n; i++) {
		if (ok[i] && (res[i].rc != CLI_OK || !res[i].resp->success)) {
			ok[i] = 0;
			fanout_result_release(&why[i]);
			why[i] = res[i];
			continue;
		}
		fanout_result_release(&res[i]);
	}
	free(res);
	cJSON_Delete(args);
}

/*
 * Records every node for o->duration_ms, then asks each for its profile
 * in format: data[i] is node i's text (heap; NULL when it failed), *hz
 * the rate the first answer names (0: none).  Nodes that fail are
 * reported; returns what cluster_report says.
 */
static int record(const struct cluster_opts *co, const struct fg_opts *o,
		  const struct fanout_node *nodes, size_t n, const char *format,
		  char **data, double *hz)
{
	struct fanout_result *res = calloc(n, sizeof(*res));
	struct fanout_result *fg = calloc(n, sizeof(*fg));
	struct fanout_node *live = calloc(n, sizeof(*live));
	size_t *idx = calloc(n, sizeof(*idx)), k = 0;
	int *ok = calloc(n, sizeof(*ok));
	double in_tasks = 0; /* --tasks: samples that ran one */
	struct timespec ts = {o->duration_ms / 1000,
			      (long)(o->duration_ms % 1000) * 1000000L};
	cJSON *args;
	int rc;

	*hz = 0;
	if (!res || !fg || !live || !idx || !ok) {
		free(res);
		free(fg);
		free(live);
		free(idx);
		free(ok);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		ok[i] = 1;
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "action", "start");
	/* The agents stop on their own too, should this CLI go away. */
	cJSON_AddNumberToObject(args, "durationMs", o->duration_ms);
	if (o->hz)
		cJSON_AddNumberToObject(args, "hz", o->hz);
	profile_all(co, nodes, n, args, ok, res);
	if (cli_isatty(stderr))
		fprintf(stderr, "probing: recording %zu %s for %.1f s\n", n,
			o->labels ? "processes" : "nodes",
			o->duration_ms / 1000.0);
	cli_sigint_catch();
	nanosleep(&ts, NULL); /* Ctrl-C ends it early */
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "action", "stop");
	profile_all(co, nodes, n, args, ok, res);
	for (size_t i = 0; i < n; i++)
		if (ok[i]) {
			live[k] = nodes[i];
			idx[k++] = i;
		}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "format", format);
	if (o->idle)
		cJSON_AddBoolToObject(args, "idle", 1);
	if (o->lines)
		cJSON_AddBoolToObject(args, "lines", 1);
	if (o->tasks)
		cJSON_AddBoolToObject(args, "tasks", 1);
	fanout_run(live, k, "probing/flamegraph", args,
		   co->node_timeout_ms + FG_GRACE_MS, fg);
	cJSON_Delete(args);
	for (size_t j = 0; j < k; j++) {
		size_t i = idx[j];
		const cJSON *body = fg[j].resp ? fg[j].resp->body : NULL;
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(body, "data");
		const cJSON *h = cJSON_GetObjectItemCaseSensitive(body, "hz");
		const cJSON *why =
			cJSON_GetObjectItemCaseSensitive(body, "tasksNote");
		const cJSON *ts =
			cJSON_GetObjectItemCaseSensitive(body, "taskSamples");

		if (o->tasks && cJSON_IsNumber(ts))
			in_tasks += ts->valuedouble;
		if (o->tasks && cJSON_IsString(why))
			cli_error(CLI_OK, "note: %s: %s",
				  o->labels ? o->labels[i] : nodes[i].addr,
				  why->valuestring);

		if (fg[j].rc != CLI_OK || !fg[j].resp->success ||
		    !cJSON_IsString(d)) {
			ok[i] = 0;
			res[i] = fg[j];
			continue;
		}
		if (!*hz && cJSON_IsNumber(h) && h->valuedouble > 0)
			*hz = h->valuedouble;
		data[i] = strdup(d->valuestring);
		if (!data[i]) {
			ok[i] = 0;
			snprintf(res[i].err, sizeof(res[i].err),
				 "out of memory");
			res[i].rc = CLI_EFAIL;
		}
		fanout_result_release(&fg[j]);
	}
	if (o->tasks && !in_tasks)
		cli_error(CLI_OK, "note: no sample ran an asyncio task (no "
				  "asyncio event loop ran one, or profile.tasks "
				  "is off): the stacks are the threads'");
	rc = cluster_report(nodes, n, res, ok, "flamegraph");
	for (size_t i = 0; i < n; i++)
		fanout_result_release(&res[i]);
	free(res);
	free(fg);
	free(live);
	free(idx);
	free(ok);
	return rc;
}

/* The folded output: a file, the table (a terminal, or -f), or the text
 * (a pipe). */
static int put_folded(const struct cluster_fg_merged *m,
		      const struct fg_opts *o)
{
	size_t len = 0;
	char *text = cluster_fg_folded(m, &len), what[96];
	int rc;

	if (!text)
		return cli_error(CLI_EFAIL, "out of memory");
	snprintf(what, sizeof(what), "folded, %llu samples%s",
		 (unsigned long long)m->samples,
		 o->idle ? ", idle and GIL waits included" : " on CPU");
	if (!o->output && !o->as &&
	    (o->fmt != CLI_FORMAT_AUTO || cli_isatty(stdout)))
		rc = cluster_fg_top(text, o->top, o->fmt);
	else
		rc = write_out(o->output, text, len, what);
	free(text);
	return rc;
}

/* Everything but Chrome: from the merged folded stacks. */
static int from_folded(const struct fg_opts *o, const struct fanout_node *nodes,
		       size_t n, char **data, double hz, int rc)
{
	struct cluster_fg_merged m = {0};
	char *out = NULL, err[512], title[256];
	enum flamegraph_format f = FLAMEGRAPH_FOLDED;
	size_t len = 0;
	int rc2 = CLI_OK;

	for (size_t i = 0; i < n && rc2 == CLI_OK; i++) {
		char prefix[320];

		if (o->labels)
			snprintf(prefix, sizeof(prefix), "%s;", o->labels[i]);
		else
			snprintf(prefix, sizeof(prefix), "rank %lld;",
				 (long long)nodes[i].rank);
		if (data[i] &&
		    cluster_fg_merge_add(&m, data[i],
					 o->per_rank ? prefix : NULL))
			rc2 = cli_error(CLI_EFAIL, "out of memory");
	}
	cluster_fg_merge_finish(&m);
	if (rc2 == CLI_OK && m.n == 0)
		rc2 = rc == CLI_OK ? cli_error(CLI_EFAIL,
					       "no samples: the %s were idle "
					       "(try --idle)",
					       o->labels ? "processes"
							 : "ranks")
				   : rc;
	if (rc2 == CLI_OK && o->as)
		flamegraph_format_parse(o->as, &f);
	if (rc2 == CLI_OK && f == FLAMEGRAPH_FOLDED) {
		rc2 = put_folded(&m, o);
	} else if (rc2 == CLI_OK) {
		snprintf(title, sizeof(title), "%zu %s: %llu samples%s", n,
			 o->labels ? "processes" : "ranks",
			 (unsigned long long)m.samples,
			 o->labels     ? ", per process"
			 : o->per_rank ? ", per rank"
				       : ", merged");
		if (cluster_fg_render(&m, f, o->per_rank, hz > 0 ? 1.0 / hz : 0,
				      title, &out, &len, err, sizeof(err)))
			rc2 = cli_error(CLI_EFAIL, "%s", err);
		else
			rc2 = write_out(o->output, out, len, title);
	}
	free(out);
	cluster_fg_merge_release(&m);
	return rc2 != CLI_OK ? rc2 : rc;
}

/* Chrome: the ranks' own traces, joined. */
static int from_chrome(const struct fg_opts *o, const struct fanout_node *nodes,
		       size_t n, char **data, int rc)
{
	int64_t *ranks = calloc(n ? n : 1, sizeof(*ranks));
	const char **hosts = calloc(n ? n : 1, sizeof(*hosts));
	char *out = NULL, err[512];
	size_t len = 0, got = 0;
	int rc2;

	if (!ranks || !hosts) {
		free(ranks);
		free(hosts);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		ranks[i] = nodes[i].rank;
		hosts[i] = nodes[i].host;
		got += data[i] != NULL;
	}
	if (!got)
		rc2 = rc != CLI_OK ? rc : cli_error(CLI_EFAIL, "no traces");
	else if (cluster_chrome_join(ranks, hosts, (const char *const *)data, n,
				     &out, &len, err, sizeof(err)))
		rc2 = cli_error(CLI_EFAIL, "%s", err);
	else {
		char what[64];

		snprintf(what, sizeof(what), "chrome, %zu of %zu ranks' traces",
			 got, n);
		rc2 = write_out(o->output, out, len, what);
	}
	free(out);
	free(ranks);
	free(hosts);
	return rc2 != CLI_OK ? rc2 : rc;
}

int cluster_flamegraph(struct cmd_ctx *ctx, const struct cluster_opts *co,
		       const struct fanout_node *nodes, size_t n, int argc,
		       char **argv)
{
	static const struct option opts[] = {
		{"duration", required_argument, NULL, 'd'},
		{"hz", required_argument, NULL, 'H'},
		{"idle", no_argument, NULL, 'i'},
		{"lines", no_argument, NULL, 'l'},
		{"tasks", no_argument, NULL, 'K'},
		{"per-rank", no_argument, NULL, 'r'},
		{"output", required_argument, NULL, 'o'},
		{"top", required_argument, NULL, 'n'},
		{"format", required_argument, NULL, 'f'},
		{"as", required_argument, NULL, 'a'},
		{"nodes", required_argument, NULL, 'N'},
		{NULL, 0, NULL, 0},
	};
	struct fg_opts o = {.duration_ms = FG_DEFAULT_MS,
			    .top = FG_TOP_DEFAULT,
			    .fmt = ctx->format};
	char **data;
	double hz = 0;
	int c, rc;

	optind = 0;
	while ((c = getopt_long(argc, argv, ":d:o:n:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (cli_parse_duration(optarg, 1000, &o.duration_ms))
				return cli_usage_error(ctx->entry,
						       "bad "
						       "duration '%s'",
						       optarg);
			break;
		case 'H':
			if (cli_parse_ms(optarg, &o.hz) < 0 || o.hz > 10000)
				return cli_usage_error(ctx->entry,
						       "--hz must "
						       "be 1 to 10000");
			break;
		case 'i':
			o.idle = 1;
			break;
		case 'l':
			o.lines = 1;
			break;
		case 'K':
			o.tasks = 1;
			break;
		case 'r':
			o.per_rank = 1;
			break;
		case 'o':
			o.output = optarg;
			break;
		case 'n':
			if (cli_parse_ms(optarg, &o.top) < 0)
				return cli_usage_error(ctx->entry,
						       "--top must "
						       "be a positive number");
			break;
		case 'f':
			if (cli_format_parse(optarg, &o.fmt))
				return CLI_EUSAGE;
			break;
		case 'a':
			if (strcmp(optarg, "svg") && strcmp(optarg, "folded") &&
			    strcmp(optarg, "speedscope") &&
			    strcmp(optarg, "chrome"))
				return cli_usage_error(ctx->entry,
						       "--as must be svg, "
						       "folded, speedscope or "
						       "chrome");
			o.as = optarg;
			break;
		case 'N':
			break; /* read by the caller */
		default:
			return cli_option_error(ctx->entry, c, argc, argv);
		}
	}
	if (optind < argc && cli_parse_duration(argv[optind++], 1000, &o.duration_ms))
		return cli_usage_error(ctx->entry, "bad duration '%s'",
				       argv[optind - 1]);
	if (optind < argc)
		return cli_usage_error(ctx->entry,
				       "flamegraph: unexpected "
				       "'%s'",
				       argv[optind]);
	if (o.output && !o.as && !(o.as = folded_format_of(o.output)))
		return cli_usage_error(ctx->entry,
				       "cannot tell the format of '%s': name "
				       "it .svg, .folded, .speedscope.json or "
				       ".json (Chrome trace), or give --as",
				       o.output);
	data = calloc(n ? n : 1, sizeof(*data));
	if (!data)
		return cli_error(CLI_EFAIL, "out of memory");
	if (o.as && !strcmp(o.as, "chrome")) {
		rc = record(co, &o, nodes, n, "chrome", data, &hz);
		rc = from_chrome(&o, nodes, n, data, rc);
	} else {
		rc = record(co, &o, nodes, n, "folded", data, &hz);
		rc = from_folded(&o, nodes, n, data, hz, rc);
	}
	for (size_t i = 0; i < n; i++)
		free(data[i]);
	free(data);
	return rc;
}

int cluster_flamegraph_procs(const struct fanout_node *nodes, size_t n,
			     const struct cluster_fg_procs *p)
{
	struct cluster_opts co = {.node_timeout_ms = CLUSTER_NODE_TIMEOUT_MS};
	struct fg_opts o = {.duration_ms = p->duration_ms,
			    .hz = p->hz,
			    .idle = p->idle,
			    .lines = p->lines,
			    .tasks = p->tasks,
			    .per_rank = 1,
			    .top = p->top,
			    .labels = p->labels,
			    .output = p->output,
			    .as = p->as,
			    .fmt = p->fmt};
	char **data = calloc(n ? n : 1, sizeof(*data));
	double hz = 0;
	int rc;

	if (!data)
		return cli_error(CLI_EFAIL, "out of memory");
	rc = record(&co, &o, nodes, n, "folded", data, &hz);
	rc = from_folded(&o, nodes, n, data, hz, rc);
	for (size_t i = 0; i < n; i++)
		free(data[i]);
	free(data);
	return rc;
}
