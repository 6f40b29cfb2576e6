/*
 * sampler_take: one thread's sample: its Python frames (walked, or joined
 * to the leaf a native capture carries), the native frames spliced in,
 * the stack interned.  Part of the sampler (sampler_impl.h); sampler
 * thread only.
 */
#include "sampler_impl.h"
#include "sampler_tasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#define WALK_TRIES 2
#define TRUST_TICKS_MIN 50 /* frames are re-read at least every ~second */

/* The sample being taken: its Python frames (innermost first), whether
 * each one's frame came through the code cache and which it is, and the
 * path of interned frames (innermost first) with the native ones. */
static struct sampler_intern *in;
static struct cpython_raw *raw; /* CPYTHON_RAW_MAX */
static size_t nraw;
static unsigned char *rawok;
static uint32_t *rawfid;
static struct cpython_raw *leaf; /* CPYTHON_LEAF_MAX */
static uint32_t *path;		 /* PATH_MAX_FRAMES */
static uintptr_t *ips;		 /* NATIVE_DEPTH_MAX */

/* ---- the system call a blocked thread waits in ------------------------ */

#define SYSCALL_FRAMES 512 /* interned names, by number */

static uint32_t *sys_frames; /* SYSCALL_FRAMES, 0: not interned yet */

/* The names of the calls threads wait in; others are named by number. */
static const char *syscall_name(int nr)
{
	switch (nr) {
#define NAME(x)                                                                \
	case SYS_##x:                                                          \
		return #x;
#ifdef SYS_poll
		NAME(poll)
#endif
#ifdef SYS_select
		NAME(select)
#endif
#ifdef SYS_epoll_wait
		NAME(epoll_wait)
#endif
#ifdef SYS_nanosleep
		NAME(nanosleep)
#endif
#ifdef SYS_pause
		NAME(pause)
#endif
#ifdef SYS_accept
		NAME(accept)
#endif
#ifdef SYS_wait4
		NAME(wait4)
#endif
		NAME(read)
		NAME(write)
		NAME(readv)
		NAME(writev)
		NAME(pread64)
		NAME(pwrite64)
		NAME(futex)
		NAME(ppoll)
		NAME(pselect6)
		NAME(epoll_pwait)
		NAME(clock_nanosleep)
		NAME(accept4)
		NAME(connect)
		NAME(recvfrom)
		NAME(recvmsg)
		NAME(sendto)
		NAME(sendmsg)
		NAME(waitid)
		NAME(rt_sigtimedwait)
		NAME(rt_sigsuspend)
		NAME(openat)
		NAME(fsync)
		NAME(fdatasync)
		NAME(flock)
		NAME(fcntl)
		NAME(ioctl)
		NAME(msgrcv)
		NAME(semtimedop)
		NAME(io_getevents)
#undef NAME
	default:
		return NULL;
	}
}

/* The native frame "[system call: NAME]" of call nr; 0 when none. */
static uint32_t syscall_frame(int nr)
{
	char name[64];
	const char *s;
	uint32_t fn, *slot = NULL;

	if (nr < 0)
		return 0;
	if (nr < SYSCALL_FRAMES && sys_frames) {
		slot = &sys_frames[nr];
		if (*slot)
			return *slot;
	}
	s = syscall_name(nr);
	if (s)
		snprintf(name, sizeof(name), "[system call: %s]", s);
	else
		snprintf(name, sizeof(name), "[system call %d]", nr);
	fn = sampler_intern_func(in, SAMPLER_NATIVE, name, "[kernel]");
	fn = fn ? sampler_intern_frame(in, fn, -1) : 0;
	if (slot)
		*slot = fn;
	return fn;
}

int sampler_take_init(struct sampler_intern *intern)
{
	in = intern;
	raw = malloc(CPYTHON_RAW_MAX * sizeof(*raw));
	rawok = malloc(CPYTHON_RAW_MAX);
	rawfid = malloc(CPYTHON_RAW_MAX * sizeof(*rawfid));
	leaf = malloc(CPYTHON_LEAF_MAX * sizeof(*leaf));
	path = malloc(PATH_MAX_FRAMES * sizeof(*path));
	ips = malloc(NATIVE_DEPTH_MAX * sizeof(*ips));
	sys_frames = calloc(SYSCALL_FRAMES, sizeof(*sys_frames));
	return raw && rawok && rawfid && leaf && path && ips && sys_frames
		       ? 0
		       : -ENOMEM;
}

