/*
 * sampler: the profiler's thread, its ticks and its public face.  See
 * sampler.h; the other sources of the sampler (sampler_threads.c,
 * sampler_codes.c, sampler_take.c, sampler_join.c) and what they share
 * are in sampler_impl.h.
 *
 * The hot path per tick: the thread states and the GIL holder (one read,
 * cpython.read.threads_fast), then per thread: its state (one pread of a
 * /proc file kept open), its CPU clock, its raw frames (cpython.read.walk_raw:
 * one read for its C frame and data stack, one for the code objects of
 * the frames that changed), code objects to frame ids through the code
 * cache, and the stack id, reusing the nodes of the thread's previous
 * stack for the frames it shares with it.  Nothing allocates
 * once the caches are warm; nothing blocks but the handful of system
 * calls.
 */
#include "sampler_impl.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "python/pygil.h"
#include "core/thread.h"
#include "sampler_tasks.h"

#define WALK_TRIES 2
#define NATIVE_WAIT_US 5000 /* a tick waits at most this for captures */

/* The sampler: lock guards start/stop/status (never held by a tick's
 * work); the rest of `run` is the sampler thread's while it runs. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the sampler's sleep, cut short by stop */
	int inited, running, exited, stop;
	pthread_t thread;
	struct sampler_opts o;
	double started, stopped;
	int64_t started_ns;	/* monotonic, for the run's end */
	struct counters c; /* this run's totals */
	struct sampler_intern *in;
	struct native_stats native0; /* at the start of this run */
	int native_started;	     /* native_start()ed for this run */
	int native_lost;	     /* the program took the signal over */
	double native_lost_at;	     /* when (unix time) */
	uint64_t files_refused;	     /* sampler_threads_refused() */
	/* Sampler thread only. */
	struct cpython_scratch *scratch;
	struct cpython_thread *threads; /* a tick's listing */
	struct sampler_sample *batch;
	uint64_t rng, tick;
} S = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

int64_t sampler_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double real_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* xorshift64*: the jitter needs no quality, only no period in sync with
 * the target's. */
static double uniform(void)
{
	S.rng ^= S.rng >> 12;
	S.rng ^= S.rng << 25;
	S.rng ^= S.rng >> 27;
	return (double)((S.rng * 0x2545F4914F6CDD1DULL) >> 11) /
	       (double)(1ULL << 53);
}

/* The program installed an action of its own for the native signal
 * (native.h): its signal now.  Native stacks stop for the rest of the
 * run, Python ones go on, and the status says so. */
static void native_lost(void)
{
	pthread_mutex_lock(&S.lock);
	S.o.native = 0;
	S.native_lost = 1;
	S.native_lost_at = real_s();
	pthread_mutex_unlock(&S.lock);
	log_warn("native stacks stopped: the program installed its own "
		 "action for SIGURG, the signal they need; sampling Python "
		 "stacks only");
}

static void tick(void)
{
	struct tick tk = {.n = ++S.tick,
			  .o = &S.o,
			  .scratch = S.scratch,
			  .batch = S.batch};
	size_t n = 0;
	int64_t t0 = sampler_mono_ns(), wait;
	uintptr_t gil_ts;
	double now = real_s();
	int rc, native;

	sampler_join_unbind();
	sampler_tasks_adopt();
	for (int i = 0; i < WALK_TRIES; i++) {
		rc = cpython.read.threads_fast(
			S.scratch, S.threads, PYSTACK_THREADS_MAX, &n, &gil_ts);
		if (rc != -EFAULT)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cpython_thread *pt = &S.threads[i];
		struct want w;

		/* The agent's GIL threads hold thread states: not the
		 * target's. */
		if (pygil_is_own_thread(pt->native_id))
			continue;
		if (sampler_threads_begin(&tk, pt, gil_ts, now, &w))
			continue;
		if (sampler_join_wanted(&S.o, &w) &&
		    sampler_threads_running(w.t)) {
			/* Signalled now (or still waiting for its earlier
			 * signal), sampled when its capture comes; the
			 * others are sampled meanwhile. */
			rc = sampler_join_ask(&w);
			if (rc == 0)
				continue;
			if (rc == -EPERM)
				native_lost();
			if (rc != -ENOSPC)
				tk.c.native_failed++;
		}
		sampler_take(&tk, &w, NULL, &native);
	}
	if (sampler_join_pending()) {
		/* Half a period at most, and no more than NATIVE_WAIT_US. */
		wait = 500000000LL / S.o.hz;
		if (wait > NATIVE_WAIT_US * 1000LL)
			wait = NATIVE_WAIT_US * 1000LL;
		sampler_join_serve(&tk, t0 + wait);
	}
	sampler_threads_prune(tk.n);
	sampler_store_add(tk.batch, tk.nsamp);
	pthread_mutex_lock(&S.lock);
	S.c.ticks++;
	S.c.samples += tk.nsamp;
	S.c.sample_ns += tk.c.sample_ns;
	if (tk.c.sample_ns_max > S.c.sample_ns_max)
		S.c.sample_ns_max = tk.c.sample_ns_max;
	S.c.tick_ns += (double)(sampler_mono_ns() - t0);
	S.c.threads = (unsigned)tk.nsamp;
	S.c.native_samples += tk.c.native_samples;
	S.c.native_failed += tk.c.native_failed;
	S.c.native_stale += tk.c.native_stale;
	S.c.native_unanswered += tk.c.native_unanswered;
	S.c.native_late += tk.c.native_late;
	S.c.threads_skipped += tk.c.threads_skipped;
	S.files_refused = sampler_threads_refused();
	pthread_mutex_unlock(&S.lock);
}

