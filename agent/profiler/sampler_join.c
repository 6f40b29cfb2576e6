/*
 * sampler_join: native captures joined to the samples that wait for them.
 * Part of the sampler (sampler_impl.h); sampler thread only (the captures
 * come from the signal handlers through native.c's ring).
 */
#include "sampler_impl.h"

/* Binds the wants of thread t to this tick's listing. */
void sampler_join_bind(const struct pyframes_thread *pt, struct thr *t)
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

/* Is a thread in this state asked for its native stack? */
int sampler_join_wanted(int state)
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
			if (sampler_take_timed(w, c, k, &native) == 0)
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
void sampler_join_serve(int64_t deadline, struct cost *k)
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
			sampler_take_timed(w, NULL, k, &native);
		}
		want_remove(i);
	}
}

