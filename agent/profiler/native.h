/*
 * native: the C/C++ stacks of the target's threads, for the sampler.
 *
 * The signal.  NATIVE_SIGNAL is SIGURG, not SIGPROF (issue 27 item 2):
 * a signal of ours may outlive the moment it was meant for (pending on a
 * thread that blocks it, or not yet delivered when the program changes
 * the signal's action, or on the thread that calls execve(): pending
 * signals survive exec and the new image has no handler), and SIGPROF's
 * default action ends the process ("Profiling timer expired").
 * SIGURG's default is to ignore it: a stray one at SIG_DFL, or in a new
 * image, does nothing.  (Go's runtime uses it to preempt goroutines for
 * the same reason; Python programs rarely use it: it reports out-of-band
 * data on a socket that asked for it with F_SETOWN — and a Go library
 * loaded into the process takes it for its preemption: then the program
 * has an action of its own, and the sampler steps aside, below.)  The
 * hang watchdog's captures (hang_native.h) share it: one handler,
 * installed by native_signal_install(), serves both.
 *
 * The handler is installed once (SA_SIGINFO | SA_RESTART | SA_ONSTACK,
 * every signal blocked while it runs) and stays for the life of the
 * process, passing every signal that is not ours to the action it
 * replaced (SIG_DFL and SIG_IGN: nothing, SIGURG's default; a handler:
 * called, like faulthandler chains).
 *
 * The program's own action comes first.  When the program installs an
 * action of its own for SIGURG after ours (signal.signal, sigaction), the
 * signal is its: native_signal_held() says so (one sigaction() query,
 * made before each request), native_request() then refuses with -EPERM
 * and sends nothing from then on until native_start() (which refuses as
 * well while the program holds the signal): the sampler steps aside and
 * says so.  A request sent just before the program's sigaction() may
 * still reach its handler: the window is one request.
 *
 * Nothing of ours stays pending.  A thread that blocks the signal keeps
 * ours pending (one at most: a thread with a request outstanding is not
 * signalled again); native_stop() (and the watchdog, after a thread did
 * not answer) discards what is still pending while
 * our handler holds the signal (SIG_IGN for an instant, which drops the
 * pending SIGURGs of every thread, then ours again: a SIGURG sent to the
 * process within those microseconds is dropped too).
 *
 * Capture.  native_request() asks one thread for its stack and returns at
 * once: it fills one of NATIVE_REQ_MAX request slots (preallocated) and
 * sends the signal with rt_tgsigqueueinfo(), tagged with the slot's
 * address.  The handler, on the target thread:
 *   - saves errno and restores it on every path;
 *   - serves the request only if the signal is ours (SI_QUEUE from our own
 *     pid, tagged with one of our slots) and the slot names this thread;
 *     a signal of the hang watchdog goes to its serve function, any other
 *     to the previous action;
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
 * calls with timeouts.  So the sampler signals only threads it saw
 * running, never one blocked in a system call (sampler.h).
 *
 * Symbolization happens later, elsewhere: native_sym.h.
 *
 * Threads: native_request, native_collect, native_wait, native_start and
 * native_stop from one thread at a time (the sampler); native_stats,
 * native_signal_install and native_signal_held from any.
 */
#ifndef NATIVE_H
#define NATIVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define NATIVE_SIGNAL SIGURG
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

/*
 * Another user of NATIVE_SIGNAL (the hang watchdog): given each signal
 * that is not a sampler request, in the handler; returns 1 when the
 * signal was its own (served), 0 to pass it on.  Async-signal-safe.
 */
typedef int (*native_serve_fn)(siginfo_t *si, void *uc);

/* Installs the shared handler if it is not yet (libunwind set up first,
 * here rather than in a handler) and, when serve is not NULL, makes it
 * the other user (one only).  0, or -errno with err (-EBUSY: another
 * serve function is set already). */
int native_signal_install(native_serve_fn serve, char *err, size_t errlen);

/* 1 while the action of NATIVE_SIGNAL is our handler; 0 when the program
 * replaced it (its signal now: send nothing) or it was never installed. */
int native_signal_held(void);

/* Discards every signal of ours (the sampler's and the watchdog's) still
 * pending on any thread, while our handler holds the signal (see above);
 * the sampler's requests outstanding are dropped.  Any thread (the
 * sampler's, the watchdog's): one at a time, under the install lock. */
void native_signal_discard(void);

/* Installs the handler (native_signal_install; hook may be NULL) and
 * allows requests.  Captures left in the ring from an earlier run are
 * discarded.  0, or -errno with err: -EPERM when the program took
 * NATIVE_SIGNAL over (its action replaced ours), or e.g. libunwind
 * cannot unwind. */
int native_start(native_hook_fn hook, char *err, size_t errlen);

/* Stops requests and discards the signals of ours still pending (see
 * above; not when the program holds the signal now).  The handler
 * stays.  Safe when not started. */
void native_stop(void);

/*
 * Asks thread tid (of this process) for its stack; arg goes to the hook,
 * tag to the capture.  Returns at once: 0 (signal sent), -EINPROGRESS (a
 * request of ours is outstanding for tid: its answer will come), -EAGAIN
 * (NATIVE_REQ_MAX requests outstanding), -ESRCH (no such thread), -EBUSY
 * (not started), -EPERM (the program took the signal over: nothing sent,
 * and requests stop until the next native_start).
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
 * native_start on, and from native_learn_eval for a build whose loop is
 * not where its symbol says. */
int native_is_eval(uintptr_t ip);

/*
 * Where the evaluation loop's code really is: an optimised build
 * (Debian's 3.14 and 3.15: PGO and LTO) keeps the exported
 * _PyEval_EvalFrameDefault as a small entry and runs the loop in code no
 * symbol names, so its return addresses were not seen as the loop's and
 * sampled native stacks got their Python frames at the root.  Called by a
 * C function of the agent that a Python function called (native_eval.c
 * runs one), it walks up to the agent's frame that ran the Python
 * function and keeps the largest procedure in between (by its unwind
 * information, at least 16 KiB) as the loop's.
 */
void native_learn_eval_here(void);

/* The loop's code found by native_learn_eval_here: 1 with [*lo, *hi),
 * or 0 (not found, or where its symbol says).  Async-signal-safe. */
int native_eval_loop(uintptr_t *lo, uintptr_t *hi);

/* Does _PyEval_EvalFrameDefault's symbol span the loop (at least 16
 * KiB: every build but a split one)?  Then nothing is learnt. */
int native_eval_symbol_whole(void);

/* Runs a Python function that calls native_learn_eval_here (GIL held;
 * once per process), where the symbol does not span the loop — the one
 * Python call the agent makes for it, so that a build whose symbols say
 * enough never sees it (a tool on sys.monitoring would). native_eval.c. */
void native_learn_eval(void);

/* Counters since the process started. */
struct native_stats {
	uint64_t requested; /* signals sent */
	uint64_t captured;  /* stacks unwound into the ring */
	uint64_t dropped;   /* handlers that found the ring full */
	uint64_t chained;   /* signals passed to the previous handler */
	uint64_t stray;	    /* signals of ours with no request (late) */
	uint64_t discarded; /* requests whose pending signal native_stop
			       discarded */
	uint64_t unwind_ns, hook_ns; /* time sampled threads spent in the
					handler: unwinding, then in the
					hook */
	unsigned ring_max;  /* most captures waiting at once */
};
void native_stats(struct native_stats *s);

/* In a forked child. */
void native_atfork_child(void);

#endif
