/*
 * mixed_stack: native frames with the Python frames they run.  See
 * mixed_stack.h.
 */
#include "mixed_stack.h"

#include <errno.h>
#include <string.h>

#include "profiler/native.h"

#define TRIES 3

static int list(struct mixed_threads *l)
{
	size_t n = 0;
	int rc = cpython.read.threads(l->t, l->cap, &n, NULL, 0);

	/* A list that kept changing gives what could be read of it. */
	if (rc && rc != -EFAULT)
		return rc;
	l->n = n;
	return 0;
}

static const struct cpython_thread *find(const struct mixed_threads *l,
					 long tid)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->t[i].native_id == tid)
			return &l->t[i];
	return NULL;
}

/* Evaluation-loop frames among the native ones. */
static size_t evals(const struct mixed_stack *m)
{
	size_t k = 0;

	for (size_t i = 0; i < m->nips; i++)
		k += native_is_eval(m->ips[i]) != 0;
	return k;
}

/* Python segments: runs of frames each ending at an entry frame (the
 * outermost run without one counts too). */
static size_t segments(const struct mixed_stack *m)
{
	size_t k = 0;

	for (size_t i = 0; i < m->nraw; i++)
		if (m->raw[i].eval_entry || i + 1 == m->nraw)
			k++;
	return k;
}

static void put(struct mixed_stack *m, int python, size_t index)
{
	if (m->n < MIXED_MAX) {
		m->order[m->n].python = (unsigned char)python;
		m->order[m->n].index = (uint16_t)index;
		m->n++;
	}
}

/* The splice: each evaluation-loop frame replaced by the Python frames
 * up to and including the next entry frame. */
static void splice(struct mixed_stack *m)
{
	size_t pi = 0;

	m->n = 0;
	for (size_t i = 0; i < m->nips; i++) {
		if (native_is_eval(m->ips[i]) && pi < m->nraw) {
			while (pi < m->nraw) {
				put(m, 1, pi);
				if (m->raw[pi++].eval_entry)
					break;
			}
			continue;
		}
		put(m, 0, i);
	}
	while (pi < m->nraw)
		put(m, 1, pi++);
}

int mixed_stack_take(long tid, struct cpython_scratch *s,
		     struct mixed_threads *l, struct mixed_stack *m)
{
	int rc = 0;

	m->nips = m->nraw = m->n = 0;
	m->exact = 0;
	if (!l->n && (rc = list(l)))
		return rc;
	for (int k = 0; k < TRIES; k++) {
		const struct cpython_thread *t;
		int trunc = 0;

		/* Listed again after a try that did not match: the reader
		 * walks from where the list saw the thread's frames. */
		if (k && (rc = list(l)))
			return rc;
		rc = hang_native_capture(tid, m->ips, HANG_NATIVE_DEPTH_MAX,
					 &m->nips);
		if (rc)
			return rc;
		if (!(t = find(l, tid)))
			return -ESRCH;
		m->nraw = 0;
		rc = cpython.read.walk_raw(t, s, NULL, m->raw, MIXED_PY_MAX,
					   &m->nraw, &trunc);
		if (rc == -ESRCH)
			return rc;
		/* A native stack cut at its depth has fewer loop frames
		 * than the Python stack has segments: as good as it gets. */
		m->exact = !rc && (evals(m) == segments(m) ||
				   (m->nips == HANG_NATIVE_DEPTH_MAX &&
				    evals(m) < segments(m)));
		if (m->exact)
			break;
	}
	splice(m);
	return 0;
}
