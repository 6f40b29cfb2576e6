/*
 * pyframes: the runtime's thread states and the GIL, read without the GIL.
 * See pyframes.h.
 *
 * The module's other sources: pyframes_walk.c (a thread's frames),
 * pyframes_code.c (code objects' names and line tables), cpython_leaf.c
 * (the innermost frames from a signal handler), pyframes_mem.c (the safe
 * copies all of them read through); pyframes_impl.h is what they share.
 */
#include "pyframes_impl.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* Set once by pyframes_disable(): why the reader is off. */
static atomic_int disabled;
static char disabled_why[512];

void pyframes_disable(const char *why)
{
	snprintf(disabled_why, sizeof(disabled_why), "%s", why);
	atomic_store(&disabled, 1);
}

const char *pyframes_off_reason(void)
{
	return atomic_load(&disabled) ? disabled_why : NULL;
}

int pyframes_ready(void)
{
	int init = 0;
	uintptr_t fin = 1;

	if (atomic_load(&disabled))
		return -ENOENT;
	if (READ_FIELD(init, &_PyRuntime, _PyRuntimeState, RUNTIME_INITIALIZED) ||
	    READ_FIELD_AT(fin, &_PyRuntime, PYL_RUNTIME, _PyRuntimeState,
			  _finalizing))
		return -ENOENT;
	return init && !fin ? 0 : -ENOENT;
}

uint64_t pyframes_main_thread(void)
{
	unsigned long id = 0;

	if (READ_FIELD(id, &_PyRuntime, _PyRuntimeState, main_thread))
		return 0;
	return id;
}

/* Fills out from a thread state's copy. */
static void thread_from(struct cpython_thread *o, uintptr_t at,
			const PyThreadState *t)
{
	o->thread_id = t->thread_id;
	o->native_id = NATIVE_ID(t);
	o->tstate = at;
	o->at[AT_CFRAME] = ANCHOR_OF(at, t);
#if PY_VERSION_HEX >= 0x030B0000
	o->at[AT_CHUNK] = (uintptr_t)t->datastack_chunk;
	o->at[AT_TOP] = (uintptr_t)t->datastack_top;
#else
	o->at[AT_CHUNK] = o->at[AT_TOP] = 0;
#endif
}

/* The walk of pyframes_threads(); *ninterps counts the interpreters,
 * *first is the first one. */
static int list_threads(struct cpython_thread *out, size_t max, size_t *n,
			size_t *ninterps, uintptr_t *first, char *err,
			size_t errlen)
{
	unsigned char rt[RUNTIME_HEAD];
	uintptr_t interp = 0, fin = 0;
	size_t ni = 0;
	int init = 0;

	*n = 0;
	*ninterps = 0;
	*first = 0;
	if (atomic_load(&disabled)) {
		errbuf_set(err, errlen, "%s", disabled_why);
		return -ENOTSUP;
	}
#define FIELD(dst, buf, type, field)                                           \
	memcpy(&(dst), (buf) + offsetof(type, field), sizeof(dst))
	if (pyframes_mem_read(rt, (uintptr_t)&_PyRuntime, sizeof(rt)) == 0) {
		pyl_fix(PYL_RUNTIME, rt, sizeof(rt));
		FIELD(init, rt, _PyRuntimeState, RUNTIME_INITIALIZED);
		FIELD(fin, rt, _PyRuntimeState, _finalizing);
		FIELD(interp, rt, _PyRuntimeState, interpreters.head);
	}
	if (!init || fin) {
		errbuf_set(err, errlen, "Python is not initialised");
		return -ENOENT;
	}
	*first = interp;
	while (interp && ni++ < PYFRAMES_INTERPS_MAX) {
		unsigned char ib[INTERP_HEAD];
		uintptr_t ts, prev = 0;

		(*ninterps)++;
		if (pyframes_mem_read(ib, interp, sizeof(ib)))
			goto fault;
		pyl_fix(PYL_INTERP, ib, sizeof(ib));
		FIELD(ts, ib, PyInterpreterState, THREADS_HEAD);
		while (ts && *n < max) {
			PyThreadState t;

			/* A list rewritten under us shows as broken links. */
			if (pyframes_mem_read(&t, ts, sizeof(t)))
				goto fault;
			pyl_fix(PYL_TSTATE, &t, sizeof(t));
			if ((uintptr_t)t.interp != interp ||
			    (uintptr_t)t.prev != prev)
				goto fault;
			prev = ts;
			thread_from(&out[*n], ts, &t);
			(*n)++;
			ts = (uintptr_t)t.next;
		}
		FIELD(interp, ib, PyInterpreterState, next);
	}
#undef FIELD
	return 0;
fault:
	errbuf_set(err, errlen, "interpreter or thread list unreadable");
	return -EFAULT;
}

