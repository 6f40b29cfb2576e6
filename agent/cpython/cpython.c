/*
 * cpython: the table of operations for the CPython this agent is built
 * for (3.9 to 3.15), and the with-GIL frame operations that differ between
 * versions.  See cpython.h.
 */
#include "pycompat.h"
#include <frameobject.h>

#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpython.h"
#include "errbuf.h"
#include "pyframes.h"
#include "pytrace.h"

#define STR2(x) #x
#define STR(x) STR2(x)
#define VERSION STR(PY_MAJOR_VERSION) "." STR(PY_MINOR_VERSION)
#define WALK_MAX 1000000  /* frames counted in one walk */
#ifndef PROBING_SUPPORTED /* the versions of this install (CMake) */
#define PROBING_SUPPORTED VERSION
#endif

static int finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
	return Py_IsFinalizing();
#else
	return _Py_IsFinalizing();
#endif
}

static pthread_mutex_t version_lock = PTHREAD_MUTEX_INITIALIZER;

static void version_text(char *out, size_t outlen)
{
	pthread_mutex_lock(&version_lock);
	snprintf(out, outlen, "%s", Py_GetVersion());
	pthread_mutex_unlock(&version_lock);
}

/* Py_GetVersion() is "3.12.1 (main, ...)": its major.minor must be ours
 * (a library loaded by hand into another version: PROBING_LIBRARY,
 * inject --library).  Read through version_text(): the module's import
 * and the agent's thread check at once, and a torn read of the buffer
 * once refused a 3.9 agent in a 3.9 process. */
static int check(char *err, size_t errlen)
{
	char v[256];
	size_t n = strlen(VERSION);

	version_text(v, sizeof(v));

	if (strncmp(v, VERSION, n) == 0 && (v[n] < '0' || v[n] > '9'))
		return 0;
	errbuf_set(err, errlen,
		   "this agent is built for CPython " VERSION
		   ", the process runs %.20s (this install supports "
		   "%s)",
		   v, PROBING_SUPPORTED);
	return -ENOEXEC;
}

static PyObject *frame_locals(PyFrameObject *f)
{
#if PY_VERSION_HEX >= 0x030D0000
	/* 3.13 (PEP 667): a proxy that writes through; a copy of it. */
	PyObject *proxy = PyFrame_GetLocals(f), *d;

	if (!proxy)
		return NULL;
	if (PyDict_Check(proxy))
		return proxy;
	d = PyDict_New();
	if (d && PyDict_Update(d, proxy) < 0)
		Py_CLEAR(d);
	Py_DECREF(proxy);
	return d;
#elif PY_VERSION_HEX >= 0x030B0000
	/* The frame's f_locals dict, filled from its fast locals. */
	return PyFrame_GetLocals(f);
#else
	if (PyFrame_FastToLocalsWithError(f) < 0)
		return NULL;
	return Py_NewRef(f->f_locals);
#endif
}

#if PY_VERSION_HEX >= 0x030C0000 && PY_VERSION_HEX < 0x030D0000
/* Adds to d every name of names that f has a value for. */
static int add_vars(PyFrameObject *f, PyObject *names, PyObject *d)
{
	for (Py_ssize_t i = 0; names && i < PyTuple_GET_SIZE(names); i++) {
		PyObject *k = PyTuple_GET_ITEM(names, i);
		PyObject *v = PyFrame_GetVar(f, k);

		if (!v) { /* unbound (NameError) */
			PyErr_Clear();
			continue;
		}
		if (PyDict_SetItem(d, k, v) < 0) {
			Py_DECREF(v);
			return -1;
		}
		Py_DECREF(v);
	}
	return 0;
}
#endif

/*
 * A new dict of f's local variables, leaving f as it was: nothing
 * cached in the frame that would keep its objects alive after the
 * function let them go (a training step's tensors), nothing written
 * back.  For a running frame (locals() in the frame caches them there
 * up to 3.12).
 */