/* ---- the thread ------------------------------------------------------- */

static void *sampler_main(void *arg)
{
	int64_t period = 1000000000LL / S.o.hz, next = sampler_mono_ns(),
		end = 0;
	struct sched_param sp = {0};

	(void)arg;
	/* A batch thread: its wake-ups do not preempt the target's threads
	 * (at 1 kHz that would be a thousand switches a second, each leaving
	 * a colder cache to the preempted thread); it runs when a CPU is
	 * free or at the next scheduling tick.  No privilege needed. */
	pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	pthread_mutex_lock(&S.lock);
	while (!S.stop) {
		struct timespec dl;
		int64_t now;

		pthread_mutex_unlock(&S.lock);
		tick();
		now = sampler_mono_ns();
		next += (int64_t)((double)period * (0.75 + 0.5 * uniform()));
		pthread_mutex_lock(&S.lock);
		if (next < now) {
			/* Late (a slow tick, a busy machine): skip, do not
			 * bunch up. */
			S.c.missed++;
			next = now + (int64_t)((double)period * uniform());
		}
		/* Read each time: sampler_extend() moves it. */
		end = S.o.duration_ms > 0
			      ? S.started_ns + S.o.duration_ms * 1000000LL
			      : 0;
		if (end && next >= end)
			break;
		dl.tv_sec = (time_t)(next / 1000000000);
		dl.tv_nsec = (long)(next % 1000000000);
		while (!S.stop && sampler_mono_ns() < next)
			if (pthread_cond_timedwait(&S.cond, &S.lock, &dl) ==
			    ETIMEDOUT)
				break;
	}
	S.running = 0;
	S.exited = 1;
	S.stopped = real_s();
	pthread_mutex_unlock(&S.lock);
	/* Nothing of the run outlives it: no signal of ours pending, no
	 * descriptor kept. */
	if (S.native_started)
		native_stop();
	sampler_threads_close();
	/* No task map outlives the run either. */
	sampler_tasks_stop();
	sampler_tasks_adopt();
	return NULL;
}

int sampler_init(struct store *st, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int rc;

	if (S.inited)
		return 0;
	S.in = sampler_intern_new();
	S.scratch = cpython.read.scratch_new();
	S.threads = malloc(PYSTACK_THREADS_MAX * sizeof(*S.threads));
	S.batch = malloc(BATCH_MAX * sizeof(*S.batch));
	if (!S.in || !S.scratch || !S.threads || !S.batch ||
	    sampler_threads_init() || sampler_take_init(S.in) ||
	    sampler_codes_init(S.in) || sampler_join_init() ||
	    sampler_tasks_init(S.in)) {
		snprintf(err, errlen, "profiler: out of memory");
		return -ENOMEM;
	}
	rc = sampler_store_init(st, S.in, err, errlen);
	if (rc)
		return rc;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&S.cond, &ca);
	pthread_condattr_destroy(&ca);
	S.rng = (uint64_t)sampler_mono_ns() ^ (uint64_t)getpid() << 32 ^
		0x9e3779b9;
	S.inited = 1;
	return 0;
}

