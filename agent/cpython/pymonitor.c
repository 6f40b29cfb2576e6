/*
 * pymonitor: cpython.trace from 3.12, through sys.monitoring (PEP 669).
 * See pytrace.h.
 *
 * The debugger is one tool of sys.monitoring, with a tool id of its own:
 * DEBUGGER_ID (0) when free, else another free one (3, 4, then the ids
 * other tools conventionally take, 1, 2, 5); none free is an error that
 * names the tools holding them.  Another tool (coverage, a profiler, pdb)
 * is never touched: its id, events and callbacks stay as they are.
 *
 * Events are asked for only where they are needed, and turned off with
 * DISABLE where they are not, so that code without breakpoints runs at
 * full speed:
 *
 *  - PY_START and PY_RESUME (a coroutine or generator going on),
 *    globally while tracing is on: a code object seen for the first time
 *    in this generation is classified (pytrace_state); one that is not
 *    wanted answers DISABLE (that code's starts cost nothing more), one
 *    that is gets LINE events of its own (set_local_events);
 *  - LINE, for wanted code objects: a line with a breakpoint goes to the
 *    debugger's trace function (PyTrace_LINE); any other answers DISABLE
 *    — so a breakpoint on a line never reached costs nothing on the
 *    lines around it once each ran;
 *  - LINE globally while a thread has a mode (stepping, pause): every
 *    line of every thread comes, and those of the threads with a mode go
 *    to the trace function;
 *  - RAISE while exception events are wanted (PyTrace_EXCEPTION, with the
 *    (type, value, traceback) tuple the trace function expects).
 *
 * A change of breakpoints (invalidate) removes the local events, starts a
 * generation and calls restart_events(), which undoes every DISABLE —
 * also those of other tools, which are asked again once (sys.monitoring
 * has no per-tool restart before 3.14).  Frames already running get their
 * code's events from retrace().  Events are per interpreter, not per
 * thread: the agent's own threads are told apart by the trace function.
 *
 * Every function runs with the GIL held; the state is guarded by it.
 * Callbacks run with monitoring off on their thread (no events from
 * within them).
 */
#include "pycompat.h"
#include <frameobject.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errbuf.h"
#include "pytrace.h"
#include "pytrace_state.h"

#if PY_VERSION_HEX < 0x030C0000
#error "pymonitor.c needs sys.monitoring (CPython 3.12 on)"
#endif

#define TOOL_NAME "probing"
#define TRACKED_MAX 4096 /* code objects with local events */
#define WALK_MAX 1000000 /* frames looked at in one walk */

/* sys.monitoring.events: bits of the events' numbers in the headers of
 * the version built for (3.14 moved RAISE: BRANCH_LEFT/RIGHT came
 * before it). */
#if PY_VERSION_HEX < 0x030D0000
/* 3.12: the numbers are in an internal header only. */
#define PY_MONITORING_EVENT_PY_START 0
#define PY_MONITORING_EVENT_PY_RESUME 1
#define PY_MONITORING_EVENT_LINE 5
#define PY_MONITORING_EVENT_RAISE 10
#endif
#define EV_PY_START (1 << PY_MONITORING_EVENT_PY_START)
#define EV_PY_RESUME (1 << PY_MONITORING_EVENT_PY_RESUME)
#define EV_LINE (1 << PY_MONITORING_EVENT_LINE)
#define EV_RAISE (1 << PY_MONITORING_EVENT_RAISE)

static const int tool_order[] = {0, 3, 4, 1, 2, 5};

static PyObject *mon;	      /* sys.monitoring while a tool id is ours */
static PyObject *disable_obj; /* sys.monitoring.DISABLE */
static int tool = -1;
static int global_events;
/* Code objects given LINE events, strong references. */
static PyObject *tracked[TRACKED_MAX];
static int ntracked;

/* ---- sys.monitoring's functions ----------------------------------- */

