/*
 * pyhook: the frame-evaluation hook and tracing switches.  See pyhook.h.
 *
 * CPython 3.11 facts this relies on (Python/ceval.c):
 *  - _PyEval_EvalFrameDefault() copies use_tracing from the caller's
 *    _PyCFrame (tstate->cframe) into its own on entry; the dispatch loop
 *    reads its own at every instruction, so setting it on a running
 *    evaluation takes effect at its next instruction.
 *  - Line events go to tstate->c_tracefunc only where use_tracing is set;
 *    exception events go to it wherever it is set.  After every trace call
 *    CPython sets the current _PyCFrame's use_tracing to "is there a trace
 *    or profile function", so the trace function decides whether the
 *    frame it was called for stays traced by leaving c_tracefunc set.
 *  - With interp->eval_frame set, every Python frame starts in it (no
 *    inlined calls), generator resumptions included.
 * State below is guarded by the GIL.
 */
#define Py_BUILD_CORE 1
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "pyhook.c changes CPython 3.11 internals; port it for this version"
#endif

#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_pystate.h"

#include <errno.h>

#include "pyhook.h"

#define WALK_MAX 1000000 /* frames looked at in one walk */

/* Mirrors _PyCodeObjectExtra (Objects/codeobject.c, 3.11), so the fast
 * path reads the slot without a call. */
typedef struct {
	Py_ssize_t ce_size;
	void *ce_extras[1];
} code_extra;

struct thread_mode {
	PyThreadState *ts;
	unsigned long ident; /* ts->thread_id: a reused ts is another thread */
	int mode;
};

static cpython_classify_fn classify_cb;
static cpython_trace_fn trace_cb;
static Py_ssize_t extra_index = -1;
static uintptr_t gen = 1; /* tags are gen << 1 | wanted; 0: none */
static int enabled;
static int exc_events;
static _PyFrameEvalFunction prev_eval;
static int global_mode;
static struct thread_mode modes[PYHOOK_MODES_MAX];
static int nmodes;
static int modes_any; /* global_mode || nmodes */

static inline uintptr_t code_tag(PyCodeObject *co)
{
	code_extra *ex = co->co_extra;

	if (ex && extra_index >= 0 && extra_index < ex->ce_size)
		return (uintptr_t)ex->ce_extras[extra_index];
	return 0;
}

static int wanted(PyCodeObject *co)
{
	uintptr_t t = code_tag(co);
	PyObject *et, *ev, *etb;
	int w;

	if ((t >> 1) == gen)
		return (int)(t & 1);
	if (!enabled || !classify_cb || extra_index < 0)
		return 0;
	/* A frame may start with an exception set (generator.throw()). */
	PyErr_Fetch(&et, &ev, &etb);
	w = classify_cb((PyObject *)co) != 0;
	if (_PyCode_SetExtra((PyObject *)co, extra_index,
			     (void *)((gen << 1) | (uintptr_t)w)) < 0)
		PyErr_Clear();
	PyErr_Restore(et, ev, etb);
	return w;
}

int pyhook_code_wanted(PyObject *code)
{
	if (!code || !PyCode_Check(code))
		return 0;
	return wanted((PyCodeObject *)code);
}

static int mode_of(PyThreadState *ts)
{
	int m = global_mode;

	if (!modes_any)
		return 0;
	for (int i = 0; i < nmodes; i++)
		if (modes[i].ts == ts && modes[i].ident == ts->thread_id)
			m |= modes[i].mode;
	return m;
}

int pyhook_mode(PyThreadState *ts)
{
	return mode_of(ts);
}

int pyhook_set_mode(PyThreadState *ts, int mode)
{
	if (!ts) {
		global_mode = mode;
	} else {
		int i;

		for (i = 0; i < nmodes; i++)
			if (modes[i].ts == ts)
				break;
		if (i == nmodes) {
			if (!mode)
				goto out;
			if (nmodes == PYHOOK_MODES_MAX)
				return -ENOSPC;
			nmodes++;
		}
		if (mode) {
			modes[i].ts = ts;
			modes[i].ident = ts->thread_id;
			modes[i].mode = mode;
		} else {
			modes[i] = modes[--nmodes];
		}
	}
out:
	modes_any = global_mode || nmodes;
	return 0;
}

/* Do we own this thread's trace function (or may take it)? */
static inline int trace_managed(PyThreadState *ts)
{
	return ts->c_tracefunc == NULL ||
	       ts->c_tracefunc == (Py_tracefunc)trace_cb;
}

static inline void set_trace(PyThreadState *ts, int on)
{
	if (on && ts->c_tracefunc == NULL && trace_cb) {
		ts->c_traceobj = NULL;
		ts->c_tracefunc = (Py_tracefunc)trace_cb;
	} else if (!on && ts->c_tracefunc == (Py_tracefunc)trace_cb) {
		ts->c_tracefunc = NULL;
	}
}

/* Does an evaluation (a _PyCFrame) run a frame of a wanted code object? */
static int cframe_wants(_PyCFrame *cf)
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

static inline PyObject *call_prev(PyThreadState *ts, _PyInterpreterFrame *f,
				  int throwflag)
{
	if (prev_eval)
		return prev_eval(ts, f, throwflag);
	return _PyEval_EvalFrameDefault(ts, f, throwflag);
}

static PyObject *eval_hook(PyThreadState *ts, _PyInterpreterFrame *f,
			   int throwflag);

static void uninstall(void)
{
	PyInterpreterState *interp = PyInterpreterState_Main();

	if (_PyInterpreterState_GetEvalFrameFunc(interp) == eval_hook)
		_PyInterpreterState_SetEvalFrameFunc(interp, prev_eval);
}

/* Everything but the common case: a frame that must be traced, one
 * started by a traced frame, a thread with a mode, a stale class. */
