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

#include "pycompat.h" /* PyGC_Disable on 3.9 */

#define CHECK_THREADS 64 /* thread states compared */
#define CHECK_FRAMES 64	 /* frames compared per thread */
#define CHECK_TRIES 3	 /* the check, again while it fails */

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

/* The bytes the reader makes of str s (pyframes_code_str: UTF-8, a lone
 * surrogate as "\udXXX"), so that names are compared as bytes: a file
 * name that is not UTF-8 (caf\xe9.py, decoded with surrogateescape) is
 * not UTF-8-encodable.  A new reference, or NULL. */
static PyObject *as_read(PyObject *s)
{
	return s && PyUnicode_Check(s)
		       ? PyUnicode_AsEncodedString(s, "utf-8",
						   "backslashreplace")
		       : NULL;
}

/* Thread t's frames by the reader and by the C API: 0 when they agree. */
static int same_frames(const struct cpython_thread *t, PyThreadState *ts,
		       struct cpython_frame *buf, char *err, size_t errlen)
{
	size_t n = 0, k = 0;
	int truncated = 0;
	PyFrameObject *f;
	char why[128];

	switch (pyframes_walk(t, buf, CHECK_FRAMES, &n, &truncated, why,
			      sizeof(why))) {
	case 0:
		break;
	case -ESRCH: /* it ended meanwhile */
		return 0;
	default:
		errbuf_set(err, errlen, "thread %lu: %s", ts->thread_id, why);
		return -1;
	}
	f = cpython.frame.thread_frame(ts);
	while (f && k < n) {
		PyCodeObject *co = PyFrame_GetCode(f);
		PyObject *nb = as_read(cpython.frame.qualname(co));
		PyObject *fb = as_read(co->co_filename);
		const char *name = nb ? PyBytes_AS_STRING(nb) : NULL;
		const char *file = fb ? PyBytes_AS_STRING(fb) : NULL;
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
		Py_XDECREF(nb);
		Py_XDECREF(fb);
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

/* The reader's entry for thread state ts, or NULL. */
static const struct cpython_thread *listed(const struct cpython_thread *t,
					   size_t n, PyThreadState *ts)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].tstate == (uintptr_t)ts)
			return &t[i];
	return NULL;
}

/*
 * The reader's threads against the C API's.  Thread states come and go
 * without the GIL (a thread is listed before it takes the GIL and
 * unlisted after it let go of it for good), so the two lists, read a
 * moment apart, may differ by those (a starting thread even sets its
 * ident without the GIL): only the threads in both, with the same ident,
 * are compared, and the reader must have found at least one of the C
 * API's.  Their frames do not change while we hold the GIL.
 */
static int check_threads(struct cpython_thread *threads,
			 struct cpython_frame *frames, char *why, size_t whylen)
{
	PyInterpreterState *interp = PyInterpreterState_Main();
	PyThreadState *ts;
	size_t n = 0, seen = 0, compared = 0;

	if (pyframes_threads(threads, CHECK_THREADS, &n, why, whylen))
		return -1;
	for (ts = PyInterpreterState_ThreadHead(interp);
	     ts && seen < CHECK_THREADS; ts = PyThreadState_Next(ts), seen++) {
		const struct cpython_thread *t = listed(threads, n, ts);

		/* A thread that starts sets its ident without the GIL:
		 * another ident, or a state not complete yet, is a thread in
		 * between. */
		if (!t || !cpython.frame.thread_complete(ts) ||
		    t->thread_id != ts->thread_id)
			continue;
		if (same_frames(t, ts, frames, why, whylen))
			return -1;
		compared++;
	}
	if (seen && !compared) {
		errbuf_set(why, whylen,
			   "none of the %zu thread states was found (%zu read)",
			   seen, n);
		return -1;
	}
	return 0;
}

int pyframes_self_check(char *err, size_t errlen)
{
	/* Static: large, and this runs once, with the GIL. */
	static struct cpython_thread threads[CHECK_THREADS];
	static struct cpython_frame frames[CHECK_FRAMES];
	char why[256];
	int gc, rc;

#if PY_VERSION_HEX >= 0x030D0000
	if (debug_offsets(why, sizeof(why)))
		goto bad;
#endif
#if PY_VERSION_HEX < 0x030B0000
	/* Kernel thread ids from glibc's descriptors, found now (an agent
	 * thread, before the sampler or a crash needs them). */
	(void)pyframes_native_calibrate();
#endif
	/* Frame objects made for the C API's view must not start a
	 * collection: finalizers could run Python code that lets the other
	 * threads go on (and their frames change). */
	gc = PyGC_Disable();
	/* What is in between now (threads starting and ending) is not
	 * in between three times over; a layout that is wrong is. */
	for (int i = 0; i < CHECK_TRIES; i++)
		if ((rc = check_threads(threads, frames, why, sizeof(why))) ==
		    0)
			break;
	if (gc)
		PyGC_Enable();
	if (rc)
		goto bad;
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