static void join_exited(void)
{
	if (S.exited) {
		pthread_join(S.thread, NULL);
		S.exited = 0;
	}
}

int sampler_start(const struct sampler_opts *o, char *err, size_t errlen)
{
	int rc;

	if (o->hz < 1 || o->hz > SAMPLER_HZ_MAX) {
		snprintf(err, errlen, "the rate must be in [1, %d] Hz",
			 SAMPLER_HZ_MAX);
		return -EINVAL;
	}
	if (o->duration_ms < 0 || o->max_depth < 1 ||
	    o->max_depth > PYSTACK_DEPTH_MAX) {
		snprintf(err, errlen, "bad duration or depth");
		return -EINVAL;
	}
	pthread_mutex_lock(&S.lock);
	if (!S.inited) {
		pthread_mutex_unlock(&S.lock);
		snprintf(err, errlen, "the profiler is not initialised");
		return -ENOENT;
	}
	if (S.running) {
		pthread_mutex_unlock(&S.lock);
		snprintf(err, errlen, "the profiler is already running "
				      "(stop it first)");
		return -EALREADY;
	}
	join_exited();
	if (cpython.read.off_reason()) {
		pthread_mutex_unlock(&S.lock);
		snprintf(err, errlen, "%s", cpython.read.off_reason());
		return -ENOTSUP;
	}
	if (o->native &&
	    (rc = native_start(cpython.read.leaf_capture, err, errlen)) < 0) {
		pthread_mutex_unlock(&S.lock);
		return rc;
	}
	S.o = *o;
	S.stop = 0;
	S.native_started = o->native;
	S.native_lost = 0;
	S.files_refused = 0;
	memset(&S.c, 0, sizeof(S.c));
	sampler_join_reset();
	sampler_threads_unwant();
	sampler_tasks_start(config_bool("profile.tasks"));
	native_stats(&S.native0);
	S.started = real_s();
	/* Before the thread runs: an extend meanwhile reads it. */
	S.started_ns = sampler_mono_ns();
	S.stopped = 0;
	rc = agent_thread_start(&S.thread, "probing-sample", sampler_main,
				NULL);
	if (rc) {
		if (o->native)
			native_stop();
		sampler_tasks_stop();
		S.native_started = 0;
		pthread_mutex_unlock(&S.lock);
		snprintf(err, errlen, "cannot start the sampler: %s",
			 strerror(-rc));
		return rc;
	}
	S.running = 1;
	pthread_mutex_unlock(&S.lock);
	log_info("profiler started at %d Hz%s", o->hz,
		 o->native ? " with native stacks" : "");
	/* The asyncio tasks known from the first samples on (where a loop
	 * was seen before). */
	sampler_tasks_refresh(1);
	return 0;
}

int sampler_stop(void)
{
	int had;

	pthread_mutex_lock(&S.lock);
	had = S.running || S.exited;
	if (!had) {
		pthread_mutex_unlock(&S.lock);
		return -ENOENT;
	}
	S.stop = 1;
	pthread_cond_broadcast(&S.cond);
	pthread_mutex_unlock(&S.lock);
	pthread_join(S.thread, NULL);
	pthread_mutex_lock(&S.lock);
	S.exited = 0;
	pthread_mutex_unlock(&S.lock);
	return 0;
}

int sampler_extend(int64_t more_ms)
{
	int rc = 0;

	if (more_ms < 1 || more_ms > SAMPLER_EXTEND_MAX_MS)
		return -EINVAL;
	pthread_mutex_lock(&S.lock);
	if (!S.running || S.stop)
		rc = -ENOENT;
	else if (S.o.duration_ms > 0) {
		int64_t want = (sampler_mono_ns() - S.started_ns) / 1000000LL +
			       more_ms;

		/* Never shorter than it was. */
		if (want > S.o.duration_ms)
			S.o.duration_ms = want;
	}
	pthread_mutex_unlock(&S.lock);
	return rc;
}

