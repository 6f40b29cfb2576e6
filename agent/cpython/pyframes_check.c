/*
 * pyframes_check: the GIL-free reader checked against the running
 * interpreter, once, at start-up (cpython.read.self_check).  Part of the
 * pyframes module (pyframes.h).
 *
 * The reader's offsets are those of the headers the agent was built with;
 * the interpreter running may be another patch release of the same
 * version, or a build with other options.  So, with the GIL held (every
 * other thread waits, its frames still), the reader's answers are compared
 * with the C API's: the same thread states, and for each the same frames
 * (names, files, lines).  3.13 also publishes its own offsets
 * (_PyRuntime.debug_offsets, for debuggers): those the reader uses are
 * compared with the compiled ones.  A mismatch turns the reader off
 * (pyframes_disable): threads() then fails with the reason, and the
 * sampler, GIL-free backtraces and the forensics report it instead of
 * reading wrong memory.
 */
#include "pyframes_impl.h"

#include <errno.h>
#include <string.h>

#define CHECK_THREADS 64 /* thread states compared */
#define CHECK_FRAMES 64	 /* frames compared per thread */

#if PY_VERSION_HEX >= 0x030D0000
/* 3.13's own offsets against ours: 0, or -1 with the field named. */
static int debug_offsets(char *err, size_t errlen)
{
	const _Py_DebugOffsets *d = &_PyRuntime.debug_offsets;
	struct {
		const char *name;
		uint64_t theirs, ours;
	} f[] = {
		{"runtime_state.interpreters_head",
		 d->runtime_state.interpreters_head,
		 offsetof(_PyRuntimeState, interpreters.head)},
		{"interpreter_state.threads_head",
		 d->interpreter_state.threads_head,
		 offsetof(PyInterpreterState, threads.head)},
		{"thread_state.next", d->thread_state.next,
		 offsetof(PyThreadState, next)},
		{"thread_state.current_frame", d->thread_state.current_frame,
		 offsetof(PyThreadState, current_frame)},
		{"thread_state.thread_id", d->thread_state.thread_id,
		 offsetof(PyThreadState, thread_id)},
		{"thread_state.native_thread_id",
		 d->thread_state.native_thread_id,
		 offsetof(PyThreadState, native_thread_id)},
		{"interpreter_frame.previous", d->interpreter_frame.previous,
		 offsetof(_PyInterpreterFrame, previous)},
		{"interpreter_frame.executable",
		 d->interpreter_frame.executable,
		 offsetof(_PyInterpreterFrame, f_executable)},
		{"interpreter_frame.instr_ptr", d->interpreter_frame.instr_ptr,
		 offsetof(_PyInterpreterFrame, instr_ptr)},
		{"interpreter_frame.owner", d->interpreter_frame.owner,
		 offsetof(_PyInterpreterFrame, owner)},
		{"code_object.qualname", d->code_object.qualname,
		 offsetof(PyCodeObject, co_qualname)},
		{"code_object.filename", d->code_object.filename,
		 offsetof(PyCodeObject, co_filename)},
		{"code_object.linetable", d->code_object.linetable,
		 offsetof(PyCodeObject, co_linetable)},
		{"code_object.firstlineno", d->code_object.firstlineno,
		 offsetof(PyCodeObject, co_firstlineno)},
		{"code_object.co_code_adaptive",
		 d->code_object.co_code_adaptive,
		 offsetof(PyCodeObject, co_code_adaptive)},
	};

	if (memcmp(d->cookie, _Py_Debug_Cookie, sizeof(d->cookie))) {
		errbuf_set(err, errlen,
			   "_PyRuntime.debug_offsets has no cookie");
		return -1;
	}
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].theirs != f[i].ours) {
			errbuf_set(err, errlen,
				   "%s is at %llu in this interpreter, %llu in "
				   "the headers the agent was built with",
				   f[i].name, (unsigned long long)f[i].theirs,
				   (unsigned long long)f[i].ours);
			return -1;
		}
	return 0;
}
#endif

