/*
 * cpython: the table of operations for the CPython this agent is built
 * for (3.11), and the with-GIL frame operations that differ between
 * versions.  See cpython.h.
 */
#include <Python.h>
#include <frameobject.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "agent/cpython implements CPython 3.11; port it for this version"
#endif

#include "cpython.h"
#include "pyframes.h"
#include "pyhook.h"

static int finalizing(void)
{
	return _Py_IsFinalizing();
}

static PyObject *frame_locals(PyFrameObject *f)
{
	/* 3.11: the frame's f_locals dict, filled from its fast locals. */
	return PyFrame_GetLocals(f);
}

static int frame_locals_write(PyFrameObject *f, PyObject *locals)
{
	/* 3.11: locals is f->f_locals itself (frame_locals()). */
	(void)locals;
	PyFrame_LocalsToFast(f, 0);
	return PyErr_Occurred() ? -1 : 0;
}

static PyObject *frame_globals(PyFrameObject *f)
{
	return PyFrame_GetGlobals(f);
}

static PyObject *code_qualname(PyCodeObject *co)
{
	return co->co_qualname;
}

static unsigned long thread_native_id(PyThreadState *ts)
{
	return ts->native_thread_id;
}

/* clang-format off */
const struct cpython cpython = {
	.version = "3.11",
	.finalizing = finalizing,
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
		.force_pipe = pyframes_force_pipe,
	},
	.frame = {
		.locals = frame_locals,
		.locals_write = frame_locals_write,
		.globals = frame_globals,
		.depth = pyhook_frame_depth,
		.starting = pyhook_frame_starting,
		.qualname = code_qualname,
		.native_id = thread_native_id,
	},
	.trace = {
		.init = pyhook_init,
		.enable = pyhook_enable,
		.enabled = pyhook_enabled,
		.disable = pyhook_disable,
		.invalidate = pyhook_invalidate,
		.exception_events = pyhook_set_exception_events,
		.set_mode = pyhook_set_mode,
		.mode = pyhook_mode,
		.retrace = pyhook_retrace,
		.retrace_all = pyhook_retrace_all,
		.code_wanted = pyhook_code_wanted,
		.atfork_child = pyhook_atfork_child,
	},
};
/* clang-format on */
