/*
 * dbgstop: a thread's stop, GIL side.  See dbgstop.h.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"
#include <frameobject.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "cpython/cpython.h"
#include "dbgcleanup.h"
#include "dbgevents.h"
#include "dbghooks.h"
#include "dbgstep.h"
#include "dbgstop.h"
#include "dbgtasks.h"
#include "debugger.h"
#include "python/pygil.h"
#include "python/pyrepr.h"
#include "python/variables.h"

static void frames_free(struct debugger_pframe *fr, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(fr[i].func);
		free(fr[i].file);
		Py_XDECREF(fr[i].obj);
	}
	free(fr);
}

/* GIL: the stack from f outwards (or, for an uncaught exception, from
 * a traceback's innermost frame outwards: tb given). */
static struct debugger_pframe *capture(PyFrameObject *f, PyObject *tb,
				       size_t *n)
{
	struct debugger_pframe *fr;
	size_t k = 0;

	if (!tb)
		return dbgtasks_frames_of(f, DEBUGGER_FRAMES_MAX, n);
	*n = 0;
	if (!(fr = calloc(DEBUGGER_FRAMES_MAX, sizeof(*fr))))
		return NULL;
	/* Innermost last in a traceback: collect, then reverse. */
	for (PyTracebackObject *t = (PyTracebackObject *)tb;
	     t && k < DEBUGGER_FRAMES_MAX; t = t->tb_next, k++) {
		PyCodeObject *co = PyFrame_GetCode(t->tb_frame);

		/* tb_lineno is computed lazily by its getter in later 3.11
		 * releases (the field stays -1). */
		PyObject *ln =
			PyObject_GetAttrString((PyObject *)t, "tb_lineno");

		fr[k].obj = Py_NewRef((PyObject *)t->tb_frame);
		fr[k].line = ln && PyLong_Check(ln) ? (int)PyLong_AsLong(ln)
						    : t->tb_lineno;
		Py_XDECREF(ln);
		PyErr_Clear();
		fr[k].func = pyrepr_utf8_dup(cpython.frame.qualname(co));
		fr[k].file = pyrepr_utf8_dup(co->co_filename);
		Py_DECREF(co);
	}
	for (size_t i = 0; i < k / 2; i++) {
		struct debugger_pframe x = fr[i];
		fr[i] = fr[k - 1 - i];
		fr[k - 1 - i] = x;
	}
	*n = k;
	return fr;
}

/* This thread is in dbgstop_here(): the Python code the stop itself
 * runs (an import, a view) must not stop again. */
static _Thread_local int in_stop;

int dbgstop_busy(void)
{
	return in_stop;
}

static int stop_here(PyThreadState *ts, PyFrameObject *f, PyObject *tb,
		     const char *reason, const int *ids, int nids,
		     const char *text, PyObject *exc, const char *exc_mode,
		     unsigned *cmd_epoch)
{
	struct debugger_pframe *fr;
	size_t n;
	int first = 0, cmd, slot;
	long tid = cpython.frame.native_id(ts);

	fr = capture(f, tb, &n);
	if (!fr)
		return 0;
	dbgstep_clear(ts);
	slot = debugger_enter_stop(tid, ts->thread_id, fr, n, exc, exc_mode,
				   !strcmp(reason, "pause"), &first);
	if (slot < 0) {
		frames_free(fr, n);
		if (slot == -ENOSPC)
			log_warn("debugger: more than %d threads paused; "
				 "thread %ld goes on",
				 DEBUGGER_PAUSED_MAX, tid);
		return 0;
	}
	if (first)
		dbgstop_all();
	/* A thread late for a round that began with every thread in C
	 * (debugger_pause_held), or one shown held in this stop, is said
	 * too: the editor shows it at the call it has left since. */
	if (first || strcmp(reason, "pause") || debugger_round_held() ||
	    dbgtasks_held(debugger_epoch(), tid))
		dbgevents_stopped(reason, tid, first, ids, nids, text);

	Py_BEGIN_ALLOW_THREADS cmd = debugger_wait_resume(slot, cmd_epoch);
	Py_END_ALLOW_THREADS

		/* The GIL is ours again: let go of what the stop held. */
		debugger_leave_stop(slot, &fr, &n, &exc);
	frames_free(fr, n);
	Py_XDECREF(exc);
	variables_reset_stale();
	/* The held threads and asyncio tasks shown at the stop: their
	 * frames go too (they would keep the program's objects alive while
	 * it runs). */
	dbgtasks_drop_stale(debugger_epoch());
	return cmd;
}

int dbgstop_here(PyThreadState *ts, PyFrameObject *f, PyObject *tb,
		 const char *reason, const int *ids, int nids, const char *text,
		 PyObject *exc, const char *exc_mode, unsigned *cmd_epoch)
{
	int cmd;

	*cmd_epoch = 0;
	if (in_stop)
		return 0;
	in_stop = 1;
	cmd = stop_here(ts, f, tb, reason, ids, nids, text, exc, exc_mode,
			cmd_epoch);
	in_stop = 0;
	return cmd;
}

void dbgstop_resumed(PyThreadState *ts, PyFrameObject *f, int cmd,
		     unsigned cmd_epoch)
{
	if (!debugger_pause_wanted())
		cpython.trace.set_mode(NULL, 0);
	dbgstep_begin(ts, f, cmd, cmd_epoch);
	if (!debugger_active()) {
		dbgcleanup_now();
		return;
	}
	dbghooks_update();
	cpython.trace.retrace(ts);
}

void dbgstop_all(void)
{
	cpython.trace.set_mode(NULL, CPYTHON_TRACE_NEW | CPYTHON_TRACE_CALLERS);
	dbghooks_enable();
	dbghooks_enabled_now();
	cpython.trace.retrace_all(pygil_is_own_thread);
}
