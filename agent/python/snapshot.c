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

int snapshot_stacks(struct pystack *out, const struct pystack_opts *o,
		    int gil_timeout_ms, volatile int *cancel,
		    struct snapshot_gil *gil, char *err, size_t errlen)
{
	struct pygil_limits lim = {0};
	struct take *t;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(gil, 0, sizeof(*gil));
	if (gil_timeout_ms <= 0)
		gil_timeout_ms = (int)config_int("python.gil_timeout_ms");
	t = calloc(1, sizeof(*t));
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
	lim.start_ms = gil_timeout_ms;
	lim.run_ms = 2000;      /* reprs of locals: interrupt a slow one */
	lim.hard_ms = 5000;
	lim.cancel = cancel;
	rc = pygil_run(take_with_gil, t, &lim, NULL);
	if (rc == 0 && t->rc == 0) {
		*out = t->st;
		memset(&t->st, 0, sizeof(t->st));
		gil->acquired = 1;
		take_unref(t);
		drop_own_threads(out);
		return 0;
	}
	if (rc == -EINPROGRESS || rc == 0)
		take_unref(t);          /* fn ran or still runs: shared */
	else {
		free(t->threads);       /* fn never runs: ours alone */
		free(t);
	}
	if (rc == -ECANCELED) {
		snprintf(err, errlen, "cancelled");
		return rc;
	}
	/* No GIL in time (or the GIL path failed): read without it. */
	gil->holder = pystack_gil_holder(&gil->holder_native);
	rc = pystack_take_nogil(out, o, err, errlen);
	if (rc == 0)
		drop_own_threads(out);
	return rc;
}
