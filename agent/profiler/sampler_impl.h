/*
 * sampler_impl: the parts of the sampler and what they pass each other.
 * Private to agent/profiler/sampler*.c; see sampler.h for the contract.
 *
 * Each part owns its state (static in its file) and is reached through
 * the functions below:
 *
 *   sampler.c          the thread, its ticks, start/stop/status: the
 *                      options, the run flags and the totals (under its
 *                      lock), the tick's listing of threads.
 *   sampler_threads.c  the threads known between ticks (struct thr) and
 *                      what a tick learns of each: its state, CPU time.
 *   sampler_take.c     one thread's sample: the walk, the leaf joined to
 *                      it, native frames spliced in, the stack interned.
 *   sampler_codes.c    code objects to interned frames (the code cache).
 *   sampler_join.c     samples waiting for their native capture.
 *   sampler_tasks.c    which asyncio task a sample ran (its own header,
 *                      sampler_tasks.h: the recorder uses it too).
 *
 * A tick's context (struct tick) is passed down: its number, the
 * options, the batch of samples it fills and its counts, which sampler.c
 * adds to the totals under its lock when the tick ends.  Everything here
 * runs on the sampler thread, or, while it does not run, in
 * sampler_init / sampler_start / sampler_atfork_child.  Nothing runs in
 * a signal handler: the handler's side is native.c and the leaf read,
 * and reaches us only through the capture ring.
 */
#ifndef SAMPLER_IMPL_H
#define SAMPLER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "fdown.h"
#include "cpython/cpython.h"
#include "native.h"
#include "python/pystack.h"
#include "sampler.h"
#include "sampler_intern.h"
#include "sampler_store.h"

#define PATH_MAX_FRAMES (PYSTACK_DEPTH_MAX + NATIVE_DEPTH_MAX + 4)
#define BATCH_MAX (2 * SAMPLER_THREADS_MAX) /* samples per tick */

/* Counts of a run (sampler_status). */
struct counters {
	uint64_t ticks, missed, samples, native_samples, native_failed;
	uint64_t native_stale, native_unanswered, native_late;
	uint64_t threads_skipped;
	double sample_ns, sample_ns_max, tick_ns;
	unsigned threads;
};

/* One tick, as its parts see it. */
struct tick {
	uint64_t n; /* the tick's number (1, 2, ...) */
	const struct sampler_opts *o;
	struct cpython_scratch *scratch; /* for the walks */
	struct sampler_sample *batch;	 /* BATCH_MAX */
	size_t nsamp;
	struct counters c; /* this tick's: samples, costs, native */
};

/* What the sampler keeps of a thread between ticks (sampler_threads.c
 * owns the records; the walk's memory in them is sampler_take.c's). */
struct thr {
	uint64_t thread_id;
	long native_id;
	struct fdown syscall_file; /* /proc/self/task/TID/syscall (fd -1:
				      not open), open while a run lasts */
	int file_tried;		   /* opening it was tried in this run */
	int64_t cpu_ns; /* its CPU clock at its previous sample, -1 none */
	uint64_t seen;	/* tick it was last seen in */
	unsigned nwant; /* its samples waiting for a capture (join) */
	/* The walk's memory (take): its previous stack, root first, */
	uint32_t *frames, *nodes;
	size_t depth;
	/* and its previous Python frames, root first, whose code objects
	 * are cached: the walk trusts them (cpython_trust). */
	uintptr_t *tframes, *tcodes;
	int *tlasti;	/* their instructions then, */
	uint32_t *tfid; /* and the frames they gave */
	size_t tn;
	uint64_t trust_tick; /* when the trust was last rebuilt */
};

/* A sample to take: what was learnt of its thread at its tick.  A thread
 * asked for its native stack is sampled when its capture comes, which may
 * be ticks later when it was not on a CPU (a thread off its CPU does not
 * move: the handler runs before anything else when it gets one back, so
 * the capture shows where it stood at each tick it was waiting). */
