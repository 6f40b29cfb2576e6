/*
 * pyhook: cpython.trace up to 3.11: the frame-evaluation hook and tracing
 * switches.  See pytrace.h.
 *
 * CPython facts this relies on (Python/ceval.c):
 *  - 3.10 and 3.11: _PyEval_EvalFrameDefault() copies use_tracing from
 *    the caller's C frame (tstate->cframe) into its own on entry; the
 *    dispatch loop reads its own at every instruction, so setting it on a
 *    running evaluation takes effect at its next instruction.  Line events
 *    go to tstate->c_tracefunc only where use_tracing is set; exception
 *    events go to it wherever it is set.  After every trace call CPython
 *    sets the current C frame's use_tracing to "is there a trace or
 *    profile function", so the trace function decides whether the frame
 *    it was called for stays traced by leaving c_tracefunc set.
 *  - 3.9 has no C frames: every instruction of every frame of a thread
 *    whose c_tracefunc is set goes through the line check (interp
 *    ceval.tracing_possible counts those threads), and a frame's
 *    f_trace_lines says whether its lines are sent.  So c_tracefunc is
 *    set only while a frame under it needs it, and f_trace_lines is the
 *    per-frame switch.
 *  - With interp->eval_frame set, every Python frame starts in it (no
 *    inlined calls), generator resumptions included.  Up to 3.10 each
 *    frame runs in an evaluation of its own (one C frame per frame
 *    object); from 3.11 an evaluation runs a frame and those it calls
 *    inline... which a hook prevents.
 * State below is guarded by the GIL.
 */
#define Py_BUILD_CORE 1
#include "pycompat.h"

#if PY_VERSION_HEX < 0x03090000 || PY_VERSION_HEX >= 0x030C0000
#error "pyhook.c traces CPython 3.9 to 3.11 (3.12 on: pymonitor.c)"
#endif

#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif
#include "internal/pycore_interp.h"
#include "internal/pycore_pystate.h"

#include <errno.h>

#include "errbuf.h"
#include "pytrace.h"
#include "pytrace_state.h"

/* What the hook is given, and the per-evaluation switch (above). */
#if PY_VERSION_HEX >= 0x030B0000
typedef _PyInterpreterFrame eval_frame;
typedef _PyCFrame cframe_t;
#define TRACING_ON 255
#define HAS_CFRAME 1
#elif PY_VERSION_HEX >= 0x030A0000
typedef PyFrameObject eval_frame;
typedef CFrame cframe_t;
#define TRACING_ON 1
#define HAS_CFRAME 1
#else
typedef PyFrameObject eval_frame;
#define HAS_CFRAME 0
#endif

#define WALK_MAX 1000000 /* frames looked at in one walk */

/* Mirrors _PyCodeObjectExtra (Objects/codeobject.c, 3.9 to 3.11), so the fast
 * path reads the slot without a call. */
typedef struct {
	Py_ssize_t ce_size;
	void *ce_extras[1];
} code_extra;

static _PyFrameEvalFunction prev_eval;

static inline uintptr_t code_tag(PyCodeObject *co)
{
	code_extra *ex = co->co_extra;
	Py_ssize_t i = pytrace_state_extra;

	if (ex && i >= 0 && i < ex->ce_size)
		return (uintptr_t)ex->ce_extras[i];
	return 0;
}

/* pytrace_state_wanted() without a call when the cached class is fresh. */
static int wanted(PyCodeObject *co)
{
	uintptr_t t = code_tag(co);

	if ((t >> 1) == pytrace_state_gen)
		return (int)(t & 1);
	return pytrace_state_wanted(co);
}

int pytrace_code_wanted(PyObject *code)
{
	if (!code || !PyCode_Check(code))
		return 0;
	return wanted((PyCodeObject *)code);
}

int pytrace_mode(PyThreadState *ts)
{
	return pytrace_state_mode(ts);
}

int pytrace_set_mode(PyThreadState *ts, int mode)
{
	return pytrace_state_set_mode(ts, mode);
}

/* Do we own this thread's trace function (or may take it)? */
static inline int trace_managed(PyThreadState *ts)
{
	return ts->c_tracefunc == NULL ||
	       ts->c_tracefunc == (Py_tracefunc)pytrace_state_trace();
}