int pyframes_threads(struct cpython_thread *out, size_t max, size_t *n,
		     char *err, size_t errlen)
{
	size_t ni;
	uintptr_t first;
	int rc = -EFAULT;

	/* A thread state being linked in shows as a broken link for a
	 * moment (CPython sets next->prev before the head): read again. */
	for (int i = 0; i < LIST_TRIES && rc == -EFAULT; i++)
		rc = list_threads(out, max, n, &ni, &first, err, errlen);
	return rc;
}

/* Is ts one of the thread states of some interpreter now? */
static int tstate_listed(uintptr_t ts)
{
	uintptr_t interp = 0, cur;
	size_t ni = 0, nt = 0;

	if (READ_FIELD_AT(interp, &_PyRuntime, PYL_RUNTIME, _PyRuntimeState,
			  interpreters.head))
		return 0;
	while (interp && ni++ < PYFRAMES_INTERPS_MAX) {
		if (READ_FIELD_AT(cur, interp, PYL_INTERP, PyInterpreterState,
				  THREADS_HEAD))
			return 0;
		while (cur && nt++ < PYFRAMES_THREADS_SCAN) {
			if (cur == ts)
				return 1;
			if (READ_FIELD_AT(cur, cur, PYL_TSTATE, PyThreadState,
					  next))
				return 0;
		}
		if (READ_FIELD_AT(interp, interp, PYL_INTERP,
				  PyInterpreterState, next))
			return 0;
	}
	return 0;
}

int pyframes_gil_holder(uint64_t *thread_id, long *native_id)
{
	struct _gil_runtime_state gil;
	PyThreadState t;
	uintptr_t holder;

	*thread_id = 0;
	*native_id = 0;
	if (pyframes_ready() < 0 ||
	    pyframes_mem_read(&gil, GIL_AT, sizeof(gil)))
		return -ENOENT;
	holder = GIL_HOLDER(gil);
	if (GIL_LOCKED(gil) != 1 || !holder)
		return -ENOENT;
	/* A thread state is freed just before its thread drops the GIL:
	 * trust last_holder only while it is still listed. */
	if (!tstate_listed(holder) || pyframes_mem_read(&t, holder, sizeof(t)))
		return -ENOENT;
	pyl_fix(PYL_TSTATE, &t, sizeof(t));
	*thread_id = t.thread_id;
	*native_id = NATIVE_ID(&t);
	return 0;
}

uintptr_t pyframes_gil_tstate(void)
{
	struct _gil_runtime_state gil;

	if (pyframes_mem_read(&gil, GIL_AT, sizeof(gil)) ||
	    GIL_LOCKED(gil) != 1)
		return 0;
	return GIL_HOLDER(gil);
}

void pyframes_gil_range(uintptr_t *lo, uintptr_t *hi)
{
	*lo = GIL_AT;
	*hi = *lo + sizeof(struct _gil_runtime_state);
}

/* The cached list still as it was: the same thread states in the same
 * order, linked to each other and to the one interpreter.  out filled. */
