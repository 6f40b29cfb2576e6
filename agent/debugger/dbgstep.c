/*
 * dbgstep: the steps of threads.  See dbgstep.h.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"
#include <frameobject.h>

#include "dbgstep.h"

#include "cpython/cpython.h"
#include "debugger.h"

struct step {
	PyThreadState *ts;
	uint64_t ident;
	int cmd;
	int depth;
	unsigned epoch; /* stale when a resume came after */
};

static struct step steps[DBGSTEP_MAX];
static int nsteps;

static struct step *step_of(PyThreadState *ts)
{
	for (int i = 0; i < nsteps; i++)
		if (steps[i].ts == ts && steps[i].ident == ts->thread_id)
			return &steps[i];
	return NULL;
}

void dbgstep_clear(PyThreadState *ts)
{
	for (int i = 0; i < nsteps; i++) {
		if (steps[i].ts == ts) {
			steps[i] = steps[--nsteps];
			cpython.trace.set_mode(ts, 0);
			return;
		}
	}
}

void dbgstep_begin(PyThreadState *ts, PyFrameObject *f, int cmd, unsigned epoch)
{
	if (cmd == DEBUGGER_NEXT || cmd == DEBUGGER_STEP_IN ||
	    cmd == DEBUGGER_STEP_OUT) {
		if (nsteps < DBGSTEP_MAX) {
			struct step *s = &steps[nsteps++];

			s->ts = ts;
			s->ident = ts->thread_id;
			s->cmd = cmd;
			s->depth = f ? cpython.frame.depth(f) : 0;
			s->epoch = epoch;
			cpython.trace.set_mode(
				ts, cmd == DEBUGGER_STEP_IN
					    ? CPYTHON_TRACE_NEW |
						      CPYTHON_TRACE_CALLERS
					    : CPYTHON_TRACE_CALLERS);
		}
	}
}

int dbgstep_active(PyThreadState *ts)
{
	return step_of(ts) != NULL;
}

void dbgstep_prune(void)
{
	unsigned ep = debugger_epoch();

	for (int i = 0; i < nsteps;) {
		if (steps[i].epoch != ep) {
			cpython.trace.set_mode(steps[i].ts, 0);
			steps[i] = steps[--nsteps];
		} else {
			i++;
		}
	}
}

int dbgstep_done(PyThreadState *ts, PyFrameObject *f)
{
	struct step *s = step_of(ts);

	if (!s)
		return 0;
	if (s->epoch != debugger_epoch()) {
		dbgstep_clear(ts);
		return 0;
	}
	switch (s->cmd) {
	case DEBUGGER_STEP_IN:
		return 1;
	case DEBUGGER_NEXT:
		return cpython.frame.depth(f) <= s->depth;
	case DEBUGGER_STEP_OUT:
		return cpython.frame.depth(f) < s->depth;
	}
	return 0;
}

int dbgstep_count(void)
{
	return nsteps;
}

void dbgstep_reset(void)
{
	nsteps = 0;
}
