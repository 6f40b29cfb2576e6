/*
 * cluster_fg: `probing cluster flamegraph` — every rank profiled at once
 * and the profiles merged.
 *
 * Each agent records (probing/profile start/stop) and gives its folded
 * stacks (probing/flamegraph format folded); the CLI adds them up, with
 * a root frame "rank N" per rank when asked (--per-rank).  The merged
 * SVG is drawn here by the agent's own renderer (agent/flamegraph.h, a
 * pure module linked into the CLI), so one merged picture needs no agent
 * to draw it and no profile travels twice.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster.h"
#include "flamegraph.h"
#include "folded.h"

#define FG_DEFAULT_MS 10000
#define FG_TOP_DEFAULT 20
#define FG_GRACE_MS 30000 /* rendering, on top of the node timeout */

struct fg_opts {
	int duration_ms, hz, idle, lines, per_rank, top;
	const char *output;
	enum cli_format fmt;
};

struct stack {
	char *text; /* "a;b;c" */
	uint64_t count;
};

struct merged {
	struct stack *v;
	size_t n, cap;
	uint64_t samples;
};

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* Adds a rank's folded text ("stack count" lines), prefixed. */
static int merge_add(struct merged *m, const char *folded, const char *prefix)
{
	const char *line = folded;

	while (line && *line) {
		const char *nl = strchr(line, '\n'), *sp;
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		unsigned long long count;
		char *end;

		sp = len ? memrchr(line, ' ', len) : NULL;
		if (sp && sp > line) {
			count = strtoull(sp + 1, &end, 10);
			if (end == line + len && count > 0) {
				size_t plen = prefix ? strlen(prefix) : 0;
				size_t slen = (size_t)(sp - line);
				char *t = malloc(plen + slen + 1);

				if (!t)
					return -ENOMEM;
				if (plen)
					memcpy(t, prefix, plen);
				memcpy(t + plen, line, slen);
				t[plen + slen] = 0;
				if (m->n == m->cap) {
					size_t cap = m->cap ? m->cap * 2 : 256;
					struct stack *p =
						realloc(m->v, cap * sizeof(*p));
					if (!p) {
						free(t);
						return -ENOMEM;
					}
					m->v = p;
					m->cap = cap;
				}
				m->v[m->n].text = t;
				m->v[m->n++].count = count;
				m->samples += count;
			}
		}
		line = nl ? nl + 1 : NULL;
	}
	return 0;
}

static int cmp_stack(const void *a, const void *b)
{
	return strcmp(((const struct stack *)a)->text,
		      ((const struct stack *)b)->text);
}

/* Sorts and adds up equal stacks. */
static void merge_finish(struct merged *m)
{
	size_t out = 0;

	qsort(m->v, m->n, sizeof(*m->v), cmp_stack);
	for (size_t i = 0; i < m->n; i++) {
		if (out && !strcmp(m->v[out - 1].text, m->v[i].text)) {
			m->v[out - 1].count += m->v[i].count;
			free(m->v[i].text);
			continue;
		}
		m->v[out++] = m->v[i];
	}
	m->n = out;
}

static void merge_release(struct merged *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].text);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* The merged stacks as folded text (caller frees), or NULL. */
static char *folded_text(const struct merged *m, size_t *len)
{
	size_t cap = 1, n = 0;
	char *out;

	for (size_t i = 0; i < m->n; i++)
		cap += strlen(m->v[i].text) + 24;
	out = malloc(cap);
	if (!out)
		return NULL;
	out[0] = 0;
	for (size_t i = 0; i < m->n; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s %llu\n",
				      m->v[i].text,
				      (unsigned long long)m->v[i].count);
	*len = n;
	return out;
}

/* ---- the SVG ------------------------------------------------------------- */

struct labels {
	char **v;
	size_t n, cap;
};

/* The id (> 0) of label, declared in fg on first sight; 0 on failure.
 * A linear table is enough: a merged profile has thousands of labels. */