static PyObject *frame_locals_copy(PyFrameObject *f)
{
#if PY_VERSION_HEX >= 0x030D0000
	return frame_locals(f); /* a copy of the proxy already */
#elif PY_VERSION_HEX >= 0x030C0000
	/* PyFrame_GetVar reads a variable without the cache. */
	PyCodeObject *co = PyFrame_GetCode(f);
	PyObject *d = PyDict_New(), *names[3];
	int rc = 0;

	if (!(co->co_flags & CO_OPTIMIZED)) { /* module, class: a real dict */
		PyObject *l = frame_locals(f);

		Py_DECREF(co);
		Py_XDECREF(d);
		d = l ? PyDict_Copy(l) : NULL;
		Py_XDECREF(l);
		return d;
	}
	names[0] = PyCode_GetVarnames(co);
	names[1] = PyCode_GetCellvars(co);
	names[2] = PyCode_GetFreevars(co);
	for (int i = 0; d && rc == 0 && i < 3; i++)
		rc = add_vars(f, names[i], d);
	for (int i = 0; i < 3; i++)
		Py_XDECREF(names[i]);
	Py_DECREF(co);
	if (rc < 0)
		Py_CLEAR(d);
	return d;
#else
	PyCodeObject *co = PyFrame_GetCode(f);
	int fast = (co->co_flags & CO_OPTIMIZED) != 0;
	PyObject *l, *d;
#if PY_VERSION_HEX < 0x030B0000
	/* f_locals is ours to see: put back exactly what was there. */
	PyObject *before = f->f_locals, *saved = NULL;

	if (fast && before && !(saved = PyDict_Copy(before))) {
		Py_DECREF(co);
		return NULL;
	}
#endif
	Py_DECREF(co);
	l = frame_locals(f);
	d = l ? PyDict_Copy(l) : NULL;
#if PY_VERSION_HEX < 0x030B0000
	if (fast && !before) {
		Py_CLEAR(f->f_locals);
	} else if (fast && saved) {
		PyDict_Clear(before);
		if (PyDict_Update(before, saved) < 0)
			PyErr_Clear();
	}
	Py_XDECREF(saved);
#else
	/* 3.11: the cache is not ours to see; emptied, its objects are
	 * let go (locals() fills it again). */
	if (fast && l)
		PyDict_Clear(l);
#endif
	Py_XDECREF(l);
	return d;
#endif
}

static int frame_locals_write(PyFrameObject *f, PyObject *locals)
{
#if PY_VERSION_HEX >= 0x030D0000
	/* Every entry that is not what the frame has now goes through the
	 * proxy. */
	PyObject *proxy = PyFrame_GetLocals(f), *k, *v;
	Py_ssize_t pos = 0;
	int rc = 0;

	if (!proxy)
		return -1;
	if (proxy == locals) {
		Py_DECREF(proxy);
		return 0;
	}
	while (rc == 0 && PyDict_Next(locals, &pos, &k, &v)) {
		PyObject *now = PyObject_GetItem(proxy, k);

		if (!now)
			PyErr_Clear();
		if (now != v)
			rc = PyObject_SetItem(proxy, k, v);
		Py_XDECREF(now);
	}
	Py_DECREF(proxy);
	return rc;
#else
	/* locals is f->f_locals itself (frame_locals()). */
	(void)locals;
	PyFrame_LocalsToFast(f, 0);
	return PyErr_Occurred() ? -1 : 0;
#endif
}

static PyObject *frame_globals(PyFrameObject *f)
{
#if PY_VERSION_HEX >= 0x030B0000
	return PyFrame_GetGlobals(f);
#else
	return Py_NewRef(f->f_globals);
#endif
}

static PyObject *code_qualname(PyCodeObject *co)
{
#if PY_VERSION_HEX >= 0x030B0000
	return co->co_qualname;
#else
	return co->co_name;
#endif
}

static unsigned long thread_native_id(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030B0000
	return ts->native_thread_id;
#else
	if (ts == PyThreadState_Get())
		return (unsigned long)syscall(SYS_gettid);
	return (unsigned long)pyframes_native_id(ts->thread_id);
#endif
}

/* cpython.h.  The fields are read once, through volatile: the thread
 * making the state may be writing them. */
static int thread_complete(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
	const volatile PyThreadState *v = ts;

	return v->_status.initialized;
#elif PY_VERSION_HEX >= 0x030C0000
	const volatile PyThreadState *v = ts;

	return v->_status.initialized && v->cframe != NULL;
#elif PY_VERSION_HEX >= 0x030B0000
	const volatile PyThreadState *v = ts;

	return v->_initialized && v->cframe != NULL;
#else
	/* Up to 3.10 a thread state is filled in before it is listed. */
	(void)ts;
	return 1;
#endif
}

static PyFrameObject *thread_frame(PyThreadState *ts)
{
	return ts && thread_complete(ts) ? PyThreadState_GetFrame(ts) : NULL;
}

#if PY_VERSION_HEX >= 0x030A0000
/* co_lines(): (start, end, line) triples, line None where no line. */
static int code_lines(PyObject *code, int (*fn)(void *arg, int line), void *arg)
{
	PyObject *it = PyObject_CallMethod(code, "co_lines", NULL), *t;
	int stop = 0;

	if (!it)
		return -1;
	while (!stop && (t = PyIter_Next(it))) {
		PyObject *ln = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3
				       ? PyTuple_GET_ITEM(t, 2)
				       : NULL;
		long l = ln && PyLong_Check(ln) ? PyLong_AsLong(ln) : -1;

		if (l > 0 && l < INT_MAX)
			stop = fn(arg, (int)l);
		Py_DECREF(t);
	}
	Py_DECREF(it);
	return PyErr_Occurred() ? -1 : 0;
}
#else
/* 3.9: co_lnotab read as dis.findlinestarts() reads it, in C (importing
 * dis would run Python code, here called while frames start). */
