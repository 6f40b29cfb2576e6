/*
 * dbgtrace: the trace function and the uncaught-exception stop.  See
 * dbgtrace.h.  No state of its own: the filters are dbghooks.c's.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"
#include <frameobject.h>

#include <stdlib.h>
#include <string.h>

#include "breakpoints.h"
#include "cpython/cpython.h"
#include "dbgcleanup.h"
#include "dbgevents.h"
#include "dbghooks.h"
#include "dbgstep.h"
#include "dbgstop.h"
#include "dbgtrace.h"
#include "debugger.h"
#include "python/pygil.h"
#include "python/pyrepr.h"

/* ---- events ----------------------------------------------------------- */

static void report_hit(struct bp_hit *hit, PyFrameObject *f, int line)
{
	PyCodeObject *co;
	char *path;

	if (!hit->log && !hit->error && !hit->newly_verified)
		return;
	co = PyFrame_GetCode(f);
	path = pyrepr_utf8_dup(co->co_filename);
	Py_DECREF(co);
	if (hit->log)
		dbgevents_output("console", hit->log, path, line);
	if (hit->error)
		dbgevents_output("stderr", hit->error, path, line);
	free(path);
}

static int on_line(PyThreadState *ts, PyFrameObject *f)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	int wanted = cpython.trace.code_wanted((PyObject *)co),
	    mode = cpython.trace.mode(ts);
	struct bp_hit hit = {0};
	const char *reason = NULL;
	unsigned ep;
	int line, cmd;

	Py_DECREF(co);
	if (!wanted && !mode && !dbgstep_active(ts)) {
		/* A frame traced for nothing (an exception event switched
		 * tracing on for the rest of it).  With raised-exception
		 * breakpoints the trace function must stay, so the frame stays
		 * traced until it returns; else switch it all off. */
		if (!dbghooks_raised())
			cpython.trace.retrace(ts);
		return 0;
	}
	line = PyFrame_GetLineNumber(f);
	if (wanted)
		breakpoints_line_hit(f, line, &hit);
	report_hit(&hit, f, line);
	if (hit.newly_verified) {
		int ids[BREAKPOINTS_LOADED_MAX], lines[BREAKPOINTS_LOADED_MAX];
		PyCodeObject *c2 = PyFrame_GetCode(f);
		int k = breakpoints_file_loaded(c2->co_filename, ids, lines,
						BREAKPOINTS_LOADED_MAX);
		Py_DECREF(c2);
		dbgevents_verified(ids, lines, k);
	}
	if (hit.stop)
		reason = "breakpoint";
	else if (dbgstep_done(ts, f))
		reason = "step";
	else if (mode && debugger_pause_wanted())
		reason = "pause";
	if (!reason) {
		breakpoints_hit_release(&hit);
		if (mode && !debugger_pause_wanted() && !dbgstep_active(ts)) {
			/* A pause that was cancelled: stop tracing. */
			cpython.trace.set_mode(NULL, 0);
			cpython.trace.retrace(ts);
		}
		return 0;
	}
	cmd = dbgstop_here(ts, f, NULL, reason, hit.ids, hit.nids, hit.error,
			   NULL, NULL, &ep);
	breakpoints_hit_release(&hit);
	dbgstop_resumed(ts, f, cmd, ep);
	return 0;
}

static int on_call(PyThreadState *ts, PyFrameObject *f)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	int wanted = cpython.trace.code_wanted((PyObject *)co), cmd;
	struct bp_hit hit;

	Py_DECREF(co);
	if (!wanted || !cpython.frame.starting(f))
		return 0;
	breakpoints_function_hit(f, &hit);
	report_hit(&hit, f, PyFrame_GetLineNumber(f));
	if (hit.stop) {
		unsigned ep;

		cmd = dbgstop_here(ts, f, NULL, "function breakpoint", hit.ids,
				   hit.nids, hit.error, NULL, NULL, &ep);
		dbgstop_resumed(ts, f, cmd, ep);
	}
	breakpoints_hit_release(&hit);
	return 0;
}

/* "Type: message" of an exception value (malloc'd). */
static char *exc_text(PyObject *value)
{
	PyObject *s = PyObject_Str(value);
	const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
	const char *tn = _PyType_Name(Py_TYPE(value));
	size_t n;
	char *out;

	if (!m)
		PyErr_Clear();
	n = strlen(tn) + (m ? strlen(m) : 0) + 3;
	if (n > DEBUGGER_TEXT_MAX)
		n = DEBUGGER_TEXT_MAX;
	out = malloc(n);
	if (out)
		snprintf(out, n, "%s%s%s", tn, m && *m ? ": " : "", m ? m : "");
	Py_XDECREF(s);
	return out;
}