static uint32_t label_id(struct flamegraph *fg, struct labels *l,
			 const char *label)
{
	char func[1024], where[1024];

	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], label))
			return (uint32_t)i + 1;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		char **p = realloc(l->v, cap * sizeof(*p));
		if (!p)
			return 0;
		l->v = p;
		l->cap = cap;
	}
	l->v[l->n] = strdup(label);
	if (!l->v[l->n])
		return 0;
	l->n++;
	/* "func (file.py)" is a Python frame, drawn as the agent draws it;
	 * anything else ("sym (lib.so)", "(idle)", "rank 3") keeps its text
	 * (a native frame with no file shows its name as it is). */
	folded_label_split(label, func, sizeof(func), where, sizeof(where));
	if (strstr(where, ".py"))
		flamegraph_add_frame(fg, (uint32_t)l->n, func, where, -1, 0);
	else
		flamegraph_add_frame(fg, (uint32_t)l->n, label, "", -1, 1);
	return (uint32_t)l->n;
}

struct trie {
	uint32_t *parent, *frame; /* per stack id - 1 */
	size_t n, cap;
};

/* The stack id of (parent, frame), declared on first sight; 0 on
 * failure.  Stacks come sorted, so the path so far is a prefix cache. */
static uint32_t stack_id(struct flamegraph *fg, struct trie *t,
			 uint32_t parent, uint32_t frame)
{
	for (size_t i = t->n; i > 0; i--)
		if (t->parent[i - 1] == parent && t->frame[i - 1] == frame)
			return (uint32_t)i;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		uint32_t *p = realloc(t->parent, cap * sizeof(*p));
		uint32_t *f = p ? realloc(t->frame, cap * sizeof(*f)) : NULL;

		if (p)
			t->parent = p;
		if (!f)
			return 0;
		t->frame = f;
		t->cap = cap;
	}
	t->parent[t->n] = parent;
	t->frame[t->n] = frame;
	t->n++;
	if (flamegraph_add_stack(fg, (uint32_t)t->n, parent, frame))
		return 0;
	return (uint32_t)t->n;
}

static int render_svg(const struct merged *m, const char *title, char **out,
		      size_t *len, char *err, size_t errlen)
{
	struct flamegraph_opts o = {.interval = 0.01, .title = title};
	struct flamegraph *fg = flamegraph_new();
	struct labels l = {0};
	struct trie t = {0};
	int rc = 0;

	if (!fg)
		return -ENOMEM;
	if (m->samples > FLAMEGRAPH_SAMPLES_MAX) {
		snprintf(err, errlen, "%llu samples: more than the %d the "
			 "SVG can draw; write .folded instead",
			 (unsigned long long)m->samples,
			 FLAMEGRAPH_SAMPLES_MAX);
		rc = -E2BIG;
	}
	for (size_t i = 0; i < m->n && !rc; i++) {
		char *copy = strdup(m->v[i].text), *save = NULL;
		uint32_t stack = 0;

		if (!copy) {
			rc = -ENOMEM;
			break;
		}
		for (char *f = strtok_r(copy, ";", &save); f && !rc;
		     f = strtok_r(NULL, ";", &save)) {
			uint32_t id = label_id(fg, &l, f);

			stack = id ? stack_id(fg, &t, stack, id) : 0;
			if (!stack)
				rc = -ENOMEM;
		}
		free(copy);
		for (uint64_t k = 0; k < m->v[i].count && !rc; k++)
			rc = flamegraph_add_sample(fg, 0, 0, stack,
						   FLAMEGRAPH_RUNNING, 1);
	}
	if (!rc)
		rc = flamegraph_render(fg, FLAMEGRAPH_SVG, &o, out, len, err,
				       errlen);
	else if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i]);
	free(l.v);
	free(t.parent);
	free(t.frame);
	flamegraph_free(fg);
	return rc;
}

/* ---- the command --------------------------------------------------------- */

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