static int code_lines(PyObject *code, int (*fn)(void *arg, int line), void *arg)
{
	PyCodeObject *co = (PyCodeObject *)code;
	const unsigned char *p;
	Py_ssize_t n, size;
	long line, last = -1, addr = 0;

	if (!PyCode_Check(code) || !PyBytes_Check(co->co_lnotab) ||
	    !PyBytes_Check(co->co_code))
		return 0;
	p = (const unsigned char *)PyBytes_AS_STRING(co->co_lnotab);
	n = PyBytes_GET_SIZE(co->co_lnotab) / 2;
	size = PyBytes_GET_SIZE(co->co_code);
	line = co->co_firstlineno;
	for (Py_ssize_t i = 0; i < n; i++, p += 2) {
		if (p[0]) {
			if (line != last && line > 0 && line < INT_MAX &&
			    fn(arg, (int)line))
				return 0;
			last = line;
			addr += p[0];
			if (addr >= size)
				return 0;
		}
		line += (signed char)p[1];
	}
	if (line != last && addr < size && line > 0 && line < INT_MAX)
		fn(arg, (int)line);
	return 0;
}
#endif

/* The complete frames from f to the bottom (PyFrame_GetBack skips the
 * incomplete ones). */
static int frame_depth(PyFrameObject *f)
{
	int n = 0;

	if (!f)
		return 0;
	Py_INCREF(f);
	while (f && n < WALK_MAX) {
		PyFrameObject *back = PyFrame_GetBack(f);

		n++;
		Py_DECREF(f);
		f = back;
	}
	Py_XDECREF(f);
	return n;
}

static int frame_starting(PyFrameObject *f)
{
#if PY_VERSION_HEX >= 0x030B0000
	PyCodeObject *co = PyFrame_GetCode(f);
	int first = co->_co_firsttraceable * 2; /* code units are 2 bytes */

	Py_DECREF(co);
	return PyFrame_GetLasti(f) <= first;
#else
	return f->f_lasti < 0;
#endif
}

/* clang-format off */
const struct cpython cpython = {
	.version = VERSION,
	.check = check,
	.version_text = version_text,
	.finalizing = finalizing,
	.code_lines = code_lines,
	.read = {
		.ready = pyframes_ready,
		.threads = pyframes_threads,
		.threads_fast = pyframes_threads_fast,
		.walk = pyframes_walk,
		.walk_raw = pyframes_walk_raw,
		.code_names = pyframes_code_names,
		.linetable_copy = pyframes_linetable_copy,
		.line_decode = pyframes_line_decode,
		.line_remote = pyframes_line_remote,
		.gil_holder = pyframes_gil_holder,
		.gil_tstate = pyframes_gil_tstate,
		.gil_range = pyframes_gil_range,
		.main_thread = pyframes_main_thread,
		.scratch_new = pyframes_scratch_new,
		.scratch_free = pyframes_scratch_free,
		.leaf_capture = pyframes_leaf_capture,
		.leaf_resolve = pyframes_leaf_resolve,
		.learn_layout = pyframes_layout_learn,
		.self_check = pyframes_self_check,
		.off_reason = pyframes_off_reason,
		.force_pipe = pyframes_force_pipe,
		.named_same = pyframes_named_same,
	},
	.frame = {
		.locals = frame_locals,
		.locals_copy = frame_locals_copy,
		.locals_write = frame_locals_write,
		.globals = frame_globals,
		.depth = frame_depth,
		.starting = frame_starting,
		.qualname = code_qualname,
		.native_id = thread_native_id,
		.thread_complete = thread_complete,
		.thread_frame = thread_frame,
		.gen_raw_addr = pyframes_gen_frame_addr,
	},
	.trace = {
		.init = pytrace_init,
		.enable = pytrace_enable,
		.enabled = pytrace_enabled,
		.disable = pytrace_disable,
		.invalidate = pytrace_invalidate,
		.exception_events = pytrace_set_exception_events,
		.set_mode = pytrace_set_mode,
		.mode = pytrace_mode,
		.retrace = pytrace_retrace,
		.retrace_all = pytrace_retrace_all,
		.code_wanted = pytrace_code_wanted,
		.forget = pytrace_forget,
		.atfork_child = pytrace_atfork_child,
	},
};
/* clang-format on */
