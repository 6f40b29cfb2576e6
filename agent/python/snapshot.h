/*
 * snapshot: every thread's Python stack now, with the GIL when it comes in
 * time, else read without it.  Shared by probing/backtrace, stackTrace,
 * threads and the python.backtrace / python.threads tables.
 *
 * Threads: any thread but the loop's (it may wait up to gil_timeout_ms,
 * plus the time reprs take, bounded by a run deadline).
 */
#ifndef SNAPSHOT_H
#define SNAPSHOT_H

#include <stdint.h>

#include "pystack.h"

struct snapshot_gil {
	int acquired;          /* taken with the GIL */
	uint64_t holder;       /* when not: the program's thread holding it
				  (0: unknown, or one of the agent's) */
	long holder_native;
	/* When not, and the agent's own call holds it: what that call runs
	 * ("" otherwise).  Such a thread is none of the program's: it is
	 * not named as a holder. */
	char holder_agent[160];
	/* Locals were asked for but not read, and why ("" otherwise): the
	 * places for reprs of the program's objects were all held by calls
	 * that did not end (pygil.h), so the stacks were taken without. */
	char locals_note[640];
};

/*
 * Fills out (release with pystack_release).  Locals (o->locals) run the
 * program's __repr__s, a PYGIL_REPR call; when no place of that kind
 * comes in time the stacks are taken with the GIL without them
 * (gil->locals_note says why).  gil_timeout_ms <= 0 means the
 * python.gil_timeout_ms setting.  cancel may be NULL.  Returns 0 or a
 * negative errno with err (only when even the GIL-free read failed, e.g.
 * Python is not initialised).
 */
int snapshot_stacks(struct pystack *out, const struct pystack_opts *o,
		    int gil_timeout_ms, volatile int *cancel,
		    struct snapshot_gil *gil, char *err, size_t errlen);

#endif
