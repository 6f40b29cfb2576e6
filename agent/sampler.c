/*
 * sampler: the profiler's thread and its hot path.  See sampler.h.
 *
 * The hot path per tick: the thread states and the GIL holder (one read,
 * pyframes_threads_fast), then per thread: its state (one pread of a
 * /proc file kept open), its CPU clock, its raw frames (pyframes_walk_raw:
 * one read for its C frame and data stack, one for the code objects of
 * the frames that changed), code objects to frame ids through the code
 * cache, and the stack id, reusing the nodes of the thread's previous
 * stack for the frames it shares with it.  Nothing allocates
 * once the caches are warm; nothing blocks but the handful of system
 * calls.
 */
#include "sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "native.h"
#include "pyframes.h"
#include "pygil.h"
#include "pystack.h"
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

struct want;

struct counters {
	uint64_t ticks, missed, samples, native_samples, native_failed;
	uint64_t native_stale, native_unanswered, native_late;
	uint64_t threads_skipped;
	double sample_ns, sample_ns_max, tick_ns;
	unsigned threads;
};

static struct {
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
} S = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static int64_t mono_ns(void)
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

/* ---- code objects to frames ------------------------------------------- */

static void codes_clear(void)
{
	for (size_t i = 0; i < S.ncodes; i++)
		free(S.codes[i].lt);
	S.ncodes = 0;
	sampler_map_release(&S.code_map);
	/* Trust is only as good as the cache. */
	for (size_t i = 0; i < S.nthr; i++)
		S.thr[i].tn = 0;
}

static uint32_t unknown_frame(void)
{
	if (!S.unknown_fn)
		S.unknown_fn = sampler_intern_func(S.in, SAMPLER_PY,
						   "[unknown]", "");
	return sampler_intern_frame(S.in, S.unknown_fn, -1);
}

/* The cache entry of r's code object, (re)filled when new or when the
 * address now holds another code object; NULL when its names cannot be
 * read. */
static struct code_ent *code_lookup(const struct pyframes_raw *r)
{
	char func[PYFRAMES_NAME_MAX], file[PYFRAMES_FILE_MAX];
	unsigned char lt[LINETABLE_COPY_MAX];
	struct code_ent *e;
	uint32_t idx;
	int rc;

	if (sampler_map_get(&S.code_map, r->code, &idx) == 0) {
		e = &S.codes[idx];
		/* A trusted frame's code object was not read: the cache
		 * entry it had is still its own. */
		if (r->trusted ||
		    (e->qualname == r->qualname && e->filename == r->filename &&
		     e->linetable == r->linetable &&
		     e->firstlineno == r->firstlineno))
			return e->fn ? e : NULL;
	} else if (r->trusted) {
		return NULL; /* not cached any more: no identity to go by */
	} else {
		if (S.ncodes >= CODE_CACHE_MAX)
			codes_clear();
		idx = (uint32_t)S.ncodes;
		if (sampler_map_put(&S.code_map, r->code, idx) < 0)
			return NULL;
		S.ncodes++;
		e = &S.codes[idx];
		e->lt = NULL;
	}
	free(e->lt);
	memset(e, 0, sizeof(*e));
	e->code = r->code;
	e->memo_lasti = -2;
	if (pyframes_code_names(r, func, sizeof(func), file, sizeof(file)))
		return NULL; /* the entry stays, matching nothing */
	e->fn = sampler_intern_func(S.in, SAMPLER_PY, func, file);
	rc = pyframes_linetable_copy(r, lt, sizeof(lt), &e->ltlen);
	if (rc == 0) {
		e->lt = malloc(e->ltlen ? e->ltlen : 1);
		if (e->lt)
			memcpy(e->lt, lt, e->ltlen);
	}
	e->qualname = r->qualname;
	e->filename = r->filename;
	e->linetable = r->linetable;
	e->firstlineno = r->firstlineno;
	return e;
}

/* The frame id of r, at its instruction: from the thread's previous
 * sample when r is the same frame at the same place from the root
 * (trusted: same code object) at the same instruction, else through the
 * code cache. */