struct want {
	const struct cpython_thread *pt; /* in this tick's listing; NULL */
	struct thr *t;			 /* when not (re)bound this tick */
	long native_id;
	double ts;
	int64_t cpu_us;
	uint64_t tick; /* asked in */
	uint8_t state, gil;
	uint8_t fresh;	 /* its request was sent this tick */
	uint8_t known;	 /* state read from /proc now (else guessed from
			    its CPU time: never signalled) */
	int sys_nr;	 /* the system call it is blocked in, -1 none */
};

/* sampler.c: CLOCK_MONOTONIC in nanoseconds. */
int64_t sampler_mono_ns(void);

/* ---- sampler_threads.c ------------------------------------------------- */

int sampler_threads_init(void);
/* Looks at one thread of this tick's listing (its state and CPU time,
 * binding its waiting samples to it).  0 when it is to be sampled (w
 * filled), 1 when not. */
int sampler_threads_begin(struct tick *tk, const struct cpython_thread *pt,
			  uintptr_t gil_ts, double now, struct want *w);
/* Is t running now (its /proc file read again)?  Asked right before its
 * signal: a thread seen running a moment ago may be entering a system
 * call, which the signal would cut short. */
int sampler_threads_running(struct thr *t);
/* Forgets the threads not seen in tick n (they ended). */
void sampler_threads_prune(uint64_t n);
/* The run ends: every thread's /proc file is closed (opened again, when
 * it can be, by the next run). */
void sampler_threads_close(void);
/* Threads whose /proc file could not be opened without taking a number
 * of the program's (fdown_open_take_high), since the start of the run. */
uint64_t sampler_threads_refused(void);
/* Every thread's trust is void (the code cache was emptied). */
void sampler_threads_untrust(void);
/* No thread waits for a capture (a new run). */
void sampler_threads_unwant(void);
void sampler_threads_atfork_child(void);

/* ---- sampler_take.c ---------------------------------------------------- */

int sampler_take_init(struct sampler_intern *in);
/* Samples w into tk's batch (Python frames only when c is NULL, else
 * joined to c's native frames: *native set when they join); 0, or 1
 * when there was nothing to record or no room. */
int sampler_take(struct tick *tk, struct want *w,
		 const struct native_capture *c, int *native);

/* ---- sampler_codes.c --------------------------------------------------- */

int sampler_codes_init(struct sampler_intern *in);
/* The interned frame of r at its instruction ("[unknown]" when its code
 * object cannot be read); *cached is set when it was found through the
 * cache, so that a later walk may trust r's frame. */
uint32_t sampler_codes_frame(const struct cpython_raw *r, int *cached);
void sampler_codes_atfork_child(void);

/* ---- sampler_join.c ---------------------------------------------------- */

int sampler_join_init(void);
/* A new run, or a forked child: nothing waits. */
void sampler_join_reset(void);
/* A new tick: every wait is unbound until its thread is listed again
 * (sampler_join_bind). */
void sampler_join_unbind(void);
/* Is the thread of w asked for its native stack (a signal)?  Only when
 * it was seen running, from /proc, just now. */
int sampler_join_wanted(const struct sampler_opts *o, const struct want *w);
/* Asks w's thread for its native stack (native_request: sent now,
 * w->fresh, or still outstanding from an earlier tick) and keeps w until
 * the capture comes.  0, -ENOSPC when too many wait (nothing sent), or
 * native_request's error. */
int sampler_join_ask(struct want *w);
/* The samples waiting for a capture, this tick's and older ones. */
size_t sampler_join_pending(void);
/* Binds the waits of thread t to this tick's listing. */
void sampler_join_bind(const struct cpython_thread *pt, struct thr *t);
/* Takes captures as they come until the fresh requests are all answered
 * or the deadline (CLOCK_MONOTONIC ns); then drops the waits of threads
 * gone and gives those too old Python-only samples. */
void sampler_join_serve(struct tick *tk, int64_t deadline);

#endif
