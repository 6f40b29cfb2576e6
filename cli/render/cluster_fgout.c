/*
 * cluster_fgout: merged stacks, the SVG and speedscope files drawn from
 * them, the top table.  See cluster_fgout.h.
 */
#include "cluster_fgout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "folded.h"

/* ---- merged stacks ------------------------------------------------------ */

/* Adds a rank's folded text ("stack count" lines), prefixed. */
int cluster_fg_merge_add(struct cluster_fg_merged *m, const char *folded,
			 const char *prefix)
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
					struct cluster_fg_stack *p =
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
	return strcmp(((const struct cluster_fg_stack *)a)->text,
		      ((const struct cluster_fg_stack *)b)->text);
}

/* Sorts and adds up equal stacks. */
void cluster_fg_merge_finish(struct cluster_fg_merged *m)
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

void cluster_fg_merge_release(struct cluster_fg_merged *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].text);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* The merged stacks as folded text (caller frees), or NULL. */
char *cluster_fg_folded(const struct cluster_fg_merged *m, size_t *len)
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

/* ---- SVG and speedscope ----------------------------------------------- */

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
static uint32_t stack_id(struct flamegraph *fg, struct trie *t, uint32_t parent,
			 uint32_t frame)
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

/* The rank of a stack that starts with "rank N;", or -1. */
static int64_t rank_of(const char *stack)
{
	char *end;
	long long r;

	if (strncmp(stack, "rank ", 5))
		return -1;
	r = strtoll(stack + 5, &end, 10);
	return *end == ';' && r >= 0 ? r : -1;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* One speedscope profile per rank: the threads, declared in rank order
 * (the order of the profiles). */
static int declare_ranks(struct flamegraph *fg,
			 const struct cluster_fg_merged *m)
{
	int64_t *r = malloc((m->n ? m->n : 1) * sizeof(*r));
	size_t k = 0;
	int rc = 0;

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < m->n; i++)
		r[k++] = rank_of(m->v[i].text);
	qsort(r, k, sizeof(*r), cmp_i64);
	for (size_t i = 0; i < k && !rc; i++) {
		char name[48];

		if (i && r[i] == r[i - 1])
			continue;
		snprintf(name, sizeof(name), "rank %lld", (long long)r[i]);
		rc = flamegraph_add_thread(fg, (uint64_t)(r[i] + 1), 0, name);
	}
	free(r);
	return rc;
}

int cluster_fg_render(const struct cluster_fg_merged *m,
		      enum flamegraph_format format, int per_rank,
		      double interval, const char *title, char **out,
		      size_t *len, char *err, size_t errlen)
{
	struct flamegraph_opts o = {.interval = interval > 0 ? interval : 0.01,
				    .title = title};
	struct flamegraph *fg = flamegraph_new();
	int split = per_rank && format == FLAMEGRAPH_SPEEDSCOPE;
	struct labels l = {0};
	struct trie t = {0};
	uint64_t k = 0;
	int rc = 0;

	if (!fg)
		return -ENOMEM;
	if (m->samples > FLAMEGRAPH_SAMPLES_MAX) {
		snprintf(err, errlen,
			 "%llu samples: more than the %d a "
			 "file can be drawn from; write .folded instead",
			 (unsigned long long)m->samples,
			 FLAMEGRAPH_SAMPLES_MAX);
		rc = -E2BIG;
	}
	/* Thread 0 is "all ranks"; per rank, thread rank + 1. */
	if (!rc)
		rc = split ? declare_ranks(fg, m)
			   : flamegraph_add_thread(fg, 0, 0, "all ranks");
	for (size_t i = 0; i < m->n && !rc; i++) {
		char *copy = strdup(m->v[i].text), *save = NULL, *f;
		uint64_t thread = 0;
		uint32_t stack = 0;

		if (!copy) {
			rc = -ENOMEM;
			break;
		}
		f = strtok_r(copy, ";", &save);
		if (split && rank_of(m->v[i].text) >= 0) {
			thread = (uint64_t)rank_of(m->v[i].text) + 1;
			f = strtok_r(NULL, ";", &save); /* "rank N" goes */
		}
		for (; f && !rc; f = strtok_r(NULL, ";", &save)) {
			uint32_t id = label_id(fg, &l, f);

			stack = id ? stack_id(fg, &t, stack, id) : 0;
			if (!stack)
				rc = -ENOMEM;
		}
		free(copy);
		/* No times in folded stacks: one after the other. */
		for (uint64_t c = 0; c < m->v[i].count && !rc; c++, k++)
			rc = flamegraph_add_sample(fg, (double)k * o.interval,
						   thread, stack,
						   FLAMEGRAPH_RUNNING, 1);
	}
	if (!rc)
		rc = flamegraph_render(fg, format, &o, out, len, err, errlen);
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

/* ---- the top functions ------------------------------------------------- */

int cluster_fg_top(const char *folded, int top, enum cli_format fmt)
{
	static const char *const names[] = {"self%", "total%",	 "self",
					    "total", "function", "where"};
	struct folded_top t;
	struct cli_table *tab;
	char err[256], cells[6][512];
	const char *row[6];
	int n;

	if (folded_top(folded, &t, err, sizeof(err))) {
		folded_top_release(&t);
		return cli_error(CLI_EFAIL,
				 "the merged profile does not read "
				 "back: %s",
				 err);
	}
	tab = cli_table_new(6, names);
	n = tab ? ((int)t.n < top ? (int)t.n : top) : 0;
	for (int i = 0; i < n; i++) {
		const struct folded_fn *f = &t.fns[i];

		snprintf(cells[0], sizeof(cells[0]), "%.1f",
			 t.samples ? 100.0 * (double)f->self / (double)t.samples
				   : 0);
		snprintf(cells[1], sizeof(cells[1]), "%.1f",
			 t.samples
				 ? 100.0 * (double)f->total / (double)t.samples
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
		cli_table_print(tab, stdout, fmt, cli_isatty(stdout));
	}
	cli_table_free(tab);
	folded_top_release(&t);
	return tab ? CLI_OK : cli_error(CLI_EFAIL, "out of memory");
}
