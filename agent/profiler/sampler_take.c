/*
 * sampler_take: one thread's sample: its Python frames (walked, or joined
 * to the leaf a native capture carries), the native frames spliced in,
 * the stack interned.  Part of the sampler (sampler_impl.h); sampler
 * thread only.
 */
#include "sampler_impl.h"

#include <errno.h>
#include <string.h>

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
		S.path[(*n)++] = sampler_codes_frame(&S.raw[i]);
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
		S.path[n++] = sampler_codes_frame(&S.raw[pi++]);
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
		memmove(S.raw + nleaf, S.raw + j,
			(S.nraw - j) * sizeof(*S.raw));
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

/* Samples w into the batch (a Python-only one when c is NULL); 0, or 1
 * when there was nothing to record.  *native as sample_finish. */
int sampler_take_timed(struct want *w, const struct native_capture *c,
		       struct cost *k, int *native)
{
	int64_t ts = sampler_mono_ns();
	double d;

	*native = 0;
	if (k->nsamp >= BATCH_MAX) {
		S.c.threads_skipped++;
		return 1;
	}
	if (sample_finish(w, c, &S.batch[k->nsamp], native))
		return 1;
	d = (double)(sampler_mono_ns() - ts);
	k->nsamp++;
	k->sum += d;
	if (d > k->max)
		k->max = d;
	return 0;
}