struct take {
	struct tick *tk;
	const struct cpython_thread *pt;
	struct thr *t;
	int rc;
};

static void read_python(void *arg)
{
	struct take *tk = arg;
	struct cpython_trust trust = {0};
	int hz = tk->tk->o->hz, trunc;
	/* Trust is rebuilt from scratch about once a second. */
	uint64_t every = hz > TRUST_TICKS_MIN ? (uint64_t)hz : TRUST_TICKS_MIN;

	if (tk->t->tframes && tk->tk->n - tk->t->trust_tick < every) {
		trust.frames = tk->t->tframes;
		trust.codes = tk->t->tcodes;
		trust.n = tk->t->tn;
	} else {
		tk->t->trust_tick = tk->tk->n;
	}
	for (int i = 0; i < WALK_TRIES; i++) {
		tk->rc = cpython.read.walk_raw(
			tk->pt, tk->tk->scratch, &trust, raw,
			(size_t)tk->tk->o->max_depth, &nraw, &trunc);
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
	for (size_t pos = 0; pos < nraw && pos < PYSTACK_DEPTH_MAX; pos++) {
		size_t i = nraw - 1 - pos;

		if (!rawok[i])
			break;
		t->tframes[pos] = raw[i].frame;
		t->tcodes[pos] = raw[i].code;
		t->tlasti[pos] = raw[i].lasti;
		t->tfid[pos] = rawfid[i];
		n++;
	}
	t->tn = n;
}

/* The interned frame of raw[i] at its instruction: from the thread's
 * previous sample when it is the same frame at the same place from the
 * root (trusted: same code object) at the same instruction, else through
 * the code cache. */
static uint32_t frame_of(struct thr *t, size_t i)
{
	const struct cpython_raw *r = &raw[i];
	size_t pos = nraw - 1 - i;
	uint32_t fid;
	int cached;

	if (r->trusted && t->tfid && pos < t->tn &&
	    t->tlasti[pos] == r->lasti && t->tfid[pos]) {
		rawok[i] = 1;
		return rawfid[i] = t->tfid[pos];
	}
	fid = sampler_codes_frame(r, &cached);
	rawok[i] = (unsigned char)cached;
	rawfid[i] = cached ? fid : 0;
	return fid;
}

/* The place in path of raw[mark] (a task's coroutine: sampler_tasks.h),
 * SIZE_MAX when none or not placed. */
static size_t mark, mark_at;

/* raw[i]'s frame into path[*n]. */
static void python_frame(struct thr *t, size_t i, size_t *n)
{
	if (i == mark)
		mark_at = *n;
	path[(*n)++] = frame_of(t, i);
}

/* Python frames raw[from..] up to and including the next entry frame:
 * what one _PyEval_EvalFrameDefault runs.  Returns the index after. */
static size_t python_segment(struct thr *t, size_t from, size_t *n)
{
	size_t i = from;

	while (i < nraw) {
		python_frame(t, i, n);
		if (raw[i++].eval_entry)
			break;
	}
	return i;
}

/* path (innermost first) from the Python frames and, when nips > 0,
 * the native ones with the Python frames spliced in at each eval call;
 * innermost of all, leaf when it is not 0 (a system call). */
static size_t build_path(struct thr *t, size_t nips, uint32_t leaf)
{
	size_t n = 0, pi = 0;

	mark_at = SIZE_MAX;
	if (leaf)
		path[n++] = leaf;
	for (size_t i = 0; i < nips && n < PATH_MAX_FRAMES - PYSTACK_DEPTH_MAX;
	     i++) {
		if (native_is_eval(ips[i]) && pi < nraw) {
			pi = python_segment(t, pi, &n);
			continue;
		}
		path[n] = sampler_intern_native(in, ips[i]);
		if (path[n])
			n++;
	}
	while (pi < nraw && n < PATH_MAX_FRAMES)
		python_frame(t, pi++, &n);
	return n;
}

/* The stack id of path[0..n), reusing t's previous nodes; *marked: the
 * node of path[mark_at] (0 when not placed). */
static uint32_t intern_path(struct thr *t, size_t n, uint32_t *marked)
{
	size_t mark_d = mark_at < n ? n - 1 - mark_at : SIZE_MAX;
	uint32_t node = 0;
	int same = t->frames != NULL;

	*marked = 0;
	for (size_t d = 0; d < n; d++) {
		uint32_t f = path[n - 1 - d];

		if (same && d < t->depth && t->frames[d] == f) {
			node = t->nodes[d];
		} else {
			same = 0;
			node = sampler_intern_stack(in, node, f);
			if (t->frames) {
				t->frames[d] = f;
				t->nodes[d] = node;
			}
		}
		if (d == mark_d)
			*marked = node;
	}
	if (t->frames)
		t->depth = n;
	return node;
}

/* The leaf a capture carries (its thread's innermost Python frames at the
 * instant of the unwind) joined to a walk of the thread now: raw becomes
 * leaf + the walk from the leaf's outer frame on.  1 when they join, 0
 * when they do not (the thread returned past the leaf's outer frame
 * since: raw is the walk alone), -1 when the capture has no leaf. */
static int join_leaf(struct take *tk, const struct native_capture *c)
{
	const struct cpython_leaf *l = (const void *)c->extra;
	size_t nleaf = 0, j, max = (size_t)tk->tk->o->max_depth;

	if (c->extra_len < sizeof(*l) || !l->complete ||
	    cpython.read.leaf_resolve(tk->tk->scratch, l, leaf,
				      CPYTHON_LEAF_MAX, &nleaf))
		return -1;
	if (l->outer) {
		read_python(tk);
		for (j = 0; j < nraw && raw[j].frame != l->outer; j++)
			;
		if (j == nraw)
			return 0;
		if (nleaf + nraw - j > max) /* the outermost go */
			nraw = max > nleaf ? j + max - nleaf : j;
		memmove(raw + nleaf, raw + j, (nraw - j) * sizeof(*raw));
		nraw = nleaf + nraw - j;
	} else {
		nraw = nleaf; /* the leaf is the whole stack */
	}
	memcpy(raw, leaf, nleaf * sizeof(*raw));
	return 1;
}

/* Takes w's stack (with c's native frames when c is given and joins:
 * *native set) into *out; 0, or 1 when there is nothing to record. */
static int sample_finish(struct tick *tick, struct want *w,
			 const struct native_capture *c,
			 struct sampler_sample *out, int *native)
{
	struct take tk = {.tk = tick, .pt = w->pt, .t = w->t, .rc = 0};
	size_t nips = 0, n;
	uint32_t leaf = 0, task = 0;
	long at;

	*native = 0;
	nraw = 0;
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
			memcpy(ips, c->ips, nips * sizeof(*ips));
			*native = 1;
		}
	} else {
		read_python(&tk);
		/* A thread blocked in the kernel is not signalled: with
		 * native_idle its native leaf is the call it waits in. */
		if (tick->o->native && tick->o->native_idle &&
		    w->state != SAMPLER_RUNNING)
			leaf = syscall_frame(w->sys_nr);
	}
	if (tk.rc == -ESRCH || (!nraw && !nips))
		return 1;
	memset(rawok, 0, nraw);
	at = sampler_tasks_find(w->pt->thread_id, raw, nraw, &task);
	mark = at >= 0 ? (size_t)at : SIZE_MAX;
	n = build_path(w->t, nips, leaf);
	keep_trust(w->t);
	out->ts = w->ts;
	out->thread_id = w->pt->thread_id;
	out->native_id = w->pt->native_id;
	out->stack = intern_path(w->t, n, &out->task_stack);
	out->task_frame = out->task_stack ? task : 0;
	out->state = w->state;
	out->gil = w->gil;
	out->cpu_us = w->cpu_us;
	return 0;
}

int sampler_take(struct tick *tk, struct want *w,
		 const struct native_capture *c, int *native)
{
	int64_t ts = sampler_mono_ns();
	double d;

	*native = 0;
	if (tk->nsamp >= BATCH_MAX) {
		tk->c.threads_skipped++;
		return 1;
	}
	if (sample_finish(tk, w, c, &tk->batch[tk->nsamp], native))
		return 1;
	d = (double)(sampler_mono_ns() - ts);
	tk->nsamp++;
	tk->c.sample_ns += d;
	if (d > tk->c.sample_ns_max)
		tk->c.sample_ns_max = d;
	return 0;
}

