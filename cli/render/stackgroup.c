/*
 * stackgroup: see stackgroup.h.
 */
#include "stackgroup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sort_ctx {
	const struct sg_stack *stacks;
	int lines;
};

static const char *str(const char *s)
{
	return s ? s : "?";
}

/* Orders stacks by their frames alone. */
static int cmp_frames(const struct sg_stack *a, const struct sg_stack *b,
		      int lines)
{
	size_t na = a->n < STACKGROUP_DEPTH_MAX ? a->n : STACKGROUP_DEPTH_MAX;
	size_t nb = b->n < STACKGROUP_DEPTH_MAX ? b->n : STACKGROUP_DEPTH_MAX;
	int d;

	for (size_t i = 0; i < na && i < nb; i++) {
		const struct sg_frame *x = &a->frames[i], *y = &b->frames[i];

		if ((d = strcmp(str(x->func), str(y->func))) ||
		    (d = strcmp(str(x->file), str(y->file))))
			return d;
		if (lines && x->line != y->line)
			return x->line < y->line ? -1 : 1;
	}
	return (na > nb) - (na < nb);
}

/* Orders stack indices by frames, then by rank. */
static int cmp_stack(const void *pa, const void *pb, void *arg)
{
	const struct sort_ctx *c = arg;
	const struct sg_stack *a = &c->stacks[*(const size_t *)pa];
	const struct sg_stack *b = &c->stacks[*(const size_t *)pb];
	int d = cmp_frames(a, b, c->lines);

	return d ? d : (a->rank > b->rank) - (a->rank < b->rank);
}

static int same(const struct sort_ctx *c, size_t i, size_t j)
{
	return cmp_frames(&c->stacks[i], &c->stacks[j], c->lines) == 0;
}

static int64_t first_rank(const struct sg_stack *s, const struct sg_group *g)
{
	return s[g->members[0]].rank;
}

static const struct sg_stack *group_stacks;

static int group_leads(const struct sg_group *g)
{
	for (size_t i = 0; i < g->n; i++)
		if (group_stacks[g->members[i]].lead)
			return 1;
	return 0;
}

static int cmp_group(const void *pa, const void *pb)
{
	const struct sg_group *a = pa, *b = pb;
	int64_t ra, rb;

	if (group_leads(a) != group_leads(b))
		return group_leads(a) ? -1 : 1;
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	ra = first_rank(group_stacks, a);
	rb = first_rank(group_stacks, b);
	return (ra > rb) - (ra < rb);
}

static int cmp_member(const void *pa, const void *pb)
{
	int64_t a = group_stacks[*(const size_t *)pa].rank;
	int64_t b = group_stacks[*(const size_t *)pb].rank;

	return (a > b) - (a < b);
}

int stackgroup_build(const struct sg_stack *stacks, size_t n, int lines,
		     struct sg_group **out, size_t *ngroups)
{
	struct sort_ctx c = {stacks, lines};
	size_t *order, ng = 0;
	struct sg_group *g;

	*out = NULL;
	*ngroups = 0;
	if (n == 0)
		return 0;
	order = malloc(n * sizeof(*order));
	g = calloc(n, sizeof(*g));
	if (!order || !g) {
		free(order);
		free(g);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), cmp_stack, &c);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && same(&c, order[i], order[j]))
			j++;
		g[ng].members = malloc((j - i) * sizeof(size_t));
		if (!g[ng].members) {
			stackgroup_free(g, ng);
			free(order);
			return -ENOMEM;
		}
		memcpy(g[ng].members, order + i, (j - i) * sizeof(size_t));
		g[ng].n = j - i;
		ng++;
		i = j;
	}
	free(order);
	group_stacks = stacks; /* single-threaded: the CLI */
	for (size_t i = 0; i < ng; i++)
		qsort(g[i].members, g[i].n, sizeof(size_t), cmp_member);
	qsort(g, ng, sizeof(*g), cmp_group);
	*out = g;
	*ngroups = ng;
	return 0;
}

void stackgroup_free(struct sg_group *groups, size_t ngroups)
{
	for (size_t i = 0; groups && i < ngroups; i++)
		free(groups[i].members);
	free(groups);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

char *stackgroup_ranges(const int64_t *ranks, size_t n, char *out,
			size_t outlen)
{
	int64_t *s = n ? malloc(n * sizeof(*s)) : NULL;
	size_t len = 0;

	if (outlen)
		out[0] = 0;
	if (!s)
		return out;
	memcpy(s, ranks, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_i64);
	for (size_t i = 0; i < n && len < outlen;) {
		size_t j = i;

		while (j + 1 < n && (s[j + 1] == s[j] || s[j + 1] == s[j] + 1))
			j++;
		if (s[j] == s[i])
			len += (size_t)snprintf(out + len, outlen - len, "%s%lld",
						len ? "," : "",
						(long long)s[i]);
		else
			len += (size_t)snprintf(out + len, outlen - len,
						"%s%lld-%lld", len ? "," : "",
						(long long)s[i],
						(long long)s[j]);
		i = j + 1;
	}
	free(s);
	return out;
}
