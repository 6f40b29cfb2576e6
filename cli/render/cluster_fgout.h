/*
 * cluster_fgout: what `probing cluster flamegraph` makes of the ranks'
 * profiles — merged stacks, and the files and tables drawn from them.
 *
 * Folded, SVG and speedscope come from the ranks' folded stacks, added
 * up here (cluster_fg_merged); with per-rank on, every stack starts with
 * a frame "rank N".  The SVG and speedscope files are drawn by the
 * agent's own renderer (common/flamegraph.h, linked into the CLI): the SVG
 * with the "rank N" frames as roots, speedscope with one profile per rank
 * (named "rank N", the frame dropped) or one for all.  A folded stack has
 * no time, so a speedscope profile lists its stacks in name order, each
 * once with its weight: the "Left Heavy" and "Sandwich" views are the
 * meaningful ones, "Time Order" is that order.
 *
 * Chrome traces are timelines, not made from folded stacks: see
 * cluster_chrome.h.
 *
 * Caps: the renderer's own (FLAMEGRAPH_SAMPLES_MAX, FLAMEGRAPH_OUTPUT_MAX).
 * Pure:
 * no I/O but the table printed by cluster_fg_top; single-threaded.
 */
#ifndef CLI_CLUSTER_FGOUT_H
#define CLI_CLUSTER_FGOUT_H

#include <stddef.h>
#include <stdint.h>

#include "flamegraph.h"
#include "output.h"

struct cluster_fg_stack {
	char *text; /* "a;b;c", owned */
	uint64_t count;
};

/* Zero-initialized to start; released with cluster_fg_merge_release. */
struct cluster_fg_merged {
	struct cluster_fg_stack *v;
	size_t n, cap;
	uint64_t samples;
};

/* Adds a rank's folded text ("stack count" lines; others skipped), each
 * stack prefixed with prefix (may be NULL).  0 or -ENOMEM. */
int cluster_fg_merge_add(struct cluster_fg_merged *m, const char *folded,
			 const char *prefix);

/* Sorts the stacks and adds up equal ones. */
void cluster_fg_merge_finish(struct cluster_fg_merged *m);

void cluster_fg_merge_release(struct cluster_fg_merged *m);

/* The merged stacks as folded text (a heap string the caller frees; its
 * length in *len), or NULL when out of memory. */
char *cluster_fg_folded(const struct cluster_fg_merged *m, size_t *len);

/*
 * Renders m (finished) as FLAMEGRAPH_SVG or FLAMEGRAPH_SPEEDSCOPE; per_rank:
 * the stacks start with "rank N" (speedscope: a profile per rank).
 * interval: seconds a sample stands for.  *out: a heap string the caller
 * frees.  0, or -ENOMEM / -E2BIG with err.
 */
int cluster_fg_render(const struct cluster_fg_merged *m,
		      enum flamegraph_format format, int per_rank,
		      double interval, const char *title, char **out,
		      size_t *len, char *err, size_t errlen);

/* Prints the top functions of folded text as a table (at most top rows). */
int cluster_fg_top(const char *folded, int top, enum cli_format fmt);

#endif
