/*
 * subprocs: the target and its Python children as one set of processes
 * (`flamegraph --subprocesses`): DataLoader workers, multiprocessing
 * pools, a compile worker — every descendant of the target that has an
 * agent (PROBING=2 gives each Python child one) or, with --inject, gets
 * one now (`probing -t CHILD inject`, run as a command of its own).
 * Children that look like Python (their executable is python*) but have
 * no agent are named on stderr with the way to give them one.
 */
#ifndef CLI_SUBPROCS_H
#define CLI_SUBPROCS_H

#include <sys/types.h>

#include "cmd.h"
#include "fanout.h"

#define SUBPROCS_MAX 256 /* processes, the target included */

struct subprocs {
	struct fanout_node nodes[SUBPROCS_MAX]; /* the target first */
	char labels[SUBPROCS_MAX][96];		/* "process PID (comm)" */
	const char *label_of[SUBPROCS_MAX];	/* labels[i], for the merge */
	size_t n;
};

/* Finds the target's processes into s (the target's pid: ctx->target).
 * Returns CLI_OK, or an exit code said on stderr (a target that is not
 * a pid on this machine, or no agent in it). */
int subprocs_find(struct cmd_ctx *ctx, int inject, struct subprocs *s);

#endif
