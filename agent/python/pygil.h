/*
 * pygil: run a function with the GIL held, without ever waiting for the GIL
 * longer than a deadline.
 *
 * A small pool of GIL threads (agent-owned, signals blocked) takes calls
 * from a bounded queue; each thread blocks in PyGILState_Ensure() on the
 * caller's behalf while the caller waits on a condition variable with a
 * timeout.  When the GIL does not come in time the call is abandoned: the
 * caller gets -ETIMEDOUT and the function never runs (the GIL thread drops
 * it when it finally gets the GIL).  Once the function started, the caller
 * waits for it to end; a run deadline makes the GIL thread's code raise
 * KeyboardInterrupt (PyThreadState_SetAsyncExc from another GIL thread), so
 * a Python loop in user code (eval, a __repr__) cannot hold it forever.
 * Code blocked in C cannot be interrupted: the caller then waits until the
 * hard limit and gets -EINPROGRESS with the call left to finish on its
 * own, on its thread.
 *
 * The pool is elastic so that such calls never starve the agent: when a
 * call is queued, no thread is free and none is waiting for the GIL (the
 * threads all run earlier calls), one more thread starts, up to
 * PYGIL_THREADS_MAX in all; a thread beyond PYGIL_THREADS idle ones
 * leaves when its call ends.  Only when PYGIL_THREADS_MAX calls are stuck
 * at once does a call find no thread: -EBUSY, which names the real cause
 * (earlier calls still running), not the GIL.
 *
 * A stuck call of the program's code costs that call, never the agent's
 * capacity: each call says what it runs (its kind), and the calls of one
 * kind that runs the program's code hold at most that kind's places among
 * the threads at once (PYGIL_REPR_MAX, PYGIL_CODE_MAX, PYGIL_WALK_MAX;
 * together fewer than PYGIL_THREADS_MAX), a place held from the moment a
 * thread takes the call until the call's function returns — even long
 * after its caller gave up on it.  So the agent's own calls (PYGIL_OURS)
 * always find a thread, and reprs stuck on a lock do not stop an
 * evaluate.  A call whose kind has no place free within start_ms is
 * refused (-EBUSY; pygil_busy_explain() names the calls that hold the
 * places); a stuck call that finally returns gives its place back.
 *
 * A call without a hard limit (run_ms 0: an evaluate with no timeout) is
 * waited for as long as it runs, unless it is interrupted (cancel, stop):
 * then its caller waits PYGIL_STOP_WAIT_MS more at most, and gets
 * -EINPROGRESS, so that a cancelled call blocked in C gives the caller
 * back (its thread, and its place, stay taken until it returns).  A call
 * with a limit that is cancelled or stopped gets the same, when that is
 * sooner than its hard limit; its run limit passing keeps the hard one.
 *
 * Threads: any thread except a GIL thread may call pygil_run (a GIL
 * thread calling it would deadlock against itself and gets -EDEADLK).
 */
#ifndef PYGIL_H
#define PYGIL_H

#include <stddef.h>
#include <stdint.h>

#define PYGIL_THREADS 3	    /* kept free for new calls */
#define PYGIL_THREADS_MAX 8  /* in all, threads stuck in calls included */
#define PYGIL_QUEUE_MAX 64

/* What a call runs: the places it may hold (above).  PYGIL_OURS is never
 * refused for want of a place; the others are the program's code. */
enum pygil_kind {
	PYGIL_OURS = 0, /* the agent's own code */
	PYGIL_REPR,	/* the program's __repr__s: locals, variables */
	PYGIL_CODE,	/* code of the client's choosing: evaluate */
	PYGIL_WALK,	/* walks that call the program's methods: memory */
	PYGIL_KINDS
};

#define PYGIL_REPR_MAX 3
#define PYGIL_CODE_MAX 2
#define PYGIL_WALK_MAX 1
#define PYGIL_WHAT_MAX 96	  /* a call's description, cut */
#define PYGIL_STOP_WAIT_MS 2000 /* after a cancel or a stop (above) */

typedef void (*pygil_fn)(void *arg);

struct pygil_limits {
	int start_ms;   /* wait at most this for the GIL (0 = 1000) */
	int run_ms;     /* then interrupt the function after this (0 = never) */
	int hard_ms;    /* give up waiting for it after this (0 = run_ms + 2000,
			   or never when run_ms is 0) */
	volatile int *cancel; /* optional: when it becomes non-zero the call is
				 interrupted, and waited for
				 PYGIL_STOP_WAIT_MS more at most */
	int kind;	      /* enum pygil_kind (0: PYGIL_OURS) */
	const char *what;     /* what it does, in words, for the messages
				 that name it (copied, cut; NULL: its
				 kind's name) */
};

/* Starts the GIL threads.  Python must be initialised.  Idempotent. */
int pygil_start(char *err, size_t errlen);

/* Stops accepting calls, interrupts running ones and joins the threads
 * that are not stuck (those stuck in C are detached).  Called at exit. */
void pygil_stop(void);

/*
 * Runs fn(arg) on a GIL thread with the GIL held.
 * Returns 0 when fn ran to the end; -EINPROGRESS when fn started but
 * passed hard_ms (it goes on, so arg must stay valid: reference count it
 * between caller and fn).  Otherwise fn never runs: -ETIMEDOUT when the
 * GIL did not come within start_ms, -EBUSY when no GIL thread took it
 * within start_ms because every one ran an earlier call, or its kind's
 * places were all held (pygil_busy_explain() says which, on the same
 * thread), -ECANCELED when *cancel was set first,
 * -EAGAIN when the queue is full, -ESHUTDOWN after stop, -EDEADLK on a GIL
 * thread.  *interrupted is set when the run deadline or cancel
 * interrupted fn.
 */
int pygil_run(pygil_fn fn, void *arg, const struct pygil_limits *lim,
	      int *interrupted);

/* Is the calling thread one of the GIL threads? */
int pygil_is_gil_thread(void);

/* The calling thread, which holds the GIL, lets it go for ms and takes
 * it back (a wait for another thread that needs the GIL to finish). */
void pygil_nap(int ms);

/* For code running inside a pygil call: has the run deadline or cancel
 * asked it to stop?  Long loops in our own C code (e.g. repr of many
 * locals) poll this and wrap up early. */
int pygil_should_stop(void);

/* Is native thread id tid one of the GIL threads?  (They hold Python
 * thread states while they work; views of the target's threads hide them.) */
int pygil_is_own_thread(long tid);

/* How many calls run now; the longest-running one's age in *oldest_s
 * (may be NULL). */
int pygil_running(double *oldest_s);

/* Why the calling thread's last pygil_run() returned -EBUSY, in words
 * (buf, always terminated): the calls that hold the places it needed,
 * each with what it runs and for how long. */
void pygil_busy_explain(char *buf, size_t len);

/* When native thread id tid is one of the GIL threads: what it does now
 * in words ("backtrace --locals: reprs of locals, running for 3 s") in
 * buf, and 1; else 0 and buf untouched. */
int pygil_thread_what(long tid, char *buf, size_t len);

/* In a forked child: forget the parent's threads and calls (they do not
 * exist here) without touching their memory. */
void pygil_atfork_child(void);

#endif