static PyObject *eval_slow(PyThreadState *ts, _PyInterpreterFrame *f,
			   int throwflag)
{
	_PyCFrame *cf = ts->cframe;
	int flags_ours = ts->c_profilefunc == NULL;
	Py_tracefunc saved_fn;
	PyObject *res, *et, *ev, *etb;
	int want, cwant;

	if (!enabled) {
		uninstall();
		return call_prev(ts, f, throwflag);
	}
	if (ts->tracing || !trace_managed(ts)) {
		/* Inside a trace call (events are off), or someone else's
		 * tracer: hands off. */
		return call_prev(ts, f, throwflag);
	}
	want = wanted(f->f_code) || (mode_of(ts) & CPYTHON_TRACE_NEW);
	saved_fn = ts->c_tracefunc;
	set_trace(ts, want || exc_events);
	if (flags_ours)
		cf->use_tracing = want ? 255 : 0;
	res = call_prev(ts, f, throwflag);
	/* Back in the caller: ts->cframe is cf again. */
	if (!enabled || ts->tracing || !trace_managed(ts)) {
		if (!enabled) {
			set_trace(ts, 0);
			if (flags_ours && ts->c_profilefunc == NULL)
				cf->use_tracing = 0;
		}
		return res;
	}
	PyErr_Fetch(&et, &ev, &etb);
	cwant = (mode_of(ts) & CPYTHON_TRACE_CALLERS) || cframe_wants(cf);
	PyErr_Restore(et, ev, etb);
	/* Never take away a trace function that was there before the call:
	 * an older evaluation further out may need it. */
	set_trace(ts,
		  cwant || exc_events || saved_fn == (Py_tracefunc)trace_cb);
	if (flags_ours && ts->c_profilefunc == NULL)
		cf->use_tracing = cwant ? 255 : 0;
	return res;
}

static PyObject *eval_hook(PyThreadState *ts, _PyInterpreterFrame *f,
			   int throwflag)
{
	/* The common case costs three loads and compares. */
	if (code_tag(f->f_code) == gen << 1 && !ts->cframe->use_tracing &&
	    !modes_any)
		return call_prev(ts, f, throwflag);
	return eval_slow(ts, f, throwflag);
}

void pyhook_init(cpython_classify_fn classify, cpython_trace_fn trace)
{
	classify_cb = classify;
	trace_cb = trace;
}

int pyhook_enable(void)
{
	PyInterpreterState *interp = PyInterpreterState_Main();
	_PyFrameEvalFunction cur;

	if (extra_index < 0) {
		extra_index = _PyEval_RequestCodeExtraIndex(NULL);
		if (extra_index < 0) {
			PyErr_Clear();
			return -ENOSPC;
		}
	}
	gen++;
	enabled = 1;
	cur = _PyInterpreterState_GetEvalFrameFunc(interp);
	if (cur != eval_hook) {
		prev_eval = cur == _PyEval_EvalFrameDefault ? NULL : cur;
		_PyInterpreterState_SetEvalFrameFunc(interp, eval_hook);
	}
	return 0;
}

int pyhook_enabled(void)
{
	return enabled;
}

static void retrace_one(PyThreadState *ts)
{
	int flags_ours = ts->c_profilefunc == NULL;
	int m = enabled ? mode_of(ts) : 0, any = 0, n = 0;

	if (!trace_managed(ts))
		return;
	for (_PyCFrame *cf = ts->cframe; cf && n < WALK_MAX;
	     cf = cf->previous, n++) {
		int w = enabled && (m || cframe_wants(cf));

		if (flags_ours)
			cf->use_tracing = w ? 255 : 0;
		any |= w;
	}
	set_trace(ts, enabled && (any || exc_events));
}

void pyhook_retrace(PyThreadState *ts)
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

void pyhook_retrace_all(int (*skip)(long native_id))
{
	PyInterpreterState *interp = PyInterpreterState_Main();
	int gc = PyGC_Disable(), n = 0;

	for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
	     ts && n < WALK_MAX; ts = PyThreadState_Next(ts), n++) {
		if (skip && skip(ts->native_thread_id)) {
			/* The agent's own threads never trace. */
			if (ts->c_tracefunc == (Py_tracefunc)trace_cb)
				ts->c_tracefunc = NULL;
			continue;
		}
		retrace_one(ts);
	}
	if (gc)
		PyGC_Enable();
}

void pyhook_disable(void)
{
	if (!enabled && extra_index < 0)
		return;
	enabled = 0;
	exc_events = 0;
	gen++;
	global_mode = 0;
	nmodes = 0;
	modes_any = 0;
	uninstall();
	pyhook_retrace_all(NULL);
}

void pyhook_invalidate(void)
{
	gen++;
}

void pyhook_set_exception_events(int on)
{
	exc_events = on;
}

int pyhook_frame_depth(PyFrameObject *fo)
{
	_PyInterpreterFrame *f = fo ? fo->f_frame : NULL;
	int n = 0;

	for (int steps = 0; f && steps < WALK_MAX; steps++, f = f->previous)
		if (!_PyFrame_IsIncomplete(f))
			n++;
	return n;
}

int pyhook_frame_starting(PyFrameObject *fo)
{
	_PyInterpreterFrame *f = fo ? fo->f_frame : NULL;

	if (!f || !f->prev_instr)
		return 0;
	return _PyInterpreterFrame_LASTI(f) <= f->f_code->_co_firsttraceable;
}

void pyhook_atfork_child(void)
{
	/* The hook stays in the interpreter until its next call, which
	 * finds it disabled and removes it. */
	enabled = 0;
	exc_events = 0;
	gen++;
	global_mode = 0;
	nmodes = 0;
	modes_any = 0;
}
