/*
 * native: the C/C++ stacks of the target's threads, for the sampler.
 *
 * Capture.  native_start() installs a handler for NATIVE_SIGNAL
 * (SA_SIGINFO | SA_RESTART | SA_ONSTACK, every signal blocked while it
 * runs) and keeps the handler it replaces.  native_capture() asks one
 * thread at a time: it fills the single request slot (preallocated), sends
 * the signal with tgkill() and waits, bounded, for the handler.  The
 * handler, on the target thread:
 *   - saves errno and restores it on every path;
 *   - takes the slot only if the signal is ours (SI_TKILL from our own
 *     pid), it is addressed to this thread and a request is pending (one
 *     compare-and-swap: the re-entrancy guard, since a second signal
 *     finds the slot taken); any other signal goes to the previous
 *     handler (chained like faulthandler: SIG_DFL / SIG_IGN / a handler);
 *   - unwinds its interrupted context with libunwind's local unwinder
 *     (unw_init_local2 on the signal's ucontext, unw_step; no malloc,
 *     no locks of ours; libunwind's local unwinding is async-signal-safe)
 *     and copies the instruction pointers into the slot;
 *   - wakes the sampler (futex) and waits, at most NATIVE_HOLD_US, for
 *     it to read the thread's Python stack (the held callback), so the
 *     two stacks are of the same instant; then returns.
 * Only write()-free, allocation-free, lock-free code runs in the handler.
 * A thread that blocks the signal or does not answer in time is given
 * up on (-ETIMEDOUT); its late handler finds the request withdrawn and
 * returns at once.  Such a thread is not sent another signal while one
 * of ours is pending for it (a second would merge into the first): the
 * pending one answers the next request.  native_stop() leaves our
 * handler installed while any is pending (SIGPROF's default action ends
 * the process), passing every other signal on.
 *
 * Symbolization happens later, elsewhere: native_sym.h.
 *
 * Threads: one thread (the sampler) at a time.
 */
#ifndef NATIVE_H
#define NATIVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define NATIVE_SIGNAL SIGPROF
#define NATIVE_DEPTH_MAX 256
#define NATIVE_WAIT_US 5000 /* for the handler to run (a thread that
				     lost its CPU takes a scheduler tick) */
#define NATIVE_HOLD_US 1000  /* a handler waits this long for the sampler */

/* Installs the handler.  0, or -errno with err (e.g. libunwind missing). */
int native_start(char *err, size_t errlen);

/* Stops captures and puts the previous handler back, unless someone
 * replaced ours since or a signal of ours is still pending (then ours
 * stays; a later native_stop() may restore).  Safe when not started. */
void native_stop(void);

typedef void (*native_held_fn)(void *arg);

/*
 * Captures thread tid's native stack, innermost first, into ips (at most
 * max, *n filled), running held(arg) (may be NULL) on the calling thread
 * while tid waits in the handler.  Returns 0, -ETIMEDOUT (the handler
 * did not run in NATIVE_WAIT_US: the thread blocks the signal or is not
 * scheduled), -ESRCH (no such thread), -EBUSY (not started).  The frames
 * of the signal handler itself are not included.  When held is given and
 * the call fails, held is not called.
 */
int native_capture(long tid, uintptr_t *ips, size_t max, size_t *n,
		   native_held_fn held, void *arg);

/* Is ip inside _PyEval_EvalFrameDefault (a return address)?  Known from
 * native_start on. */
int native_is_eval(uintptr_t ip);

/* Counters for status. */
struct native_stats {
	uint64_t captured, timeouts, chained, late;
	uint64_t unwind_ns, hold_ns; /* time sampled threads spent in the
					handler: unwinding, then held while
					their Python stack was read */
};
void native_stats(struct native_stats *s);

/* In a forked child. */
void native_atfork_child(void);

#endif