/* mon.name(args...): 0, or -1 with the exception cleared. */
static int call(const char *name, const char *fmt, ...)
{
	PyObject *fn, *args, *r = NULL;
	va_list ap;

	if (!mon)
		return -1;
	fn = PyObject_GetAttrString(mon, name);
	va_start(ap, fmt);
	args = fn ? Py_VaBuildValue(fmt, ap) : NULL;
	va_end(ap);
	if (args && !PyTuple_Check(args)) {
		PyObject *t = PyTuple_Pack(1, args);

		Py_DECREF(args);
		args = t;
	}
	if (args)
		r = PyObject_Call(fn, args, NULL);
	Py_XDECREF(args);
	Py_XDECREF(fn);
	if (!r) {
		PyErr_Clear();
		return -1;
	}
	Py_DECREF(r);
	return 0;
}

static void set_events(int events)
{
	if (tool < 0 || events == global_events)
		return;
	call("set_events", "(ii)", tool, events);
	/* Lines disabled while no thread had a mode must come again. */
	if ((events & EV_LINE) && !(global_events & EV_LINE))
		call("restart_events", "()");
	global_events = events;
}

/* The global events the state asks for now. */
static void update_events(void)
{
	int ev = 0;

	if (pytrace_state_enabled()) {
		ev = EV_PY_START | EV_PY_RESUME;
		if (pytrace_state_modes_any)
			ev |= EV_LINE;
		if (pytrace_state_exc_events())
			ev |= EV_RAISE;
	}
	set_events(ev);
}

/* code gets LINE events of its own (once). */
static void track(PyObject *code)
{
	for (int i = 0; i < ntracked; i++)
		if (tracked[i] == code)
			return;
	if (ntracked == TRACKED_MAX)
		return; /* its lines come only while stepping */
	if (call("set_local_events", "(iOi)", tool, code, EV_LINE) == 0)
		tracked[ntracked++] = Py_NewRef(code);
}

static void untrack_all(void)
{
	PyObject *et, *ev, *etb;

	PyErr_Fetch(&et, &ev, &etb);
	for (int i = 0; i < ntracked; i++) {
		call("set_local_events", "(iOi)", tool, tracked[i], 0);
		Py_CLEAR(tracked[i]);
	}
	ntracked = 0;
	PyErr_Restore(et, ev, etb);
}

/* ---- the callbacks ------------------------------------------------ */

static PyObject *answer(int disable)
{
	return Py_NewRef(disable ? disable_obj : Py_None);
}

/* The frame an event is for: the calling thread's innermost. */
static void send(int what, PyObject *arg)
{
	cpython_trace_fn trace = pytrace_state_trace();
	PyFrameObject *f = PyEval_GetFrame(); /* borrowed */

	if (trace && f)
		trace(NULL, f, what, arg);
	PyErr_Clear();
}

/* A code object starting or going on: tracked when wanted.  1 when it
 * is, 0 when not, -1 when tracing is off (or no code). */
static int classify(PyObject *const *args, Py_ssize_t n)
{
	PyObject *code = n > 0 ? args[0] : NULL;
	int w;

	if (!pytrace_state_enabled() || !code || !PyCode_Check(code))
		return -1;
	w = pytrace_state_wanted((PyCodeObject *)code);
	if (w)
		track(code);
	return w != 0;
}

static PyObject *on_start(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	int w = classify(args, n);

	(void)self;
	if (w > 0)
		send(PyTrace_CALL, Py_None); /* function breakpoints */
	return answer(w < 0 || (!w && !pytrace_state_modes_any));
}

/* A coroutine or generator goes on (no PY_START then): a breakpoint in
 * a task's `while True` loop, which started before the breakpoint was
 * set and is suspended in no thread's stack, has its code's lines from
 * its next resumption.  No call for function breakpoints: it is not
 * entered.  Answered DISABLE in every case. */
static PyObject *on_resume(PyObject *self, PyObject *const *args,
			   Py_ssize_t n)
{
	(void)self;
	/* Tracked, the code has its LINE events of its own: this place's
	 * resumptions are not needed again (until the next generation). */
	classify(args, n);
	return answer(1);
}