/* Sets or removes our trace function on ts (never someone else's). */
static inline void set_trace(PyThreadState *ts, int on)
{
	Py_tracefunc ours = (Py_tracefunc)pytrace_state_trace();

	if (on && ts->c_tracefunc == NULL && ours) {
		ts->c_traceobj = NULL;
		ts->c_tracefunc = ours;
#if !HAS_CFRAME
		ts->interp->ceval.tracing_possible++;
		ts->use_tracing = 1;
#endif
	} else if (!on && ours && ts->c_tracefunc == ours) {
		ts->c_tracefunc = NULL;
#if !HAS_CFRAME
		ts->interp->ceval.tracing_possible--;
		ts->use_tracing = ts->c_profilefunc != NULL;
#endif
	}
}

static inline PyCodeObject *code_of(eval_frame *f)
{
	return f->f_code;
}

#if PY_VERSION_HEX >= 0x030B0000
/* Does an evaluation (a C frame) run a frame of a wanted code object? */
static int cframe_wants(cframe_t *cf)
{
	_PyInterpreterFrame *f = cf->current_frame;

	for (int n = 0; f && n < WALK_MAX; n++, f = f->previous) {
		if (f->f_code && wanted(f->f_code))
			return 1;
		if (f->is_entry)
			break;
	}
	return 0;
}
#endif

/* Does the evaluation that control returned to want tracing?  Its frame
 * is the thread's innermost now (up to 3.10 the only one it runs). */
static int caller_wants(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030B0000
	return cframe_wants(ts->cframe);
#else
	return ts->frame && wanted(ts->frame->f_code);
#endif
}

static inline PyObject *call_prev(PyThreadState *ts, eval_frame *f,
				  int throwflag)
{
	if (prev_eval)
		return prev_eval(ts, f, throwflag);
	return _PyEval_EvalFrameDefault(ts, f, throwflag);
}

static PyObject *eval_hook(PyThreadState *ts, eval_frame *f, int throwflag);

static void uninstall(void)
{
	PyInterpreterState *interp = PyInterpreterState_Main();

	/* Up to 3.10 the default must be named (NULL would be called). */
	if (_PyInterpreterState_GetEvalFrameFunc(interp) == eval_hook)
		_PyInterpreterState_SetEvalFrameFunc(
			interp,
			prev_eval ? prev_eval : _PyEval_EvalFrameDefault);
}

/* Switches line events of the evaluation about to start (want) and, after
 * it, of the one control returns to (cwant). */
#if HAS_CFRAME
static inline void switch_lines(PyThreadState *ts, eval_frame *f, int on)
{
	(void)f;
	/* Only when no profiler's function needs the C frame's flag. */
	if (ts->c_profilefunc == NULL)
		ts->cframe->use_tracing = on ? TRACING_ON : 0;
}
#else
static inline void switch_lines(PyThreadState *ts, eval_frame *f, int on)
{
	(void)ts;
	if (f)
		f->f_trace_lines = (char)(on != 0);
}
#endif

/* Everything but the common case: a frame that must be traced, one
 * started by a traced frame, a thread with a mode, a stale class. */
static PyObject *eval_slow(PyThreadState *ts, eval_frame *f, int throwflag)
{
	Py_tracefunc saved_fn;
	PyObject *res, *et, *ev, *etb;
	int want, cwant, kept;

	if (!pytrace_state_enabled()) {
		uninstall();
		return call_prev(ts, f, throwflag);
	}
	if (ts->tracing || !trace_managed(ts)) {
		/* Inside a trace call (events are off), or someone else's
		 * tracer: hands off. */
		return call_prev(ts, f, throwflag);
	}
	want = wanted(code_of(f)) ||
	       (pytrace_state_mode(ts) & CPYTHON_TRACE_NEW);
	saved_fn = ts->c_tracefunc;
	/* Never take away a trace function that was there before the
	 * call: an older evaluation further out may need it. */
	kept = saved_fn == (Py_tracefunc)pytrace_state_trace();
	set_trace(ts,
		  want || pytrace_state_exc_events() || (!HAS_CFRAME && kept));
	switch_lines(ts, f, want);
	res = call_prev(ts, f, throwflag);
	/* Back in the caller: ts->cframe (ts->frame) is the caller's
	 * again. */
	if (!pytrace_state_enabled() || ts->tracing || !trace_managed(ts)) {
		if (!pytrace_state_enabled()) {
			set_trace(ts, 0);
			if (HAS_CFRAME)
				switch_lines(ts, NULL, 0);
		}
		return res;
	}
	PyErr_Fetch(&et, &ev, &etb);
	cwant = (pytrace_state_mode(ts) & CPYTHON_TRACE_CALLERS) ||
		caller_wants(ts);
	PyErr_Restore(et, ev, etb);
	set_trace(ts, cwant || pytrace_state_exc_events() || kept);
#if HAS_CFRAME
	switch_lines(ts, NULL, cwant);
#else
	if (cwant)
		switch_lines(ts, ts->frame, 1);
#endif
	return res;
}