static uint32_t py_frame(const struct pyframes_raw *r)
{
	size_t i = (size_t)(r - S.raw), pos = S.nraw - 1 - i;
	struct thr *t = S.cur;
	struct code_ent *e;
	struct pyframes_raw id;
	int line;

	if (r->trusted && t && t->tfid && pos < t->tn &&
	    t->tlasti[pos] == r->lasti && t->tfid[pos]) {
		S.rawok[i] = 1;
		return S.rawfid[i] = t->tfid[pos];
	}
	e = code_lookup(r);
	S.rawok[i] = e != NULL;
	S.rawfid[i] = 0;
	if (!e || !e->fn)
		return unknown_frame();
	if (e->memo_lasti == r->lasti && e->memo_frame)
		return S.rawfid[i] = e->memo_frame;
	if (e->lt) {
		line = pyframes_line_decode(e->lt, e->ltlen, e->firstlineno,
					    r->lasti);
	} else {
		/* A table too long to keep: read in place, by the
		 * identity the cache holds (a trusted frame has none). */
		id = *r;
		id.linetable = e->linetable;
		id.firstlineno = e->firstlineno;
		line = pyframes_line_remote(&id);
	}
	e->memo_lasti = r->lasti;
	e->memo_frame = sampler_intern_frame(S.in, e->fn, line);
	S.rawfid[i] = e->memo_frame;
	return e->memo_frame ? e->memo_frame : unknown_frame();
}

/* ---- threads ---------------------------------------------------------- */

static struct thr *thr_get(const struct pyframes_thread *pt)
{
	struct thr *t;
	char path[64];
	uint32_t idx;

	if (sampler_map_get(&S.thr_map, pt->thread_id + 1, &idx) == 0) {
		t = &S.thr[idx];
		if (t->native_id == pt->native_id)
			return t;
		/* Same ident, another kernel thread: start over. */
		if (t->fd >= 0)
			close(t->fd);
	} else {
		if (S.nthr >= SAMPLER_THREADS_MAX ||
		    sampler_map_put(&S.thr_map, pt->thread_id + 1,
				    (uint32_t)S.nthr) < 0)
			return NULL;
		t = &S.thr[S.nthr++];
		t->frames = t->nodes = NULL;
	}
	t->thread_id = pt->thread_id;
	t->native_id = pt->native_id;
	t->cpu_ns = -1;
	t->depth = 0;
	t->tn = 0;
	t->nwant = 0; /* an earlier thread's wants are dropped unbound */
	snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall",
		 pt->native_id);
	t->fd = pt->native_id > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (!t->frames) {
		t->frames = malloc(PATH_MAX_FRAMES * sizeof(*t->frames));
		t->nodes = malloc(PATH_MAX_FRAMES * sizeof(*t->nodes));
	}
	if (!t->tframes) {
		t->tframes = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tframes));
		t->tcodes = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tcodes));
		t->tlasti = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tlasti));
		t->tfid = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tfid));
		if (!t->tframes || !t->tcodes || !t->tlasti || !t->tfid) {
			free(t->tframes);
			free(t->tcodes);
			free(t->tlasti);
			free(t->tfid);
			t->tframes = t->tcodes = NULL;
			t->tlasti = NULL;
			t->tfid = NULL;
		}
	}
	return t;
}

/* Forgets threads not seen this tick (they ended). */
static void thr_prune(void)
{
	size_t keep = 0;

	for (size_t i = 0; i < S.nthr; i++) {
		struct thr *t = &S.thr[i];

		if (t->seen == S.tick) {
			if (keep != i) {
				struct thr tmp = S.thr[keep];

				S.thr[keep] = *t;
				*t = tmp; /* keeps the arrays owned */
			}
			keep++;
			continue;
		}
		if (t->fd >= 0)
			close(t->fd);
		t->fd = -1;
	}
	if (keep == S.nthr)
		return;
	S.nthr = keep;
	sampler_map_release(&S.thr_map);
	for (size_t i = 0; i < S.nthr; i++)
		sampler_map_put(&S.thr_map, S.thr[i].thread_id + 1,
				(uint32_t)i);
}