static int list_cached(struct cpython_scratch *s, struct cpython_thread *out,
		       size_t max, size_t *n, uintptr_t *gil_tstate)
{
	size_t k = 0;
	uintptr_t interp = 0, next = 1, head = 0, fin = 1;
	int init = 0;

	if (!s->interp || !s->nts || s->nts > max)
		return -EAGAIN;
	s->local[k] = (struct iovec){s->rt, sizeof(s->rt)};
	s->remote[k++] = (struct iovec){(void *)&_PyRuntime, sizeof(s->rt)};
	s->local[k] = (struct iovec){&s->gil, sizeof(s->gil)};
	s->remote[k++] = (struct iovec){(void *)GIL_AT, sizeof(s->gil)};
	s->local[k] = (struct iovec){s->ib, sizeof(s->ib)};
	s->remote[k++] = (struct iovec){(void *)s->interp, sizeof(s->ib)};
	for (size_t i = 0; i < s->nts; i++) {
		s->local[k] = (struct iovec){&s->tcopy[i], sizeof(s->tcopy[i])};
		s->remote[k++] = (struct iovec){(void *)s->ts[i],
						sizeof(s->tcopy[i])};
	}
	if (pyframes_mem_gather(s->local, s->remote, k))
		return -EAGAIN;
	pyl_fix(PYL_RUNTIME, s->rt, sizeof(s->rt));
	pyl_fix(PYL_INTERP, s->ib, sizeof(s->ib));
	for (size_t i = 0; i < s->nts; i++)
		pyl_fix(PYL_TSTATE, &s->tcopy[i], sizeof(s->tcopy[i]));
	memcpy(&init, s->rt + offsetof(_PyRuntimeState, RUNTIME_INITIALIZED),
	       sizeof(init));
	memcpy(&fin, s->rt + offsetof(_PyRuntimeState, _finalizing),
	       sizeof(fin));
	memcpy(&interp, s->rt + offsetof(_PyRuntimeState, interpreters.head),
	       sizeof(interp));
	memcpy(&next, s->ib + offsetof(PyInterpreterState, next),
	       sizeof(next));
	memcpy(&head, s->ib + offsetof(PyInterpreterState, THREADS_HEAD),
	       sizeof(head));
	if (!init || fin)
		return -ENOENT;
	if (interp != s->interp || next || head != s->ts[0])
		return -EAGAIN;
	for (size_t i = 0; i < s->nts; i++) {
		const PyThreadState *t = &s->tcopy[i];

		if ((uintptr_t)t->interp != interp ||
		    (uintptr_t)t->prev != (i ? s->ts[i - 1] : 0) ||
		    (uintptr_t)t->next != (i + 1 < s->nts ? s->ts[i + 1] : 0))
			return -EAGAIN;
		thread_from(&out[i], s->ts[i], t);
	}
	*n = s->nts;
	*gil_tstate = GIL_LOCKED(s->gil) == 1 ? GIL_HOLDER(s->gil) : 0;
	return 0;
}

int pyframes_threads_fast(struct cpython_scratch *s, struct cpython_thread *out,
			  size_t max, size_t *n, uintptr_t *gil_tstate)
{
	size_t ni;
	uintptr_t first;
	int rc;

	*n = 0;
	*gil_tstate = 0;
	rc = list_cached(s, out, max, n, gil_tstate);
	if (rc != -EAGAIN)
		return rc;
	/* Changed (a thread came or went) or never listed: walk, and
	 * remember the list when it is short and of one interpreter. */
	s->nts = 0;
	s->interp = 0;
	rc = list_threads(out, max, n, &ni, &first, NULL, 0);
	if (rc)
		return rc;
	*gil_tstate = pyframes_gil_tstate();
	if (ni == 1 && *n && *n <= LIST_CACHE_MAX) {
		for (size_t i = 0; i < *n; i++)
			s->ts[i] = out[i].tstate;
		s->nts = *n;
		s->interp = first;
	}
	return 0;
}
