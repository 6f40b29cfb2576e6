/*
 * sampler: the sampling profiler.
 *
 * One agent thread ("probing-sample", all signals blocked) wakes at the
 * configured rate with a jittered interval (uniform within +-25% of the
 * period, CLOCK_MONOTONIC deadlines, so it does not alias with periodic
 * work; late ticks are skipped, not bunched) and takes every Python
 * thread's stack without the GIL (cpython.read.walk_raw: no strings read on
 * the hot path; a cache maps code objects to interned functions, line
 * tables are decoded from a copy).  Each sample records the time, the
 * thread, the stack (interned, sampler_intern.h), whether the thread
 * holds the GIL, its CPU time since its previous sample (per-thread CPU
 * clock), and its state from /proc/self/task/TID/syscall: running (on
 * CPU or runnable), gil_wait (blocked in futex() on the GIL) or idle
 * (blocked on anything else).  Samples go to the recorder
 * (sampler_store.h), which writes them to SQLite off the hot path.
 *
 * Native stacks (opts.native, see native.h): each tick, every running
 * thread is sent a request at once (native_request: a signal); each
 * unwinds itself in its handler into the capture ring, together with its
 * innermost Python frames (cpython.read.leaf_capture, the handler's hook),
 * and goes on.  Meanwhile the sampler samples the other threads, then
 * takes the captures as they come (waiting at most half a period, and
 * 5 ms): for each, it walks the thread's Python stack and joins the
 * leaf to it at the leaf's outer frame, so the Python frames are those
 * of the instant of the unwind; they are spliced in where
 * _PyEval_EvalFrameDefault appears (one eval call per entry frame).  A
 * thread whose capture does not come in time, or whose stack moved past
 * the leaf's outer frame before the walk (stale), gets a Python-only
 * sample; its capture, when it comes, serves its next sample if that
 * one wants native frames, else it is counted late and dropped.  A
 * thread with a request outstanding is not signalled again.
 *
 * Only threads seen running (from /proc, at the tick) are signalled,
 * never one blocked in a system call (issue 27 item 7): a signal there
 * would cut the call short (sleeps, poll/select/epoll and calls with
 * timeouts fail with EINTR whatever SA_RESTART says, and C code might
 * not retry).  Idle and GIL-waiting threads get Python-only samples; with
 * opts.native_idle (profile.native_idle, off by default) their native
 * leaf is the system call they wait in ("[system call: poll]", from the
 * same /proc file), still without a signal.  A thread seen running may
 * enter a system call before the signal lands: rare, not impossible.
 *
 * The program comes first (native.h): when it installs its own action
 * for the signal, native stacks stop for the rest of the run (Python
 * ones go on) and the status's note says so; when the run ends no
 * signal of ours stays pending, and the per-thread /proc files are
 * closed (they are opened only above the program's descriptors,
 * sampler_threads.c).
 *
 * Never takes the GIL, never calls Python; the agent's own threads are
 * not sampled.  Caps: SAMPLER_THREADS_MAX threads per tick (the rest are
 * skipped and counted), profile.max_depth Python frames per stack,
 * NATIVE_DEPTH_MAX native ones.
 *
 * Threads: everything here from any thread but a signal handler; start
 * and stop are serialised by a mutex.
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#define SAMPLER_HZ_MAX 10000
#define SAMPLER_THREADS_MAX 1024

struct store;

struct sampler_opts {
	int hz;		     /* 1..SAMPLER_HZ_MAX */
	int native;	     /* native stacks too */
	int64_t duration_ms; /* stop by itself after this; 0 = never */
	int idle;	     /* record idle and GIL-waiting samples too */
	int native_idle;     /* idle and GIL-waiting threads' samples end
				in the system call they wait in */
	int max_depth;	     /* Python frames per stack */
};

struct sampler_status {
	int running;
	int hz, native;
	double started;	     /* unix time of the start, 0 never */
	double stopped;	     /* unix time of the stop, 0 while running */
	int64_t duration_ms; /* 0: until stopped */
	int64_t remaining_ms; /* -1: no duration or not running */
	uint64_t ticks, missed; /* ticks taken, ticks skipped (late) */
	uint64_t samples;	/* thread samples taken */
	uint64_t native_samples; /* samples with native frames */
	uint64_t native_failed;	 /* wanted them, got Python only: */
	uint64_t native_unanswered; /* no capture in time, */
	uint64_t native_stale;	    /* the stack moved past the leaf */
	uint64_t native_late;	    /* captures that came when no sample
				       wanted them (dropped) */
	uint64_t native_requested, native_captured; /* signals, unwinds */
	uint64_t native_dropped;    /* captures lost: the ring was full */
	unsigned native_ring_max;   /* most captures waiting at once (since
				       the process started) */
	double native_unwind_us, native_leaf_us; /* mean per capture: the
						    sampled thread's time in
						    the handler, unwinding
						    and reading its leaf */
	uint64_t dropped;	/* samples the recorder had no room for */
	uint64_t threads_skipped;
	uint64_t written;	/* samples in SQLite */
	uint64_t deleted;	/* samples removed by retention */
	double sample_us;	/* mean cost of one thread's sample */
	double sample_us_max;
	double tick_us;		/* mean cost of one tick */
	unsigned threads;	/* threads sampled in the last tick */
	uint32_t frames, stacks; /* interned so far */
	char error[160];	 /* last recorder or native error, or "" */
	int native_lost;	 /* the program took the native signal over
				    during the run: native stacks stopped */
	uint64_t files_refused;	 /* threads without a /proc file (no
				    descriptor above the program's range) */
	char note[512];		 /* what the two above mean, or "" */
};

/* Creates the profile tables and the recorder.  Agent start-up, once
 * the store exists.  0 or a negative error with err. */
int sampler_init(struct store *st, char *err, size_t errlen);

/*
 * Starts sampling with o (values out of range are an error).  Returns 0,
 * -EALREADY when running (the options are not changed: stop first),
 * -EINVAL with err, -ENOENT before sampler_init, or the error of starting
 * the thread or the native unwinder.
 */
int sampler_start(const struct sampler_opts *o, char *err, size_t errlen);

/* Stops sampling and joins the thread (bounded by one tick).  0, or
 * -ENOENT when not running. */
int sampler_stop(void);

/*
 * A run with a duration goes on for more_ms from now (never ends sooner
 * than it would have): a client that keeps a run going while it watches
 * (probing top) extends it at every refresh, so that the run ends by
 * itself soon after the client is gone.  A run until stopped stays so.
 * 0, -ENOENT when not running, -EINVAL for more_ms outside [1,
 * SAMPLER_EXTEND_MAX_MS].
 */
#define SAMPLER_EXTEND_MAX_MS 600000
int sampler_extend(int64_t more_ms);

void sampler_status(struct sampler_status *st);

/* Waits until the samples taken so far are in SQLite (at most
 * timeout_ms).  0 or -ETIMEDOUT / -ENOENT. */
int sampler_flush(int timeout_ms);

/* Stops everything at interpreter exit (bounded). */
void sampler_shutdown(void);

/* In a forked child: the parent's threads do not exist here. */
void sampler_atfork_child(void);

#endif