static PyObject *on_line(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	PyObject *code = n > 1 ? args[0] : NULL;
	long line =
		n > 1 && PyLong_Check(args[1]) ? PyLong_AsLong(args[1]) : -1;
	int stop;

	(void)self;
	if (line == -1)
		PyErr_Clear();
	if (!pytrace_state_enabled() || !code || !PyCode_Check(code))
		return answer(1);
	stop = pytrace_state_mode(PyThreadState_Get()) ||
	       (pytrace_state_wanted((PyCodeObject *)code) &&
		pytrace_state_line_wanted(code, (int)line));
	if (!stop)
		return answer(!pytrace_state_modes_any);
	send(PyTrace_LINE, Py_None);
	return answer(0);
}

static PyObject *on_raise(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	PyObject *exc = n > 2 ? args[2] : NULL, *tb, *arg;

	(void)self;
	if (!pytrace_state_enabled() || !pytrace_state_exc_events() || !exc ||
	    !PyExceptionInstance_Check(exc))
		Py_RETURN_NONE;
	tb = PyException_GetTraceback(exc);
	arg = PyTuple_Pack(3, (PyObject *)Py_TYPE(exc), exc, tb ? tb : Py_None);
	Py_XDECREF(tb);
	if (arg)
		send(PyTrace_EXCEPTION, arg);
	Py_XDECREF(arg);
	PyErr_Clear();
	Py_RETURN_NONE;
}

static PyMethodDef callbacks[] = {
	{"probing_py_start", (PyCFunction)(void (*)(void))on_start,
	 METH_FASTCALL, NULL},
	{"probing_py_resume", (PyCFunction)(void (*)(void))on_resume,
	 METH_FASTCALL, NULL},
	{"probing_line", (PyCFunction)(void (*)(void))on_line, METH_FASTCALL,
	 NULL},
	{"probing_raise", (PyCFunction)(void (*)(void))on_raise, METH_FASTCALL,
	 NULL},
};
static const int callback_events[] = {EV_PY_START, EV_PY_RESUME, EV_LINE,
				       EV_RAISE};
#define NCALLBACKS (int)(sizeof(callbacks) / sizeof(callbacks[0]))

/* ---- the tool id -------------------------------------------------- */

/* "0 (debugpy), 1 (coverage)...": who holds the ids, for the error. */
static void holders(char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (int id = 0; id < 6 && used < outlen; id++) {
		PyObject *name = PyObject_CallMethod(mon, "get_tool", "i", id);
		const char *s = name && PyUnicode_Check(name)
					? PyUnicode_AsUTF8(name)
					: NULL;
		int k = snprintf(out + used, outlen - used, "%s%d (%s)",
				 id ? ", " : "", id, s ? s : "?");

		Py_XDECREF(name);
		PyErr_Clear();
		if (k < 0)
			break;
		used += (size_t)k;
	}
}

static int take_tool(char *err, size_t errlen)
{
	PyObject *m = PySys_GetObject("monitoring"); /* borrowed */
	char who[256];

	if (!m) {
		PyErr_Clear();
		errbuf_set(err, errlen, "sys.monitoring is missing");
		return -ENOSYS;
	}
	mon = Py_NewRef(m);
	disable_obj = PyObject_GetAttrString(mon, "DISABLE");
	if (!disable_obj) {
		PyErr_Clear();
		Py_CLEAR(mon);
		errbuf_set(err, errlen, "sys.monitoring.DISABLE is missing");
		return -ENOSYS;
	}
	for (size_t i = 0; i < sizeof(tool_order) / sizeof(tool_order[0]);
	     i++) {
		PyObject *name = PyObject_CallMethod(mon, "get_tool", "i",
						     tool_order[i]);
		int is_free = name == Py_None;

		Py_XDECREF(name);
		PyErr_Clear();
		if (is_free && call("use_tool_id", "(is)", tool_order[i],
				    TOOL_NAME) == 0) {
			tool = tool_order[i];
			break;
		}
	}
	if (tool < 0) {
		holders(who, sizeof(who));
		errbuf_set(err, errlen,
			   "sys.monitoring has no free tool id (held: %s)",
			   who);
		Py_CLEAR(disable_obj);
		Py_CLEAR(mon);
		return -EBUSY;
	}
	for (int i = 0; i < NCALLBACKS; i++) {
		PyObject *fn = PyCFunction_New(&callbacks[i], NULL);

		if (!fn || call("register_callback", "(iiO)", tool,
				callback_events[i], fn) < 0)
			PyErr_Clear();
		Py_XDECREF(fn);
	}
	global_events = 0;
	return 0;
}