/* Is the evaluation running now traced? */
static inline int traced_now(PyThreadState *ts)
{
#if HAS_CFRAME
	return ts->cframe->use_tracing;
#else
	return ts->use_tracing;
#endif
}

static PyObject *eval_hook(PyThreadState *ts, eval_frame *f, int throwflag)
{
	/* The common case costs three loads and compares. */
	if (code_tag(code_of(f)) == pytrace_state_gen << 1 && !traced_now(ts) &&
	    !pytrace_state_modes_any)
		return call_prev(ts, f, throwflag);
	return eval_slow(ts, f, throwflag);
}

void pytrace_init(cpython_classify_fn classify, cpython_trace_fn trace,
		  cpython_line_fn line)
{
	pytrace_state_init(classify, trace, line);
}

int pytrace_enable(char *err, size_t errlen)
{
	PyInterpreterState *interp = PyInterpreterState_Main();
	_PyFrameEvalFunction cur;

	if (pytrace_state_slot() < 0) {
		errbuf_set(err, errlen,
			   "CPython has no code-object slot left for the "
			   "debugger (co_extra)");
		return -ENOSPC;
	}
	pytrace_state_invalidate();
	pytrace_state_set_enabled(1);
	cur = _PyInterpreterState_GetEvalFrameFunc(interp);
	if (cur != eval_hook) {
		prev_eval = cur == _PyEval_EvalFrameDefault ? NULL : cur;
		_PyInterpreterState_SetEvalFrameFunc(interp, eval_hook);
	}
	return 0;
}

int pytrace_enabled(void)
{
	return pytrace_state_enabled();
}

static void retrace_one(PyThreadState *ts)
{
	int on = pytrace_state_enabled();
	int m = on ? pytrace_state_mode(ts) : 0, any = 0, n = 0;

	if (!trace_managed(ts) || !cpython.frame.thread_complete(ts))
		return;
#if PY_VERSION_HEX >= 0x030B0000
	for (cframe_t *cf = ts->cframe; cf && n < WALK_MAX;
	     cf = cf->previous, n++) {
		int w = on && (m || cframe_wants(cf));

		if (ts->c_profilefunc == NULL)
			cf->use_tracing = w ? TRACING_ON : 0;
		any |= w;
	}
#elif HAS_CFRAME
	/* One C frame per running frame object, innermost first; the last
	 * C frame (the thread's root) runs none. */
	cframe_t *cf = ts->cframe;

	for (PyFrameObject *f = ts->frame; f && cf && n < WALK_MAX;
	     f = f->f_back, cf = cf->previous, n++) {
		int w = on && (m || wanted(f->f_code));

		if (ts->c_profilefunc == NULL)
			cf->use_tracing = w ? TRACING_ON : 0;
		any |= w;
	}
#else
	for (PyFrameObject *f = ts->frame; f && n < WALK_MAX;
	     f = f->f_back, n++) {
		int w = on && (m || wanted(f->f_code));

		f->f_trace_lines = (char)w;
		any |= w;
	}
#endif
	set_trace(ts, on && (any || pytrace_state_exc_events()));
}

void pytrace_retrace(PyThreadState *ts)
{
	int gc;

	if (!ts)
		return;
	/* Classifying may allocate; a collection could run finalizers
	 * (Python code, which may let other threads run). */
	gc = PyGC_Disable();
	retrace_one(ts);
	if (gc)
		PyGC_Enable();
}

void pytrace_retrace_all(int (*skip)(long native_id))
{
	PyInterpreterState *interp = PyInterpreterState_Main();
	int gc = PyGC_Disable(), n = 0;

	for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
	     ts && n < WALK_MAX; ts = PyThreadState_Next(ts), n++) {
		if (skip && skip((long)cpython.frame.native_id(ts))) {
			/* The agent's own threads never trace. */
			pytrace_forget(ts);
			continue;
		}
		retrace_one(ts);
	}
	if (gc)
		PyGC_Enable();
}

void pytrace_disable(void)
{
	if (!pytrace_state_enabled() && pytrace_state_extra < 0)
		return;
	pytrace_state_reset();
	uninstall();
	pytrace_retrace_all(NULL);
}

void pytrace_invalidate(void)
{
	pytrace_state_invalidate();
}

void pytrace_set_exception_events(int on)
{
	pytrace_state_set_exc_events(on);
}

void pytrace_forget(PyThreadState *ts)
{
	set_trace(ts, 0);
}

void pytrace_atfork_child(void)
{
	/* The hook stays in the interpreter until its next call, which
	 * finds it disabled and removes it. */
	pytrace_state_reset();
}
