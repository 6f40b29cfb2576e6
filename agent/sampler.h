/*
 * sampler: the sampling profiler.
 *
 * One agent thread ("probing-sample", all signals blocked) wakes at the
 * configured rate with a jittered interval (uniform within +-25% of the
 * period, CLOCK_MONOTONIC deadlines, so it does not alias with periodic
 * work; late ticks are skipped, not bunched) and takes every Python
 * thread's stack without the GIL (pyframes_walk_raw: no strings read on
 * the hot path; a cache maps code objects to interned functions, line
 * tables are decoded from a copy).  Each sample records the time, the
 * thread, the stack (interned, sampler_intern.h), whether the thread
 * holds the GIL, its CPU time since its previous sample (per-thread CPU
 * clock), and its state from /proc/self/task/TID/syscall: running (on
 * CPU or runnable), gil_wait (blocked in futex() on the GIL) or idle
 * (blocked on anything else).  Samples go to the recorder
 * (sampler_store.h), which writes them to SQLite off the hot path.
 *
 * Native stacks (opts.native, see native.h): for each thread that is
 * running, the thread is signalled and unwinds itself into a
 * preallocated slot; its Python stack is read while it waits in the
 * handler, so both stacks are of the same instant, and the Python frames
 * are spliced in where _PyEval_EvalFrameDefault appears (one eval call
 * per entry frame).  Idle threads are never signalled (a signal would
 * interrupt their system call): their samples have Python frames only.
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
	uint64_t native_samples, native_failed;
	double native_unwind_us, native_hold_us; /* mean per native sample:
						    the sampled thread's time
						    in the handler */
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

void sampler_status(struct sampler_status *st);

/* Waits until the samples taken so far are in SQLite (at most
 * timeout_ms).  0 or -ETIMEDOUT / -ENOENT. */
int sampler_flush(int timeout_ms);

/* Stops everything at interpreter exit (bounded). */
void sampler_shutdown(void);

/* In a forked child: the parent's threads do not exist here. */
void sampler_atfork_child(void);

#endif
