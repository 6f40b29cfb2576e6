/*
 * snapshot: see snapshot.h.
 */
#include "snapshot.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "cpython/cpython.h"
#include "pygil.h"

/* Shared between the caller and the GIL thread: whoever lets go last frees
 * it (the GIL thread may still be in a slow __repr__ when the caller gives
 * up on it). */
struct take {
	int refs;
	struct pystack st;
	struct pystack_opts o;
	uint64_t *threads;
	int rc;
	char err[256];
};

static void take_unref(struct take *t)
{
	if (__atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		pystack_release(&t->st);
		free(t->threads);
		free(t);
	}
}

static void take_with_gil(void *arg)
{
	struct take *t = arg;

	if (cpython.finalizing())
		t->rc = -ESHUTDOWN;
	else
		t->rc = pystack_take_gil(&t->st, &t->o, t->err, sizeof(t->err));
	take_unref(t);
}

/* The GIL threads hold Python thread states while they wait or work; they
 * are the agent's, not the target's. */
static void drop_own_threads(struct pystack *st)
{
	size_t keep = 0;

	for (size_t i = 0; i < st->nthreads; i++) {
		if (pygil_is_own_thread(st->threads[i].native_id)) {
			pystack_thread_release(&st->threads[i]);
			continue;
		}
		st->threads[keep++] = st->threads[i];
	}
	st->nthreads = keep;
}

/* One try with the GIL: 0 with out filled, or pygil_run()'s error, or
 * the GIL path's own (then with err). */
static int try_gil(struct pystack *out, const struct pystack_opts *o,
		   const struct pygil_limits *lim, char *err, size_t errlen)
{
	struct take *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->refs = 2;
	t->o = *o;
	if (o->threads && o->nthreads) {
		t->threads = calloc(o->nthreads, sizeof(uint64_t));
		if (!t->threads) {
			free(t);
			return -ENOMEM;
		}
		memcpy(t->threads, o->threads, o->nthreads * sizeof(uint64_t));
		t->o.threads = t->threads;
	}
	rc = pygil_run(take_with_gil, t, lim, NULL);
	if (rc == 0 && t->rc == 0) {
		*out = t->st;
		memset(&t->st, 0, sizeof(t->st));
	} else if (rc == 0) {
		rc = t->rc;
		snprintf(err, errlen, "%s", t->err);
	}
	if (rc == 0 || rc == -EINPROGRESS || t->rc) {
		take_unref(t);		/* fn ran or still runs: shared */
	} else {
		free(t->threads);	/* fn never runs: ours alone */
		free(t);
	}
	return rc;
}

int snapshot_stacks(struct pystack *out, const struct pystack_opts *o,
		    int gil_timeout_ms, volatile int *cancel,
		    struct snapshot_gil *gil, char *err, size_t errlen)
{
	struct pygil_limits lim = {0};
	struct pystack_opts bare;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(gil, 0, sizeof(*gil));
	if (gil_timeout_ms <= 0)
		gil_timeout_ms = (int)config_int("python.gil_timeout_ms");
	lim.start_ms = gil_timeout_ms;
	lim.run_ms = 2000;      /* reprs of locals: interrupt a slow one */
	lim.hard_ms = 5000;
	lim.cancel = cancel;
	lim.kind = o->locals ? PYGIL_REPR : PYGIL_OURS;
	lim.what = o->locals ? "a backtrace's reprs of locals" : NULL;
	rc = try_gil(out, o, &lim, err, errlen);
	if (o->locals && (rc == -EBUSY || rc == -EINPROGRESS)) {
		/* Reprs that never end (a __repr__ on a lock, in C) hold
		 * their kind's places, or this one's: the stacks themselves
		 * are the agent's own work, taken without them. */
		if (rc == -EBUSY)
			pygil_busy_explain(gil->locals_note,
					   sizeof(gil->locals_note));
		else
			snprintf(gil->locals_note, sizeof(gil->locals_note),
				 "the reprs of locals did not end within %d ms "
				 "(a __repr__ blocked in C or on a lock?); "
				 "that call goes on, on one of the agent's "
				 "threads, until it returns",
				 lim.hard_ms);
		bare = *o;
		bare.locals = 0;
		lim.kind = PYGIL_OURS;
		lim.what = "a backtrace (no locals)";
		rc = try_gil(out, &bare, &lim, err, errlen);
	}
	if (rc == 0) {
		gil->acquired = 1;
		drop_own_threads(out);
		return 0;
	}
	if (rc == -ENOMEM) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	if (rc == -ECANCELED) {
		snprintf(err, errlen, "cancelled");
		return rc;
	}
	/* No GIL in time (or the GIL path failed): read without it.  The
	 * holder may be one of the agent's GIL threads (a slow repr of
	 * another request): that is the agent's call, not a thread of the
	 * program to name. */
	gil->holder = pystack_gil_holder(&gil->holder_native);
	if (gil->holder &&
	    pygil_thread_what(gil->holder_native, gil->holder_agent,
			      sizeof(gil->holder_agent))) {
		gil->holder = 0;
		gil->holder_native = 0;
	}
	rc = pystack_take_nogil(out, o, err, errlen);
	if (rc == 0)
		drop_own_threads(out);
	return rc;
}