static int on_exception(PyThreadState *ts, PyFrameObject *f, PyObject *arg)
{
	PyObject *type, *value, *tb, *cur;
	unsigned ep;
	char *text;
	int cmd;

	if (!dbghooks_raised() || !PyTuple_Check(arg) ||
	    PyTuple_GET_SIZE(arg) != 3)
		return 0;
	type = PyTuple_GET_ITEM(arg, 0);
	value = PyTuple_GET_ITEM(arg, 1);
	tb = PyTuple_GET_ITEM(arg, 2);
	/* Only where it is raised (the traceback has this frame alone),
	 * and not the exceptions that end loops and generators. */
	if (!PyTraceBack_Check(tb) || ((PyTracebackObject *)tb)->tb_next ||
	    PyErr_GivenExceptionMatches(type, PyExc_StopIteration) ||
	    PyErr_GivenExceptionMatches(type, PyExc_StopAsyncIteration) ||
	    PyErr_GivenExceptionMatches(type, PyExc_GeneratorExit) ||
	    !PyExceptionInstance_Check(value))
		return 0;
	/* Since 3.11 the traceback is attached to the value later, when it is
	 * caught; exceptionInfo wants it now (the same object it will get). */
	cur = PyException_GetTraceback(value);
	if (!cur)
		PyException_SetTraceback(value, tb);
	Py_XDECREF(cur);
	PyErr_Clear();
	text = exc_text(value);
	cmd = dbgstop_here(ts, f, NULL, "exception", NULL, 0, text, value,
			   "always", &ep);
	free(text);
	dbgstop_resumed(ts, f, cmd, ep);
	return 0;
}

/*
 * The common line event, made cheap: a line without a breakpoint in a
 * frame traced for one elsewhere in it (up to 3.11 every line of such a
 * frame comes here), on a thread that neither steps nor pauses.  1 when
 * there is nothing to do; no Python code, no exception touched.
 */
static int line_passes(PyThreadState *ts, PyFrameObject *f)
{
	PyCodeObject *co;
	int pass;

	if (cpython.trace.mode(ts) || dbgstep_active(ts))
		return 0;
	co = PyFrame_GetCode(f);
	pass = cpython.trace.code_wanted((PyObject *)co) &&
	       !breakpoints_line_wanted((PyObject *)co,
					PyFrame_GetLineNumber(f));
	Py_DECREF(co);
	return pass;
}

/* The trace function of every traced thread. */
int dbgtrace_function(PyObject *obj, PyFrameObject *f, int what, PyObject *arg)
{
	PyThreadState *ts = PyThreadState_Get();
	PyObject *et, *ev, *etb;
	int rc = 0;

	(void)obj;
	if (!debugger_active()) {
		dbgcleanup_now();
		cpython.trace.retrace(ts);
		return 0;
	}
	if (pygil_is_gil_thread()) {
		/* The agent's own evaluations never stop. */
		cpython.trace.forget(ts);
		return 0;
	}
	if (dbgstop_busy())
		return 0; /* Python code run by a stop being made */
	if (what == PyTrace_LINE && line_passes(ts, f))
		return 0;
	PyErr_Fetch(&et, &ev, &etb);
	switch (what) {
	case PyTrace_LINE:
		rc = on_line(ts, f);
		break;
	case PyTrace_CALL:
		rc = on_call(ts, f);
		break;
	case PyTrace_EXCEPTION:
		rc = on_exception(ts, f, arg);
		break;
	default:
		break;
	}
	PyErr_Restore(et, ev, etb);
	return rc;
}

/* ---- uncaught exceptions: sys.excepthook / threading.excepthook ------ */

void dbgtrace_uncaught(PyObject *value, PyObject *tb)
{
	PyThreadState *ts = PyThreadState_Get();
	unsigned ep;
	char *text;
	int cmd;

	if (!debugger_active() || !dbghooks_uncaught() ||
	    pygil_is_gil_thread() || !PyTraceBack_Check(tb) ||
	    !PyExceptionInstance_Check(value) ||
	    PyErr_GivenExceptionMatches(value, PyExc_SystemExit))
		return;
	text = exc_text(value);
	cmd = dbgstop_here(ts, NULL, tb, "exception", NULL, 0, text, value,
			   "unhandled", &ep);
	free(text);
	/* No stepping from here: the thread is ending. */
	dbgstop_resumed(ts, NULL, cmd ? DEBUGGER_CONTINUE : 0, ep);
}
