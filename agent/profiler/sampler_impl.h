/*
 * sampler_impl: what the sources of the sampler share (sampler.c: the
 * thread, its ticks and the public face; sampler_threads.c: the threads
 * and what is kept of each between ticks; sampler_codes.c: code objects
 * to frame ids; sampler_take.c: one thread's sample; sampler_join.c:
 * native captures joined to the samples that wait for them).  Private to
 * them.  See sampler.h for the contract.
 *
 * S is the one sampler state (sampler.c defines it).  Threads: lock,
 * cond, the run flags and the counters (c) are shared with the callers
 * of sampler.h and taken under lock; everything marked "sampler thread
 * only" belongs to the sampler thread while it runs, and to
 * sampler_init / sampler_start / sampler_atfork_child while it does not.
 * Nothing here runs in a signal handler: the handler's side is native.c
 * and pyframes_leaf.c, and reaches us only through the capture ring.
 */
#ifndef SAMPLER_IMPL_H
#define SAMPLER_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cpython/pyframes.h"
#include "native.h"
#include "python/pystack.h"
#include "sampler.h"
#include "sampler_intern.h"
#include "sampler_store.h"

#define CODE_CACHE_MAX 65536
#define LINETABLE_COPY_MAX 8192 /* bytes of a line table kept in the cache */
#define WALK_TRIES 2
#define TRUST_TICKS_MIN 50 /* frames are re-read at least every ~second */
#define PATH_MAX_FRAMES (PYSTACK_DEPTH_MAX + NATIVE_DEPTH_MAX + 4)
#define NATIVE_WAIT_US 5000 /* a tick waits at most this for captures */
#define WANTS_MAX SAMPLER_THREADS_MAX /* samples waiting for captures */
#define WANTS_PER_THREAD 64
#define BATCH_MAX (2 * SAMPLER_THREADS_MAX) /* samples per tick */

/* A code object's names and line table, found by its address while its
 * identity fields still match (pyframes.h). */
struct code_ent {
	uintptr_t code, qualname, filename, linetable;
	int firstlineno;
	uint32_t fn;
	unsigned char *lt; /* NULL: read in place */
	size_t ltlen;
	int memo_lasti; /* the last instruction looked up, and its frame */
	uint32_t memo_frame;
};

/* What the sampler keeps of a thread between ticks. */
struct thr {
	uint64_t thread_id;
	long native_id;
	int fd;		/* /proc/self/task/TID/syscall, -1 when not open */
	int64_t cpu_ns; /* its CPU clock at its previous sample, -1 none */
	uint64_t seen;	/* tick it was last seen in */
	uint32_t *frames, *nodes; /* previous stack, root first */
	size_t depth;
	/* Its previous Python frames, root first, whose code objects are
	 * cached: the walk trusts them (pyframes_trust). */
	uintptr_t *tframes, *tcodes;
	int *tlasti;	  /* their instructions then, */
	uint32_t *tfid;	  /* and the frame ids they gave */
	size_t tn;
	uint64_t trust_tick; /* when the trust was last rebuilt from scratch */
	unsigned nwant;	     /* its samples waiting for a capture */
};

/* A sample to take: what was learnt of its thread at its tick.  A thread
 * asked for its native stack is sampled when its capture comes, which may
 * be ticks later when it was not on a CPU (a thread off its CPU does not
 * move: the handler runs before anything else when it gets one back, so
 * the capture shows where it stood at each tick it was waiting). */
struct want {
	const struct pyframes_thread *pt; /* in this tick's listing, NULL */
	struct thr *t;			  /* when not (re)bound this tick */
	long native_id;
	double ts;
	int64_t cpu_us;
	uint64_t tick; /* asked in */
	uint8_t state, gil;
	uint8_t fresh; /* its request was sent this tick */
};

struct counters {
	uint64_t ticks, missed, samples, native_samples, native_failed;
	uint64_t native_stale, native_unanswered, native_late;
	uint64_t threads_skipped;
	double sample_ns, sample_ns_max, tick_ns;
	unsigned threads;
};

/* A tick's samples and what they cost. */
struct cost {
	size_t nsamp;
	double sum, max;
};

struct sampler_shared {
	pthread_mutex_t lock; /* start/stop/status; not held by ticks */
	pthread_cond_t cond;  /* the sampler's sleep, cut short by stop */
	int inited, running, exited, stop;
	pthread_t thread;
	struct sampler_opts o;
	double started, stopped;
	struct counters c;
	struct store *st;
	struct sampler_intern *in;
	struct native_stats native0; /* at the start of this run */
	char error[160];
	/* Sampler thread only. */
	struct pyframes_scratch *scratch;
	struct pyframes_raw *raw;
	unsigned char *rawok; /* raw[i]'s code object is cached */
	uint32_t *rawfid;     /* raw[i]'s frame id */
	struct thr *cur;      /* the thread whose S.raw it is */
	size_t nraw;
	struct pyframes_thread *threads;
	struct code_ent *codes;
	size_t ncodes;
	struct sampler_map code_map;
	struct thr *thr;
	size_t nthr;
	struct sampler_map thr_map; /* thread_id + 1 -> index */
	uint32_t *path;		    /* innermost first */
	uintptr_t *ips;
	struct sampler_sample *batch;
	struct want *want; /* threads waiting for their native capture */
	size_t nwant;
	struct native_capture *cap;
	struct pyframes_raw *leaf;
	uintptr_t gil_lo, gil_hi;
	uint32_t unknown_fn;
	uint64_t rng, tick, trust_ticks;
};

extern struct sampler_shared sampler_shared;
#define S sampler_shared

/* sampler.c: CLOCK_MONOTONIC in nanoseconds. */
int64_t sampler_mono_ns(void);

/* sampler_threads.c: looks at one thread of this tick's listing (its
 * state and CPU time, binding its waiting samples to it).  0 when it is
 * to be sampled (w filled), 1 when not. */
int sampler_threads_begin(const struct pyframes_thread *pt, uintptr_t gil_ts,
			  double now, struct want *w);

/* sampler_threads.c: forgets threads not seen this tick (they ended). */
void sampler_threads_prune(void);

/* sampler_codes.c: the frame id of r (in S.raw), at its instruction. */
uint32_t sampler_codes_frame(const struct pyframes_raw *r);

/* sampler_take.c: samples w into S.batch (a Python-only sample when c is
 * NULL, else joined to c's native frames: *native set when they join);
 * 0, or 1 when there was nothing to record.  k counts the tick's cost. */
int sampler_take_timed(struct want *w, const struct native_capture *c,
		       struct cost *k, int *native);

/* sampler_join.c: binds the waiting samples of thread t to this tick's
 * listing. */
void sampler_join_bind(const struct pyframes_thread *pt, struct thr *t);

/* sampler_join.c: is a thread in this state asked for its native stack? */
int sampler_join_wanted(int state);

/* sampler_join.c: takes captures as they come until the fresh requests
 * are all answered or the deadline (CLOCK_MONOTONIC ns); then drops the
 * wants of threads gone and gives those too old Python-only samples. */
void sampler_join_serve(int64_t deadline, struct cost *k);

#endif