static int show_top(const char *folded, const struct fg_opts *o)
{
	static const char *const names[] = {"self%", "total%", "self",
					    "total", "function", "where"};
	struct folded_top t;
	struct cli_table *tab;
	char err[256], cells[6][512];
	const char *row[6];
	int n;

	if (folded_top(folded, &t, err, sizeof(err))) {
		folded_top_release(&t);
		return cli_error(CLI_EFAIL, "the merged profile does not read "
				 "back: %s", err);
	}
	tab = cli_table_new(6, names);
	n = tab ? ((int)t.n < o->top ? (int)t.n : o->top) : 0;
	for (int i = 0; i < n; i++) {
		const struct folded_fn *f = &t.fns[i];

		snprintf(cells[0], sizeof(cells[0]), "%.1f",
			 t.samples ? 100.0 * (double)f->self / (double)t.samples
				   : 0);
		snprintf(cells[1], sizeof(cells[1]), "%.1f",
			 t.samples ? 100.0 * (double)f->total /
					     (double)t.samples
				   : 0);
		snprintf(cells[2], sizeof(cells[2]), "%llu",
			 (unsigned long long)f->self);
		snprintf(cells[3], sizeof(cells[3]), "%llu",
			 (unsigned long long)f->total);
		folded_label_split(f->label, cells[4], sizeof(cells[4]),
				   cells[5], sizeof(cells[5]));
		for (int c = 0; c < 6; c++)
			row[c] = cells[c];
		cli_table_add(tab, row);
	}
	for (int c = 0; tab && c < 4; c++)
		cli_table_align_right(tab, c);
	if (tab) {
		cli_table_upper_header(tab);
		cli_table_print(tab, stdout, o->fmt, cli_isatty(stdout));
	}
	cli_table_free(tab);
	folded_top_release(&t);
	return tab ? CLI_OK : cli_error(CLI_EFAIL, "out of memory");
}

/* One action of probing/profile on every node still in (ok[i]); those
 * that fail drop out. */
