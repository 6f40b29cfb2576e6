/*
 * stackgroup: the ranks of a job grouped by what their main thread is
 * doing, for `probing cluster backtrace`.
 *
 * Two ranks are in one group when their stacks have the same frames,
 * frame by frame: the same function in the same file, and with lines on
 * the same line too.  Groups come out smallest first (the odd one out
 * leads), then by their lowest rank; members in rank order.  A group with
 * a stack marked `lead` (what a verdict named: the rank others wait for)
 * comes before the others whatever its size.
 *
 * Pure; caps: STACKGROUP_DEPTH_MAX frames of a stack are compared.
 */
#ifndef CLI_STACKGROUP_H
#define CLI_STACKGROUP_H

#include <stddef.h>
#include <stdint.h>

#define STACKGROUP_DEPTH_MAX 512

struct sg_frame {
	const char *func, *file; /* borrowed; NULL reads "?" */
	int64_t line;
};

struct sg_stack {
	int64_t rank;
	const struct sg_frame *frames; /* innermost first; borrowed */
	size_t n;
	int lead; /* its group first */
};

struct sg_group {
	size_t *members; /* indices into the stacks given, rank order */
	size_t n;
};

/*
 * Groups the n stacks.  *out is a heap array of *ngroups groups, freed
 * with stackgroup_free.  Returns 0 or -ENOMEM (nothing to free).
 */
int stackgroup_build(const struct sg_stack *stacks, size_t n, int lines,
		     struct sg_group **out, size_t *ngroups);

void stackgroup_free(struct sg_group *groups, size_t ngroups);

/* "0-6,8-15,17" from ranks (any order, duplicates allowed).  Returns out
 * (cut short when outlen is too small; "" when n is 0 or on no memory). */
char *stackgroup_ranges(const int64_t *ranks, size_t n, char *out,
			size_t outlen);

#endif
