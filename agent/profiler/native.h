/*
 * native: the C/C++ stacks of the target's threads, for the sampler.
 *
 * Capture.  native_start() installs a handler for NATIVE_SIGNAL
 * (SA_SIGINFO | SA_RESTART | SA_ONSTACK, every signal blocked while it
 * runs) and keeps the handler it replaces.  native_request() asks one
 * thread for its stack and returns at once: it fills one of
 * NATIVE_REQ_MAX request slots (preallocated) and sends the signal with
 * rt_tgsigqueueinfo(), tagged with the slot's address.  A thread with a
 * request outstanding is not sent another signal (a standard signal sent
 * while one is pending merges into it): its pending one answers.  The
 * handler, on the target thread:
 *   - saves errno and restores it on every path;
 *   - serves the request only if the signal is ours (SI_QUEUE from our own
 *     pid, tagged with one of our slots) and the slot names this thread;
 *     any other signal goes to the previous handler (chained like
 *     faulthandler: SIG_DFL / SIG_IGN / a handler);
 *   - takes a free entry of the ring (NATIVE_RING entries, preallocated)
 *     with a compare-and-swap; when none is free the capture is dropped
 *     and counted, never waited for;
 *   - unwinds its interrupted context with libunwind's local unwinder
 *     (unw_init_local2 on the signal's ucontext, unw_step: no malloc, no
 *     locks of ours) into the entry, runs the hook given to native_start()
 *     (the sampler's: the thread's innermost Python frames), publishes the
 *     entry, frees the request slot and wakes the consumer (a futex, only
 *     when it waits);
 *   - never waits for anything.
 * Each entry has one producer (the handler that took it) and one consumer
 * (native_collect(), the sampler), so the sampler sends all its signals of
 * a tick at once and collects the answers as they come; none of them
 * waits for the other.
 *
 * System calls.  A signal that interrupts a blocking system call restarts
 * it (SA_RESTART) where the kernel can: read, write, wait, futex waits
 * (the GIL, locks and condition variables).  Some fail with EINTR whatever
 * the flags (signal(7)): nanosleep and clock_nanosleep (sleep() and
 * usleep() return early), poll, select, epoll_wait, System V IPC, socket
 * calls with timeouts.  CPython retries those (PEP 475); C code may not.
 * Which threads to signal is the caller's choice (sampler.h).
 *
 * native_stop() leaves our handler installed while a signal of ours may be
 * pending (SIGPROF's default action ends the process), passing every other
 * signal on.  Symbolization happens later, elsewhere: native_sym.h.
 *
 * Threads: native_request, native_collect, native_wait, native_start and
 * native_stop from one thread at a time (the sampler); native_stats from
 * any.
 */
#ifndef NATIVE_H
#define NATIVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define NATIVE_SIGNAL SIGPROF
#define NATIVE_DEPTH_MAX 256
#define NATIVE_REQ_MAX 64   /* threads with a request outstanding */
#define NATIVE_RING 64	    /* captures waiting to be collected */
#define NATIVE_EXTRA_MAX 512 /* bytes the hook may fill per capture */

/*
 * Runs in the handler on thread tid after the unwind, with the arg of its
 * request: fills buf (cap bytes, 8-aligned) with what must be of the same
 * instant, returns the bytes used.  Must be async-signal-safe and must
 * not wait.
 */
typedef size_t (*native_hook_fn)(long tid, uintptr_t arg, void *buf,
				 size_t cap);

/* Installs the handler (once; hook may be NULL) and allows requests.
 * Captures left in the ring from an earlier run are discarded.  0, or
 * -errno with err (e.g. libunwind cannot unwind). */
int native_start(native_hook_fn hook, char *err, size_t errlen);

/* Stops requests and puts the previous handler back, unless someone
 * replaced ours since or a signal of ours may still be pending (then
 * ours stays; a later native_stop() may restore).  Safe when not
 * started. */
void native_stop(void);

/*
 * Asks thread tid (of this process) for its stack; arg goes to the hook,
 * tag to the capture.  Returns at once: 0 (signal sent), -EINPROGRESS (a
 * request of ours is outstanding for tid: its answer will come), -EAGAIN
 * (NATIVE_REQ_MAX requests outstanding), -ESRCH (no such thread), -EBUSY
 * (not started).
 */
int native_request(long tid, uintptr_t arg, uint64_t tag);

struct native_capture {
	long tid;
	uint64_t tag;	 /* its request's */
	int64_t ts_ns;	 /* CLOCK_REALTIME, when it was unwound */
	size_t n;	 /* ips[0..n), innermost first; the handler's own
			    frames are not included */
	uintptr_t ips[NATIVE_DEPTH_MAX];
	size_t extra_len; /* the hook's bytes */
	uint64_t extra[NATIVE_EXTRA_MAX / 8];
};

/* Takes one published capture into *out (copied; its entry is free
 * again): 0, or -EAGAIN when none is ready. */
int native_collect(struct native_capture *out);

/* Waits until a capture is ready or deadline (CLOCK_MONOTONIC ns): 0
 * (one is ready), -ETIMEDOUT. */
int native_wait(int64_t deadline_ns);

/* Is ip inside _PyEval_EvalFrameDefault (a return address)?  Known from
 * native_start on. */
int native_is_eval(uintptr_t ip);

/* Counters since the process started. */
struct native_stats {
	uint64_t requested; /* signals sent */
	uint64_t captured;  /* stacks unwound into the ring */
	uint64_t dropped;   /* handlers that found the ring full */
	uint64_t chained;   /* signals passed to the previous handler */
	uint64_t stray;	    /* signals of ours with no request (late) */
	uint64_t unwind_ns, hook_ns; /* time sampled threads spent in the
					handler: unwinding, then in the
					hook */
	unsigned ring_max;  /* most captures waiting at once */
};
void native_stats(struct native_stats *s);

/* In a forked child. */
void native_atfork_child(void);

#endif
