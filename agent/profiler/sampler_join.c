/*
 * sampler_join: native captures joined to the samples that wait for them.
 * Part of the sampler (sampler_impl.h); sampler thread only (the captures
 * come from the signal handlers through native.c's ring).
 */
#include "sampler_impl.h"

#include <errno.h>
#include <stdlib.h>

#define WANTS_MAX SAMPLER_THREADS_MAX /* samples waiting for captures */
#define WANTS_PER_THREAD 64

static struct want *want; /* WANTS_MAX */
static size_t nwant;
static struct native_capture *cap;

int sampler_join_init(void)
{
	want = malloc(WANTS_MAX * sizeof(*want));
	cap = malloc(sizeof(*cap));
	return want && cap ? 0 : -ENOMEM;
}

void sampler_join_reset(void)
{
	nwant = 0;
}

void sampler_join_unbind(void)
{
	for (size_t i = 0; i < nwant; i++) {
		want[i].pt = NULL; /* bound again by sampler_join_bind */
		want[i].t = NULL;
		want[i].fresh = 0;
	}
}

int sampler_join_ask(struct want *w)
{
	int rc;

	if (nwant >= WANTS_MAX)
		return -ENOSPC;
	rc = native_request(w->native_id, w->pt->tstate, w->tick);
	if (rc && rc != -EINPROGRESS)
		return rc;
	w->fresh = rc == 0;
	w->t->nwant++;
	want[nwant++] = *w;
	return 0;
}

size_t sampler_join_pending(void)
{
	return nwant;
}

void sampler_join_bind(const struct cpython_thread *pt, struct thr *t)
{
	for (size_t i = 0; i < nwant && t->nwant; i++)
		if (want[i].native_id == pt->native_id) {
			want[i].pt = pt;
			want[i].t = t;
		}
}

static void want_remove(size_t i)
{
	if (want[i].t)
		want[i].t->nwant--;
	want[i] = want[--nwant];
}

int sampler_join_wanted(const struct sampler_opts *o, const struct want *w)
{
	/* A thread blocked in the kernel is never signalled: the signal
	 * would cut its system call short (EINTR from poll, sleeps, ...);
	 * with native_idle its sample names the call instead
	 * (sampler_take).  "Running" from /proc is the kernel's runnable
	 * state, which a thread also has on its way into or out of a
	 * blocking call (and while it waits for a CPU there): so it must
	 * also have been on a CPU for a quarter of the period since its
	 * previous sample.  A thread that wakes now and then for a moment
	 * (a poll loop) never is; a busy one always is. */
	return o->native && w->known && w->state == SAMPLER_RUNNING &&
	       w->cpu_us >= 250000 / o->hz;
}

/* The samples a capture answers: every want of its thread (one stack,
 * taken once). */
static void serve_capture(struct tick *tk, const struct native_capture *c,
			  size_t *fresh)
{
	struct sampler_sample *first = NULL;
	int served = 0, native = 0;

	for (size_t i = 0; i < nwant;) {
		struct want *w = &want[i];

		if (w->native_id != c->tid || !w->pt) {
			i++;
			continue;
		}
		*fresh -= w->fresh;
		served++;
		if (!first) {
			if (sampler_take(tk, w, c, &native) == 0)
				first = &tk->batch[tk->nsamp - 1];
		} else if (tk->nsamp < BATCH_MAX) {
			struct sampler_sample *out = &tk->batch[tk->nsamp++];

			*out = *first;
			out->ts = w->ts;
			out->state = w->state;
			out->gil = w->gil;
			out->cpu_us = w->cpu_us;
		}
		if (first && native)
			tk->c.native_samples++;
		else if (first)
			tk->c.native_failed++, tk->c.native_stale++;
		want_remove(i);
	}
	if (!served)
		tk->c.native_late++; /* nobody wants it now */
}

void sampler_join_serve(struct tick *tk, int64_t deadline)
{
	int hz = tk->o->hz;
	uint64_t expire = hz / 10 > 2 ? (uint64_t)hz / 10 : 2;
	size_t fresh = 0;
	int native;

	for (size_t i = 0; i < nwant; i++)
		fresh += want[i].fresh;
	for (;;) {
		while (native_collect(cap) == 0)
			serve_capture(tk, cap, &fresh);
		if (!fresh || native_wait(deadline) < 0)
			break;
	}
	for (size_t i = 0; i < nwant;) {
		struct want *w = &want[i];

		if (w->pt && tk->n - w->tick < expire &&
		    w->t->nwant <= WANTS_PER_THREAD) {
			i++;
			continue;
		}
		if (w->pt) {
			/* No answer in ~100 ms: the thread blocks the
			 * signal, or never got a CPU. */
			tk->c.native_failed++;
			tk->c.native_unanswered++;
			sampler_take(tk, w, NULL, &native);
		}
		want_remove(i);
	}
}