static int64_t thread_cpu_ns(long tid)
{
	/* The kernel's per-thread CPU clock of any thread of ours, as
	 * pthread_getcpuclockid() builds it: ~tid << 3 | PERTHREAD | SCHED. */
	clockid_t id = (clockid_t)((~(unsigned)tid << 3) | 6);
	struct timespec ts;

	if (tid <= 0 || clock_gettime(id, &ts) < 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* running, gil_wait or idle, from the thread's current system call
 * ("running" when it is in none); -1 when unknown. */
static int syscall_state(struct thr *t)
{
	char buf[160], *end;
	ssize_t n;
	long nr;
	unsigned long long arg0;

	if (t->fd < 0)
		return -1;
	n = pread(t->fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!strncmp(buf, "running", 7))
		return SAMPLER_RUNNING;
	nr = strtol(buf, &end, 10);
	if (end == buf)
		return -1;
	if (nr == SYS_futex && *end == ' ') {
		arg0 = strtoull(end + 1, NULL, 16);
		if (arg0 >= S.gil_lo && arg0 < S.gil_hi)
			return SAMPLER_GIL_WAIT;
	}
	return SAMPLER_IDLE;
}

/* ---- one thread's sample ---------------------------------------------- */

struct take {
	const struct pyframes_thread *pt;
	struct thr *t;
	int rc;
};

static void read_python(void *arg)
{
	struct take *tk = arg;
	struct pyframes_trust trust = {0};
	int trunc;

	if (tk->t->tframes && S.tick - tk->t->trust_tick < S.trust_ticks) {
		trust.frames = tk->t->tframes;
		trust.codes = tk->t->tcodes;
		trust.n = tk->t->tn;
	} else {
		tk->t->trust_tick = S.tick;
	}
	for (int i = 0; i < WALK_TRIES; i++) {
		tk->rc = pyframes_walk_raw(tk->pt, S.scratch, &trust, S.raw,
					   (size_t)S.o.max_depth, &S.nraw,
					   &trunc);
		if (tk->rc != -EFAULT)
			break;
		trust.n = 0; /* the stack moved under us: read it all */
	}
}

/* Remembers the frames of this sample whose code objects are cached,
 * for the next walk (up to the first that is not: trust is a prefix
 * from the root). */
static void keep_trust(struct thr *t)
{
	size_t n = 0;

	if (!t->tframes)
		return;
	for (size_t pos = 0; pos < S.nraw && pos < PYSTACK_DEPTH_MAX; pos++) {
		size_t i = S.nraw - 1 - pos;

		if (!S.rawok[i])
			break;
		t->tframes[pos] = S.raw[i].frame;
		t->tcodes[pos] = S.raw[i].code;
		t->tlasti[pos] = S.raw[i].lasti;
		t->tfid[pos] = S.rawfid[i];
		n++;
	}
	t->tn = n;
}

/* Python frames raw[from..] up to and including the next entry frame:
 * what one _PyEval_EvalFrameDefault runs.  Returns the index after. */
static size_t python_segment(size_t from, size_t *n)
{
	size_t i = from;

	while (i < S.nraw) {
		S.path[(*n)++] = py_frame(&S.raw[i]);
		if (S.raw[i++].is_entry)
			break;
	}
	return i;
}

/* S.path (innermost first) from the Python frames and, when nips > 0,
 * the native ones with the Python frames spliced in at each eval call. */
static size_t build_path(size_t nips)
{
	size_t n = 0, pi = 0;

	for (size_t i = 0; i < nips && n < PATH_MAX_FRAMES - PYSTACK_DEPTH_MAX;
	     i++) {
		if (native_is_eval(S.ips[i]) && pi < S.nraw) {
			pi = python_segment(pi, &n);
			continue;
		}
		S.path[n] = sampler_intern_native(S.in, S.ips[i]);
		if (S.path[n])
			n++;
	}
	while (pi < S.nraw && n < PATH_MAX_FRAMES)
		S.path[n++] = py_frame(&S.raw[pi++]);
	return n;
}

/* The stack id of S.path[0..n), reusing t's previous nodes. */
static uint32_t intern_path(struct thr *t, size_t n)
{
	uint32_t node = 0;
	int same = t->frames != NULL;

	for (size_t d = 0; d < n; d++) {
		uint32_t f = S.path[n - 1 - d];

		if (same && d < t->depth && t->frames[d] == f) {
			node = t->nodes[d];
			continue;
		}
		same = 0;
		node = sampler_intern_stack(S.in, node, f);
		if (t->frames) {
			t->frames[d] = f;
			t->nodes[d] = node;
		}
	}
	if (t->frames)
		t->depth = n;
	return node;
}

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

/* Binds the wants of thread t to this tick's listing. */
static void wants_bind(const struct pyframes_thread *pt, struct thr *t)
{
	for (size_t i = 0; i < S.nwant && t->nwant; i++)
		if (S.want[i].native_id == pt->native_id) {
			S.want[i].pt = pt;
			S.want[i].t = t;
		}
}

static void want_remove(size_t i)
{
	if (S.want[i].t)
		S.want[i].t->nwant--;
	S.want[i] = S.want[--S.nwant];
}

/* Looks at one thread: its state and CPU time.  0 when it is to be
 * sampled (w filled), 1 when not. */
static int sample_begin(const struct pyframes_thread *pt, uintptr_t gil_ts,
			double now, struct want *w)
{
	struct thr *t = thr_get(pt);
	int64_t cpu;
	int state;

	if (!t)
		return 1;
	t->seen = S.tick;
	if (t->nwant)
		wants_bind(pt, t);
	cpu = thread_cpu_ns(pt->native_id);
	state = syscall_state(t);
	if (state < 0) /* no /proc answer: on CPU if it used the CPU */
		state = cpu >= 0 && t->cpu_ns >= 0 &&
				cpu - t->cpu_ns >
					250000000LL / (S.o.hz ? S.o.hz : 1)
			? SAMPLER_RUNNING
			: SAMPLER_IDLE;
	memset(w, 0, sizeof(*w));
	w->pt = pt;
	w->t = t;
	w->native_id = pt->native_id;
	w->ts = now;
	w->tick = S.tick;
	w->cpu_us = cpu >= 0 && t->cpu_ns >= 0 ? (cpu - t->cpu_ns) / 1000 : -1;
	t->cpu_ns = cpu;
	w->state = (uint8_t)state;
	w->gil = gil_ts && gil_ts == pt->tstate;
	return !S.o.idle && state != SAMPLER_RUNNING;
}

/* The leaf a capture carries (its thread's innermost Python frames at the
 * instant of the unwind) joined to a walk of the thread now: S.raw becomes
 * leaf + the walk from the leaf's outer frame on.  1 when they join, 0
 * when they do not (the thread returned past the leaf's outer frame
 * since: S.raw is the walk alone), -1 when the capture has no leaf. */
static int join_leaf(struct take *tk, const struct native_capture *c)
{
	const struct pyframes_leaf *l = (const void *)c->extra;
	size_t nleaf = 0, j, max = (size_t)S.o.max_depth;

	if (c->extra_len < sizeof(*l) || !l->complete ||
	    pyframes_leaf_resolve(S.scratch, l, S.leaf, PYFRAMES_LEAF_MAX,
				  &nleaf))
		return -1;
	if (l->outer) {
		read_python(tk);
		for (j = 0; j < S.nraw && S.raw[j].frame != l->outer; j++)
			;
		if (j == S.nraw)
			return 0;
		if (nleaf + S.nraw - j > max) /* the outermost go */
			S.nraw = max > nleaf ? j + max - nleaf : j;
		memmove(S.raw + nleaf, S.raw + j, (S.nraw - j) * sizeof(*S.raw));
		S.nraw = nleaf + S.nraw - j;
	} else {
		S.nraw = nleaf; /* the leaf is the whole stack */
	}
	memcpy(S.raw, S.leaf, nleaf * sizeof(*S.raw));
	return 1;
}

/* Takes w's stack (with c's native frames when c is given and joins:
 * *native set) into *out; 0, or 1 when there is nothing to record. */
static int sample_finish(struct want *w, const struct native_capture *c,
			 struct sampler_sample *out, int *native)
{
	struct take tk = {.pt = w->pt, .t = w->t, .rc = 0};
	size_t nips = 0, n;

	*native = 0;
	S.nraw = 0;
	if (c) {
		int joined = join_leaf(&tk, c);

		if (joined < 0) {
			/* No leaf (the hook could not read it): the walk
			 * now, spliced as it is. */
			read_python(&tk);
			joined = 1;
		}
		if (joined) {
			nips = c->n;
			memcpy(S.ips, c->ips, nips * sizeof(*S.ips));
			*native = 1;
		}
	} else {
		read_python(&tk);
	}
	if (tk.rc == -ESRCH || (!S.nraw && !nips))
		return 1;
	memset(S.rawok, 0, S.nraw);
	S.cur = w->t;
	n = build_path(nips);
	keep_trust(w->t);
	out->ts = w->ts;
	out->thread_id = w->pt->thread_id;
	out->native_id = w->pt->native_id;
	out->stack = intern_path(w->t, n);
	out->state = w->state;
	out->gil = w->gil;
	out->cpu_us = w->cpu_us;
	return 0;
}

/* A tick's samples and what they cost. */
struct cost {
	size_t nsamp;
	double sum, max;
};

/* Samples w into the batch (a Python-only one when c is NULL); 0, or 1
 * when there was nothing to record.  *native as sample_finish. */
static int finish_timed(struct want *w, const struct native_capture *c,
			struct cost *k, int *native)
{
	int64_t ts = mono_ns();
	double d;

	*native = 0;
	if (k->nsamp >= BATCH_MAX) {
		S.c.threads_skipped++;
		return 1;
	}
	if (sample_finish(w, c, &S.batch[k->nsamp], native))
		return 1;
	d = (double)(mono_ns() - ts);
	k->nsamp++;
	k->sum += d;
	if (d > k->max)
		k->max = d;
	return 0;
}

/* Is a thread in this state asked for its native stack? */
static int native_wanted(int state)
{
	return S.o.native && (state == SAMPLER_RUNNING || S.o.native_idle);
}

/* The samples a capture answers: every want of its thread (one stack,
 * taken once). */
static void serve_capture(const struct native_capture *c, size_t *fresh,
			  struct cost *k)
{
	struct sampler_sample *first = NULL;
	int served = 0, native = 0;

	for (size_t i = 0; i < S.nwant;) {
		struct want *w = &S.want[i];

		if (w->native_id != c->tid || !w->pt) {
			i++;
			continue;
		}
		*fresh -= w->fresh;
		served++;
		if (!first) {
			if (finish_timed(w, c, k, &native) == 0)
				first = &S.batch[k->nsamp - 1];
		} else if (k->nsamp < BATCH_MAX) {
			struct sampler_sample *out = &S.batch[k->nsamp++];

			*out = *first;
			out->ts = w->ts;
			out->state = w->state;
			out->gil = w->gil;
			out->cpu_us = w->cpu_us;
		}
		if (first && native)
			S.c.native_samples++;
		else if (first)
			S.c.native_failed++, S.c.native_stale++;
		want_remove(i);
	}
	if (!served)
		S.c.native_late++; /* nobody wants it now */
}

/* The wants: captures as they come, until the fresh ones are all in or
 * the deadline; then the wants of threads gone are dropped and those too
 * old get Python-only samples. */
static void serve_natives(int64_t deadline, struct cost *k)
{
	uint64_t expire = S.o.hz / 10 > 2 ? (uint64_t)S.o.hz / 10 : 2;
	size_t fresh = 0;
	int native;

	for (size_t i = 0; i < S.nwant; i++)
		fresh += S.want[i].fresh;
	for (;;) {
		while (native_collect(S.cap) == 0)
			serve_capture(S.cap, &fresh, k);
		if (!fresh || native_wait(deadline) < 0)
			break;
	}
	for (size_t i = 0; i < S.nwant;) {
		struct want *w = &S.want[i];

		if (w->pt && S.tick - w->tick < expire &&
		    w->t->nwant <= WANTS_PER_THREAD) {
			i++;
			continue;
		}
		if (w->pt) {
			/* No answer in ~100 ms: the thread blocks the
			 * signal, or never got a CPU. */
			S.c.native_failed++;
			S.c.native_unanswered++;
			finish_timed(w, NULL, k, &native);
		}
		want_remove(i);
	}
}

static void tick(void)
{
	struct cost k = {0};
	size_t n = 0;
	int64_t t0 = mono_ns(), wait;
	uintptr_t gil_ts;
	double now = real_s();
	int rc, native;

	S.tick++;
	for (size_t i = 0; i < S.nwant; i++) {
		S.want[i].pt = NULL; /* bound again below */
		S.want[i].t = NULL;
		S.want[i].fresh = 0;
	}
	for (int i = 0; i < WALK_TRIES; i++) {
		rc = pyframes_threads_fast(S.scratch, S.threads,
					   PYSTACK_THREADS_MAX, &n, &gil_ts);
		if (rc != -EFAULT)
			break;
	}
	for (size_t i = 0; i < n; i++) {
		const struct pyframes_thread *pt = &S.threads[i];
		struct want w;

		/* The agent's GIL threads hold thread states: not the
		 * target's. */
		if (pygil_is_own_thread(pt->native_id))
			continue;
		if (sample_begin(pt, gil_ts, now, &w))
			continue;
		if (native_wanted(w.state) && S.nwant < WANTS_MAX) {
			/* Signalled now (or still waiting for its earlier
			 * signal), sampled when its capture comes; the
			 * others are sampled meanwhile. */
			rc = native_request(pt->native_id, pt->tstate, S.tick);
			if (rc == 0 || rc == -EINPROGRESS) {
				w.fresh = rc == 0;
				w.t->nwant++;
				S.want[S.nwant++] = w;
				continue;
			}
			S.c.native_failed++;
		}
		finish_timed(&w, NULL, &k, &native);
	}
	if (S.nwant) {
		/* Half a period at most, and no more than NATIVE_WAIT_US. */
		wait = 500000000LL / S.o.hz;
		if (wait > NATIVE_WAIT_US * 1000LL)
			wait = NATIVE_WAIT_US * 1000LL;
		serve_natives(t0 + wait, &k);
	}
	thr_prune();
	sampler_store_add(S.batch, k.nsamp);
	pthread_mutex_lock(&S.lock);
	S.c.ticks++;
	S.c.samples += k.nsamp;
	S.c.sample_ns += k.sum;
	if (k.max > S.c.sample_ns_max)
		S.c.sample_ns_max = k.max;
	S.c.tick_ns += (double)(mono_ns() - t0);
	S.c.threads = (unsigned)k.nsamp;
	pthread_mutex_unlock(&S.lock);
}

/* ---- the thread ------------------------------------------------------- */

static void *sampler_main(void *arg)
{
	int64_t period = 1000000000LL / S.o.hz, next = mono_ns(), end = 0;
	struct sched_param sp = {0};

	(void)arg;
	/* A batch thread: its wake-ups do not preempt the target's threads
	 * (at 1 kHz that would be a thousand switches a second, each leaving
	 * a colder cache to the preempted thread); it runs when a CPU is
	 * free or at the next scheduling tick.  No privilege needed. */
	pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
	if (S.o.duration_ms > 0)
		end = next + S.o.duration_ms * 1000000LL;
	pthread_mutex_lock(&S.lock);
	while (!S.stop) {
		struct timespec dl;
		int64_t now;

		pthread_mutex_unlock(&S.lock);
		tick();
		now = mono_ns();
		next += (int64_t)((double)period * (0.75 + 0.5 * uniform()));
		pthread_mutex_lock(&S.lock);
		if (next < now) {
			/* Late (a slow tick, a busy machine): skip, do not
			 * bunch up. */
			S.c.missed++;
			next = now + (int64_t)((double)period * uniform());
		}
		if (end && next >= end)
			break;
		dl.tv_sec = (time_t)(next / 1000000000);
		dl.tv_nsec = (long)(next % 1000000000);
		while (!S.stop && mono_ns() < next)
			if (pthread_cond_timedwait(&S.cond, &S.lock, &dl) ==
			    ETIMEDOUT)
				break;
	}
	S.running = 0;
	S.exited = 1;
	S.stopped = real_s();
	pthread_mutex_unlock(&S.lock);
	if (S.o.native)
		native_stop();
	return NULL;
}

int sampler_init(struct store *st, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int rc;

	if (S.inited)
		return 0;
	S.in = sampler_intern_new();
	S.scratch = pyframes_scratch_new();
	S.raw = malloc(PYFRAMES_RAW_MAX * sizeof(*S.raw));
	S.rawok = malloc(PYFRAMES_RAW_MAX);
	S.rawfid = malloc(PYFRAMES_RAW_MAX * sizeof(*S.rawfid));
	S.threads = malloc(PYSTACK_THREADS_MAX * sizeof(*S.threads));
	S.codes = malloc(CODE_CACHE_MAX * sizeof(*S.codes));
	S.thr = calloc(SAMPLER_THREADS_MAX, sizeof(*S.thr));
	S.path = malloc(PATH_MAX_FRAMES * sizeof(*S.path));
	S.ips = malloc(NATIVE_DEPTH_MAX * sizeof(*S.ips));
	S.batch = malloc(BATCH_MAX * sizeof(*S.batch));
	S.want = malloc(WANTS_MAX * sizeof(*S.want));
	S.cap = malloc(sizeof(*S.cap));
	S.leaf = malloc(PYFRAMES_LEAF_MAX * sizeof(*S.leaf));
	if (!S.in || !S.scratch || !S.raw || !S.rawok || !S.threads ||
	    !S.codes || !S.thr || !S.path || !S.ips || !S.batch || !S.want ||
	    !S.rawfid ||
	    !S.cap || !S.leaf) {
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
	pyframes_gil_range(&S.gil_lo, &S.gil_hi);
	S.rng = (uint64_t)mono_ns() ^ (uint64_t)getpid() << 32 ^ 0x9e3779b9;
	S.st = st;
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
	sigset_t all, old;
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
	if (o->native &&
	    (rc = native_start(pyframes_leaf_capture, err, errlen)) < 0) {
		pthread_mutex_unlock(&S.lock);
		return rc;
	}
	S.o = *o;
	S.stop = 0;
	/* Rebuild every thread's trust about once a second. */
	S.trust_ticks = o->hz > TRUST_TICKS_MIN ? (uint64_t)o->hz
						: TRUST_TICKS_MIN;
	S.error[0] = '\0';
	memset(&S.c, 0, sizeof(S.c));
	S.nwant = 0;
	for (size_t i = 0; i < S.nthr; i++)
		S.thr[i].nwant = 0;
	native_stats(&S.native0);
	S.started = real_s();
	S.stopped = 0;
	/* Agent threads take none of the target's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&S.thread, NULL, sampler_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		if (o->native)
			native_stop();
		pthread_mutex_unlock(&S.lock);
		snprintf(err, errlen, "cannot start the sampler: %s",
			 strerror(-rc));
		return rc;
	}
	pthread_setname_np(S.thread, "probing-sample");
	S.running = 1;
	pthread_mutex_unlock(&S.lock);
	log_info("profiler started at %d Hz%s", o->hz,
		 o->native ? " with native stacks" : "");
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
	if (S.in)
		sampler_intern_counts(S.in, &ic);
	snprintf(st->error, sizeof(st->error), "%s", S.error);
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
			st->native_unwind_us =
				(double)ns.unwind_ns / 1e3 / (double)ns.captured;
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
	for (size_t i = 0; i < S.nthr; i++)
		if (S.thr[i].fd >= 0)
			close(S.thr[i].fd); /* the parent's threads' files */
	S.nthr = 0;
	S.nwant = 0;
	memset(&S.thr_map, 0, sizeof(S.thr_map));
	S.ncodes = 0;
	memset(&S.code_map, 0, sizeof(S.code_map));
	S.unknown_fn = 0;
	native_atfork_child();
	sampler_store_atfork_child();
}