/* The name the reader gives code co's frames. */
static PyObject *shown_name(PyCodeObject *co)
{
#if PY_VERSION_HEX >= 0x030B0000
	return co->co_qualname;
#else
	return co->co_name;
#endif
}

/* Thread t's frames by the reader and by the C API: 0 when they agree. */
static int same_frames(const struct cpython_thread *t, PyThreadState *ts,
		       struct cpython_frame *buf, char *err, size_t errlen)
{
	size_t n = 0, k = 0;
	int truncated = 0;
	PyFrameObject *f;
	char why[128];

	if (pyframes_walk(t, buf, CHECK_FRAMES, &n, &truncated, why,
			  sizeof(why))) {
		errbuf_set(err, errlen, "thread %lu: %s", ts->thread_id, why);
		return -1;
	}
	f = PyThreadState_GetFrame(ts);
	while (f && k < n) {
		PyCodeObject *co = PyFrame_GetCode(f);
		const char *name = PyUnicode_AsUTF8(shown_name(co));
		const char *file = PyUnicode_AsUTF8(co->co_filename);
		int line = PyFrame_GetLineNumber(f), ok;
		PyFrameObject *back = PyFrame_GetBack(f);

		ok = name && file && !strcmp(name, buf[k].func) &&
		     !strcmp(file, buf[k].file) && line == buf[k].lineno;
		if (!ok)
			errbuf_set(err, errlen,
				   "thread %lu, frame %zu: %s (%s:%d) read "
				   "as %s (%s:%d)",
				   ts->thread_id, k, name ? name : "?",
				   file ? file : "?", line, buf[k].func,
				   buf[k].file, buf[k].lineno);
		Py_DECREF(co);
		Py_DECREF(f);
		f = back;
		k++;
		if (!ok) {
			Py_XDECREF(f);
			PyErr_Clear();
			return -1;
		}
	}
	PyErr_Clear();
	if ((f != NULL) != (truncated != 0) || k != n) {
		errbuf_set(err, errlen,
			   "thread %lu: %zu frames read, the C API has %s",
			   ts->thread_id, n, f ? "more" : "fewer");
		Py_XDECREF(f);
		return -1;
	}
	return 0;
}

int pyframes_self_check(char *err, size_t errlen)
{
	/* Static: large, and this runs once, with the GIL. */
	static struct cpython_thread threads[CHECK_THREADS];
	static struct cpython_frame frames[CHECK_FRAMES];
	PyInterpreterState *interp = PyInterpreterState_Main();
	PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
	size_t n = 0, i = 0;
	char why[256];

#if PY_VERSION_HEX >= 0x030D0000
	if (debug_offsets(why, sizeof(why)))
		goto bad;
#endif
#if PY_VERSION_HEX < 0x030B0000
	/* Kernel thread ids from glibc's descriptors, found now (an agent
	 * thread, before the sampler or a crash needs them). */
	(void)pyframes_native_calibrate();
#endif
	if (pyframes_threads(threads, CHECK_THREADS, &n, why, sizeof(why)))
		goto bad;
	/* The main interpreter's threads, newest first as
	 * PyInterpreterState_ThreadHead() lists them, somewhere in the list
	 * of every interpreter's. */
	while (i < n && ts && threads[i].tstate != (uintptr_t)ts)
		i++;
	for (; ts && i < CHECK_THREADS; ts = PyThreadState_Next(ts), i++) {
		if (i >= n || threads[i].tstate != (uintptr_t)ts ||
		    threads[i].thread_id != ts->thread_id) {
			errbuf_set(why, sizeof(why),
				   "thread state %zu (%p) read as %p", i,
				   (void *)ts,
				   i < n ? (void *)threads[i].tstate : NULL);
			goto bad;
		}
		if (same_frames(&threads[i], ts, frames, why, sizeof(why)))
			goto bad;
	}
	return 0;
bad:
	errbuf_set(err, errlen,
		   "reading stacks without the GIL is off: the layout of "
		   "this CPython (%s) is not the one the agent was built "
		   "for (%s)",
		   Py_GetVersion(), why);
	pyframes_disable(err);
	return -ENOTSUP;
}