static void give_tool(void)
{
	if (tool < 0)
		return;
	set_events(0);
	untrack_all();
	for (int i = 0; i < NCALLBACKS; i++)
		call("register_callback", "(iiO)", tool, callback_events[i],
		     Py_None);
	call("free_tool_id", "(i)", tool);
	tool = -1;
	Py_CLEAR(disable_obj);
	Py_CLEAR(mon);
}

/* ---- cpython.trace ------------------------------------------------ */

void pytrace_init(cpython_classify_fn classify, cpython_trace_fn trace,
		  cpython_line_fn line)
{
	pytrace_state_init(classify, trace, line);
}

int pytrace_enable(char *err, size_t errlen)
{
	int rc;

	if (pytrace_state_slot() < 0) {
		errbuf_set(err, errlen,
			   "CPython has no code-object slot left for the "
			   "debugger (co_extra)");
		return -ENOSPC;
	}
	if (tool < 0 && (rc = take_tool(err, errlen)) < 0)
		return rc;
	if (!pytrace_state_enabled())
		pytrace_state_invalidate();
	pytrace_state_set_enabled(1);
	update_events();
	return 0;
}

int pytrace_enabled(void)
{
	return pytrace_state_enabled();
}

void pytrace_disable(void)
{
	pytrace_state_reset();
	give_tool();
}

void pytrace_invalidate(void)
{
	pytrace_state_invalidate();
	if (tool < 0)
		return;
	untrack_all();
	call("restart_events", "()");
}

void pytrace_set_exception_events(int on)
{
	pytrace_state_set_exc_events(on);
	update_events();
}

int pytrace_set_mode(PyThreadState *ts, int mode)
{
	int rc = pytrace_state_set_mode(ts, mode);

	update_events();
	return rc;
}

int pytrace_mode(PyThreadState *ts)
{
	return pytrace_state_mode(ts);
}

void pytrace_retrace(PyThreadState *ts)
{
	PyFrameObject *f;
	int gc, n = 0;

	if (!ts || tool < 0 || !pytrace_state_enabled())
		return;
	/* Classifying may allocate; a collection could run finalizers
	 * (Python code, which may let other threads run). */
	gc = PyGC_Disable();
	f = cpython.frame.thread_frame(ts);
	while (f && n++ < WALK_MAX) {
		PyCodeObject *co = PyFrame_GetCode(f);
		PyFrameObject *back = PyFrame_GetBack(f);

		if (pytrace_state_wanted(co))
			track((PyObject *)co);
		Py_DECREF(co);
		Py_DECREF(f);
		f = back;
	}
	Py_XDECREF(f);
	if (gc)
		PyGC_Enable();
}

void pytrace_retrace_all(int (*skip)(long native_id))
{
	PyInterpreterState *interp = PyInterpreterState_Main();
	int n = 0;

	for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
	     ts && n < WALK_MAX; ts = PyThreadState_Next(ts), n++)
		if (!skip || !skip((long)ts->native_thread_id))
			pytrace_retrace(ts);
}

int pytrace_code_wanted(PyObject *code)
{
	if (!code || !PyCode_Check(code))
		return 0;
	return pytrace_state_wanted((PyCodeObject *)code);
}

void pytrace_forget(PyThreadState *ts)
{
	/* Events are the interpreter's: the trace function ignores this
	 * thread's. */
	(void)ts;
}

void pytrace_atfork_child(void)
{
	/* The tool stays registered in the child's interpreter; its
	 * callbacks find tracing off and answer DISABLE. */
	pytrace_state_reset();
}
