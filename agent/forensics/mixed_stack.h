/*
 * mixed_stack: one thread's native stack with its Python frames in it,
 * where the evaluation loop runs them (`backtrace --native`, py-spy's
 * `dump --native`).
 *
 * The native stack comes from hang_native_capture() (a signal to the
 * thread, libunwind in its handler), the Python frames from the GIL-free
 * reader's walk_raw() right after it (cpython.h), which marks the frame
 * each C-level call of the evaluation loop began with (eval_entry).  Each
 * native frame in the evaluation loop (native_is_eval()) stands for the
 * Python frames it runs: the next ones up to and including an entry
 * frame; they replace it, as in the sampler's native stacks
 * (sampler_take.c).  Python frames left when the native frames end (a
 * native stack cut at its depth) follow at the end.
 *
 * The two reads are a moment apart.  A thread that waits (for the GIL, a
 * lock, the kernel) has the same stacks in both; one that runs Python may
 * have called or returned in between.  The take is tried again while
 * the count of evaluation-loop frames and the count of Python segments
 * differ (a few times, then given as it is, marked not exact).
 *
 * Threads: any thread but tid; not in a signal handler.  Blocks up to
 * HANG_NATIVE_WAIT_MS per try for the thread to answer.
 */
#ifndef MIXED_STACK_H
#define MIXED_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "cpython/cpython.h"
#include "forensics/hang_native.h"

#define MIXED_PY_MAX 256 /* Python frames read per thread */
#define MIXED_MAX (HANG_NATIVE_DEPTH_MAX + MIXED_PY_MAX)

/* One frame, innermost first: ips[index] or raw[index]. */
struct mixed_frame {
	unsigned char python;
	uint16_t index;
};

struct mixed_stack {
	uintptr_t ips[HANG_NATIVE_DEPTH_MAX];
	size_t nips;
	struct cpython_raw raw[MIXED_PY_MAX];
	size_t nraw;
	struct mixed_frame order[MIXED_MAX];
	size_t n;
	int exact; /* every evaluation-loop frame matched a Python segment */
};

/* The program's threads as the reader lists them (read.threads()), kept
 * by the caller across takes: listed again when a take needs it. */
struct mixed_threads {
	struct cpython_thread *t;
	size_t n, cap;
};

/*
 * Takes thread tid's mixed stack into *m (about 40 KB: the caller's
 * allocation), with s the reader's scratch (read.scratch_new) and list
 * the threads listed before (filled when empty; listed again when a try
 * does not match).  Returns 0; or -errno as hang_native_capture() does
 * (-ETIMEDOUT, -EPERM, ...), -ESRCH when tid is not a Python thread any
 * more.  On a failure *m holds nothing.
 */
int mixed_stack_take(long tid, struct cpython_scratch *s,
		     struct mixed_threads *list, struct mixed_stack *m);

#endif