void sampler_status(struct sampler_status *st)
{
	struct sampler_store_stats ss;
	struct sampler_intern_counts ic = {0};

	memset(st, 0, sizeof(*st));
	sampler_store_stats(&ss);
	pthread_mutex_lock(&S.lock);
	st->running = S.running;
	st->hz = S.o.hz;
	st->native = S.o.native;
	st->started = S.started;
	st->stopped = S.running ? 0 : S.stopped;
	st->duration_ms = S.o.duration_ms;
	st->remaining_ms = -1;
	if (S.running && S.o.duration_ms > 0) {
		double left = S.o.duration_ms - (real_s() - S.started) * 1e3;

		st->remaining_ms = left > 0 ? (int64_t)left : 0;
	}
	st->ticks = S.c.ticks;
	st->missed = S.c.missed;
	st->samples = S.c.samples;
	st->native_samples = S.c.native_samples;
	st->native_failed = S.c.native_failed;
	st->native_stale = S.c.native_stale;
	st->native_unanswered = S.c.native_unanswered;
	st->native_late = S.c.native_late;
	st->threads_skipped = S.c.threads_skipped;
	st->sample_us = S.c.samples ? S.c.sample_ns / 1e3 / (double)S.c.samples
				    : 0;
	st->sample_us_max = S.c.sample_ns_max / 1e3;
	st->tick_us = S.c.ticks ? S.c.tick_ns / 1e3 / (double)S.c.ticks : 0;
	st->threads = S.c.threads;
	st->native_lost = S.native_lost;
	st->files_refused = S.files_refused;
	if (S.native_lost) {
		time_t at = (time_t)S.native_lost_at;
		struct tm tm;
		char when[16] = "";

		if (localtime_r(&at, &tm))
			strftime(when, sizeof(when), "%H:%M:%S", &tm);
		snprintf(st->note, sizeof(st->note),
			 "native stacks stopped at %s: the program installed "
			 "its own action for SIGURG, the signal they need; "
			 "Python stacks only from then on",
			 when);
	}
	if (S.files_refused) {
		size_t len = strlen(st->note);

		snprintf(st->note + len, sizeof(st->note) - len,
			 "%s%llu threads' states were guessed from their CPU "
			 "time, and they got no native stacks: no descriptor "
			 "was free at %d or above short of the limit's last "
			 "%d (RLIMIT_NOFILE), and the program's own are not "
			 "taken",
			 len ? "; " : "", (unsigned long long)S.files_refused,
			 FDOWN_MIN, FDOWN_SPARE);
	}
	if (S.in)
		sampler_intern_counts(S.in, &ic);
	pthread_mutex_unlock(&S.lock);
	st->frames = ic.frames;
	st->stacks = ic.stacks;
	{
		struct native_stats ns;

		/* This run's: since its start. */
		native_stats(&ns);
		pthread_mutex_lock(&S.lock);
		ns.requested -= S.native0.requested;
		ns.captured -= S.native0.captured;
		ns.dropped -= S.native0.dropped;
		ns.unwind_ns -= S.native0.unwind_ns;
		ns.hook_ns -= S.native0.hook_ns;
		pthread_mutex_unlock(&S.lock);
		st->native_requested = ns.requested;
		st->native_captured = ns.captured;
		st->native_dropped = ns.dropped;
		st->native_ring_max = ns.ring_max;
		if (ns.captured) {
			st->native_unwind_us = (double)ns.unwind_ns / 1e3 /
					       (double)ns.captured;
			st->native_leaf_us =
				(double)ns.hook_ns / 1e3 / (double)ns.captured;
		}
	}
	st->dropped = ss.dropped;
	st->written = ss.written;
	st->deleted = ss.deleted;
	if (!st->error[0] && ss.last_error[0])
		snprintf(st->error, sizeof(st->error), "%s", ss.last_error);
}

int sampler_flush(int timeout_ms)
{
	return sampler_store_flush(timeout_ms);
}

void sampler_shutdown(void)
{
	sampler_stop();
	sampler_store_shutdown();
}

void sampler_atfork_child(void)
{
	pthread_mutex_init(&S.lock, NULL);
	pthread_cond_init(&S.cond, NULL);
	/* The parent's caches describe the same memory; its interned ids
	 * belong to the parent's store: a new agent starts afresh (the old
	 * tables are left to the child's memory). */
	S.running = S.exited = S.stop = 0;
	S.inited = 0;
	sampler_threads_atfork_child();
	sampler_join_reset();
	sampler_codes_atfork_child();
	sampler_tasks_atfork_child();
	native_atfork_child();
	sampler_store_atfork_child();
}