static void profile_all(const struct cluster_opts *co,
			const struct fanout_node *nodes, size_t n,
			cJSON *args, int *ok, struct fanout_result *why)
{
	struct fanout_result *res = calloc(n, sizeof(*res));

	if (!res) {
		memset(ok, 0, n * sizeof(*ok));
		return;
	}
	fanout_run(nodes, n, "probing/profile", args, co->node_timeout_ms,
		   res);
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

static int record_and_merge(const struct cluster_opts *co,
			    const struct fg_opts *o,
			    const struct fanout_node *nodes, size_t n,
			    struct merged *m)
{
	struct fanout_result *res = calloc(n, sizeof(*res));
	int *ok = calloc(n, sizeof(*ok));
	struct timespec ts = {o->duration_ms / 1000,
			      (long)(o->duration_ms % 1000) * 1000000L};
	cJSON *args;
	int rc = CLI_OK;

	if (!res || !ok) {
		free(res);
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
		fprintf(stderr, "probing: recording %zu nodes for %.1f s\n", n,
			o->duration_ms / 1000.0);
	cli_sigint_catch();
	nanosleep(&ts, NULL); /* Ctrl-C ends it early */
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "action", "stop");
	profile_all(co, nodes, n, args, ok, res);
	{
		struct fanout_result *fg = calloc(n, sizeof(*fg));
		struct fanout_node *live = calloc(n, sizeof(*live));
		size_t *idx = calloc(n, sizeof(*idx)), k = 0;

		if (!fg || !live || !idx) {
			free(fg);
			free(live);
			free(idx);
			rc = cli_error(CLI_EFAIL, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < n; i++)
			if (ok[i]) {
				live[k] = nodes[i];
				idx[k++] = i;
			}
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "format", "folded");
		if (o->idle)
			cJSON_AddBoolToObject(args, "idle", 1);
		if (o->lines)
			cJSON_AddBoolToObject(args, "lines", 1);
		fanout_run(live, k, "probing/flamegraph", args,
			   co->node_timeout_ms + FG_GRACE_MS, fg);
		cJSON_Delete(args);
		for (size_t j = 0; j < k; j++) {
			size_t i = idx[j];
			const cJSON *d = fg[j].resp ? cJSON_GetObjectItemCaseSensitive(
							      fg[j].resp->body,
							      "data")
						    : NULL;
			char prefix[64];

			if (fg[j].rc != CLI_OK || !fg[j].resp->success ||
			    !cJSON_IsString(d)) {
				ok[i] = 0;
				res[i] = fg[j];
				continue;
			}
			snprintf(prefix, sizeof(prefix), "rank %lld;",
				 (long long)nodes[i].rank);
			if (merge_add(m, d->valuestring,
				      o->per_rank ? prefix : NULL))
				rc = cli_error(CLI_EFAIL, "out of memory");
			fanout_result_release(&fg[j]);
		}
		free(fg);
		free(live);
		free(idx);
	}
	merge_finish(m);
out:
	{
		int r2 = cluster_report(nodes, n, res, ok, "flamegraph");
		if (rc == CLI_OK)
			rc = r2;
	}
	for (size_t i = 0; i < n; i++)
		fanout_result_release(&res[i]);
	free(res);
	free(ok);
	return rc;
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
		{"per-rank", no_argument, NULL, 'r'},
		{"output", required_argument, NULL, 'o'},
		{"top", required_argument, NULL, 'n'},
		{"format", required_argument, NULL, 'f'},
		{"nodes", required_argument, NULL, 'N'},
		{NULL, 0, NULL, 0},
	};
	struct fg_opts o = {.duration_ms = FG_DEFAULT_MS,
			    .top = FG_TOP_DEFAULT,
			    .fmt = ctx->format};
	struct merged m = {0};
	char *out = NULL, err[512], title[256];
	size_t len = 0;
	int c, rc, rc2;

	optind = 0;
	while ((c = getopt_long(argc, argv, ":d:o:n:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (cli_parse_duration(optarg, &o.duration_ms))
				return cli_usage_error(ctx->entry, "bad "
						       "duration '%s'", optarg);
			break;
		case 'H':
			if (cli_parse_ms(optarg, &o.hz) < 0 || o.hz > 10000)
				return cli_usage_error(ctx->entry, "--hz must "
						       "be 1 to 10000");
			break;
		case 'i':
			o.idle = 1;
			break;
		case 'l':
			o.lines = 1;
			break;
		case 'r':
			o.per_rank = 1;
			break;
		case 'o':
			o.output = optarg;
			break;
		case 'n':
			if (cli_parse_ms(optarg, &o.top) < 0)
				return cli_usage_error(ctx->entry, "--top must "
						       "be a positive number");
			break;
		case 'f':
			if (cli_format_parse(optarg, &o.fmt))
				return CLI_EUSAGE;
			break;
		case 'N':
			break; /* read by the caller */
		default:
			return cli_option_error(ctx->entry, c, argc, argv);
		}
	}
	if (optind < argc &&
	    cli_parse_duration(argv[optind++], &o.duration_ms))
		return cli_usage_error(ctx->entry, "bad duration '%s'",
				       argv[optind - 1]);
	if (optind < argc)
		return cli_usage_error(ctx->entry, "flamegraph: unexpected "
				       "'%s'", argv[optind]);
	if (o.output && !ends_with(o.output, ".svg") &&
	    !ends_with(o.output, ".folded") &&
	    !ends_with(o.output, ".collapsed") && !ends_with(o.output, ".txt"))
		return cli_usage_error(ctx->entry, "cluster flamegraph writes "
				       "FILE.svg or FILE.folded (.collapsed, "
				       ".txt)");
	rc = record_and_merge(co, &o, nodes, n, &m);
	if (m.n == 0) {
		merge_release(&m);
		return rc == CLI_OK ? cli_error(CLI_EFAIL, "no samples: the "
						"ranks were idle (try --idle)")
				    : rc;
	}
	if (o.output && ends_with(o.output, ".svg")) {
		snprintf(title, sizeof(title), "%zu ranks: %llu samples%s", n,
			 (unsigned long long)m.samples,
			 o.per_rank ? ", per rank" : ", merged");
		rc2 = render_svg(&m, title, &out, &len, err, sizeof(err));
		if (rc2)
			rc2 = cli_error(CLI_EFAIL, "%s", err);
		else
			rc2 = write_file(o.output, out, len);
	} else {
		out = folded_text(&m, &len);
		if (!out)
			rc2 = cli_error(CLI_EFAIL, "out of memory");
		else if (o.output)
			rc2 = write_file(o.output, out, len);
		else if (o.fmt != CLI_FORMAT_AUTO || cli_isatty(stdout))
			rc2 = show_top(out, &o);
		else
			rc2 = fwrite(out, 1, len, stdout) == len ? CLI_OK
								 : CLI_EFAIL;
	}
	free(out);
	merge_release(&m);
	return rc2 != CLI_OK ? rc2 : rc;
}
