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
 * (names, files, lines).  3.13 on also publish their own offsets
 * (_PyRuntime.debug_offsets, for debuggers): every one of them the reader
 * uses is compared with the compiled one, and where they differ the
 * reader reads at the interpreter's (pyl_moves, pyframes_impl.h) — the
 * few it uses that are not published (datastack_top, _co_firsttraceable)
 * where the headers have them — and the C API comparison then tells
 * whether that is right.  A mismatch it cannot follow (a field past what
 * the reader copies, the GIL's) or a comparison that fails turns the
 * reader off
 * (pyframes_disable): threads() then fails with the reason, and the
 * sampler, GIL-free backtraces and the forensics report it instead of
 * reading wrong memory.
 */
#include "pyframes_impl.h"

#include <errno.h>
#include <string.h>

#include "pycompat.h" /* PyGC_Disable on 3.9 */

#define CHECK_THREADS 64 /* thread states compared */
#if PY_VERSION_HEX >= 0x030B0000
#define QUALNAME "co_qualname"
#else
#define QUALNAME "co_name" /* what the reader names a frame by there */
#endif
#define CHECK_FRAMES 64	 /* frames compared per thread */
#define CHECK_TRIES 3	 /* the check, again while it fails */

#if PY_VERSION_HEX >= 0x030D0000
#define MUST_MATCH (-1) /* a field read at an address computed elsewhere */

/* Bytes of each kind that the reader copies: a field the interpreter has
 * past them cannot be moved into place. */
static const size_t extent[PYL_KINDS] = {
	[PYL_RUNTIME] = RUNTIME_HEAD,
	[PYL_INTERP] = INTERP_HEAD,
	[PYL_TSTATE] = sizeof(PyThreadState),
	[PYL_FRAME] = FRAME_HEAD,
	[PYL_CODE] = CODE_HEAD,
};

/* One published field, group.field of _Py_DebugOffsets, and where the
 * headers put it (type's member). */
#define F(kind, group, field, type, member)                                    \
	{                                                                      \
		kind, #group "." #field, d->group.field,                       \
			offsetof(type, member), sizeof(((type *)0)->member)    \
	}

/* The interpreter's own offsets (3.13 on) against ours: where they differ
 * the reader is told to read at theirs (pyl_moves; note says which).  0,
 * or -1 with err when the difference is one it cannot follow. */
static int debug_offsets(char *note, size_t notelen, char *err, size_t errlen)
{
	const _Py_DebugOffsets *d = &_PyRuntime.debug_offsets;
	struct {
		int kind; /* enum pyl_kind, or MUST_MATCH */
		const char *name;
		uint64_t theirs;
		size_t ours, size;
	} f[] = {
		F(PYL_RUNTIME, runtime_state, interpreters_head,
		  _PyRuntimeState, interpreters.head),
		F(PYL_RUNTIME, runtime_state, finalizing, _PyRuntimeState,
		  _finalizing),
		F(PYL_INTERP, interpreter_state, next, PyInterpreterState,
		  next),
		F(PYL_INTERP, interpreter_state, threads_head,
		  PyInterpreterState, threads.head),
		/* The GIL is read at &_PyRuntime's main interpreter's. */
		F(MUST_MATCH, interpreter_state, gil_runtime_state_locked,
		  PyInterpreterState, _gil.locked),
		F(MUST_MATCH, interpreter_state, gil_runtime_state_holder,
		  PyInterpreterState, _gil.last_holder),
		F(PYL_TSTATE, thread_state, prev, PyThreadState, prev),
		F(PYL_TSTATE, thread_state, next, PyThreadState, next),
		F(PYL_TSTATE, thread_state, interp, PyThreadState, interp),
		F(PYL_TSTATE, thread_state, datastack_chunk, PyThreadState,
		  datastack_chunk),
		F(PYL_TSTATE, thread_state, current_frame, PyThreadState,
		  current_frame),
		F(PYL_TSTATE, thread_state, thread_id, PyThreadState,
		  thread_id),
		F(PYL_TSTATE, thread_state, native_thread_id, PyThreadState,
		  native_thread_id),
		F(PYL_FRAME, interpreter_frame, previous, _PyInterpreterFrame,
		  previous),
		F(PYL_FRAME, interpreter_frame, executable, _PyInterpreterFrame,
		  f_executable),
		F(PYL_FRAME, interpreter_frame, instr_ptr, _PyInterpreterFrame,
		  instr_ptr),
		F(PYL_FRAME, interpreter_frame, owner, _PyInterpreterFrame,
		  owner),
		F(PYL_CODE, code_object, qualname, PyCodeObject, co_qualname),
		F(PYL_CODE, code_object, filename, PyCodeObject, co_filename),
		F(PYL_CODE, code_object, linetable, PyCodeObject, co_linetable),
		F(PYL_CODE, code_object, firstlineno, PyCodeObject,
		  co_firstlineno),
		/* Where the instructions start (CODE_FIRST): an offset only. */
		{PYL_CODE, "code_object.co_code_adaptive",
		 d->code_object.co_code_adaptive,
		 offsetof(PyCodeObject, co_code_adaptive), 0},
	};
	struct pyl_moves mv[PYL_KINDS];
	size_t len = 0;

	note[0] = '\0';
	if (memcmp(d->cookie, _Py_Debug_Cookie, sizeof(d->cookie))) {
		errbuf_set(err, errlen,
			   "_PyRuntime.debug_offsets has no cookie");
		return -1;
	}
	memset(mv, 0, sizeof(mv));
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		int k = f[i].kind;

		if (f[i].theirs == f[i].ours)
			continue;
		/* An offset only (size 0) is not copied: any is followed. */
		if (k == MUST_MATCH || f[i].size > 8 ||
		    (f[i].size && (f[i].theirs > extent[k] ||
				   f[i].size > extent[k] - f[i].theirs)) ||
		    f[i].theirs > UINT16_MAX || mv[k].n == PYL_MOVES_MAX) {
			errbuf_set(err, errlen,
				   "%s is at %llu in this interpreter, %llu in "
				   "the headers the agent was built with%s",
				   f[i].name, (unsigned long long)f[i].theirs,
				   (unsigned long long)f[i].ours,
				   k == MUST_MATCH
					   ? ""
					   : ", past what the reader copies");
			return -1;
		}
		mv[k].m[mv[k].n++] = (struct pyl_move){(uint16_t)f[i].ours,
						       (uint16_t)f[i].theirs,
						       (uint8_t)f[i].size};
		if (len < notelen)
			len += (size_t)snprintf(
				note + len, notelen - len, "%s%s at %llu (%zu)",
				len ? ", " : "", f[i].name,
				(unsigned long long)f[i].theirs, f[i].ours);
	}
	if (!len)
		return 0;
	memcpy(pyl_moves, mv, sizeof(mv));
	atomic_store_explicit(&pyl_on, 1, memory_order_release);
	return 0;
}
#undef F
#endif

/* The bytes the reader makes of str s (pyframes_code_str: UTF-8, a lone
 * surrogate as "\udXXX"), so that names are compared as bytes: a file
 * name that is not UTF-8 (caf\xe9.py, decoded with surrogateescape) is
 * not UTF-8-encodable.  A new reference, or NULL. */
static PyObject *as_read(PyObject *s)
{
	return s && PyUnicode_Check(s) ? PyUnicode_AsEncodedString(
						 s, "utf-8", "backslashreplace")
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
		/* By attribute: the interpreter's own view, wherever its
		 * fields are (not the headers' offsets the reader checks). */
		PyObject *qn = PyObject_GetAttrString((PyObject *)co, QUALNAME);
		PyObject *fn = PyObject_GetAttrString((PyObject *)co,
						      "co_filename");
		PyObject *nb = as_read(qn);
		PyObject *fb = as_read(fn);
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
		Py_XDECREF(qn);
		Py_XDECREF(fn);
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

/* What debug_offsets() found (pyframes_layout_learn): 0 not looked
 * yet, 1 followed (learned_note says what moved, empty: nothing),
 * -1 refused (learned_why). */
static int learned;
static char learned_note[384], learned_err[512];
#if PY_VERSION_HEX >= 0x030D0000
static char learned_why[256];
#endif

/* The reader off for good, err saying why (its reason for moved). */
static int refuse(const char *why, const char *moved, char *err,
		  size_t errlen)
{
	char ver[128];

	cpython.version_text(ver, sizeof(ver));
	/* What moved first: a setting's value is cut at 255 bytes. */
	errbuf_set(err, errlen,
		   "reading stacks without the GIL is off: the layout of "
		   "this CPython is not the one the agent was built for "
		   "(%s%s%s%s; CPython %s)",
		   moved[0] ? "read at the places it publishes: " : "", moved,
		   moved[0] ? "; then " : "", why, ver);
	pyframes_disable(err);
	return -ENOTSUP;
}

int pyframes_layout_learn(char *err, size_t errlen)
{
	if (errlen)
		err[0] = '\0';
	if (!learned) {
#if PY_VERSION_HEX >= 0x030D0000
		learned = debug_offsets(learned_note, sizeof(learned_note),
					learned_why, sizeof(learned_why))
				  ? -1
				  : 1;
		if (learned < 0)
			refuse(learned_why, "", learned_err,
			       sizeof(learned_err));
#else
		learned = 1;
#endif
	}
	if (learned > 0)
		return 0;
	errbuf_set(err, errlen, "%s", learned_err);
	return -ENOTSUP;
}

/* The comparison, CHECK_TRIES times while it fails. */
static int compare_all(char *why, size_t whylen)
{
	/* Static: large, and this runs once, with the GIL. */
	static struct cpython_thread threads[CHECK_THREADS];
	static struct cpython_frame frames[CHECK_FRAMES];
	int gc, rc = -1;

	/* Frame objects made for the C API's view must not start a
	 * collection: finalizers could run Python code that lets the other
	 * threads go on (and their frames change). */
	gc = PyGC_Disable();
	/* What is in between now (threads starting and ending) is not
	 * in between three times over; a layout that is wrong is. */
	for (int i = 0; i < CHECK_TRIES; i++)
		if ((rc = check_threads(threads, frames, why, whylen)) == 0)
			break;
	if (gc)
		PyGC_Enable();
	return rc;
}

static char check_why[256];

static PyObject *compare_cb(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	return PyLong_FromLong(compare_all(check_why, sizeof(check_why)));
}

static PyMethodDef compare_def = {"compare", compare_cb, METH_NOARGS,
				  "the stack reader's self check"};

/* The comparison run from a method of a class, so that the stacks
 * compared hold a frame whose qualified name is not its name (a layout
 * that gave one for the other passes on functions alone); run directly
 * when that cannot be made. */
static int compare_in_method(char *why, size_t whylen)
{
	static const char src[] = "class ProbingSelfCheck:\n"
				  "    def run(self, compare):\n"
				  "        return compare()\n"
				  "r = ProbingSelfCheck().run(compare)\n";
	PyObject *g = PyDict_New(), *code = NULL, *fn = NULL, *r = NULL;
	PyObject *res;
	long rc = -2;

	check_why[0] = '\0';
	fn = g ? PyCFunction_New(&compare_def, NULL) : NULL;
	if (fn && !PyDict_SetItemString(g, "__builtins__",
					PyEval_GetBuiltins()) &&
	    !PyDict_SetItemString(g, "compare", fn))
		code = Py_CompileString(src, "<probing self check>",
					Py_file_input);
	r = code ? PyEval_EvalCode(code, g, g) : NULL;
	res = r ? PyDict_GetItemString(g, "r") : NULL;
	if (res && PyLong_Check(res))
		rc = PyLong_AsLong(res);
	Py_XDECREF(r);
	Py_XDECREF(code);
	Py_XDECREF(fn);
	Py_XDECREF(g);
	PyErr_Clear();
	if (rc == -2)
		return compare_all(why, whylen);
	errbuf_set(why, whylen, "%s", check_why);
	return (int)rc;
}

int pyframes_self_check(char *err, size_t errlen)
{
	char why[256];
	const char *moved = learned_note;

	if (pyframes_layout_learn(err, errlen))
		return -ENOTSUP;
#if PY_VERSION_HEX < 0x030B0000
	/* Kernel thread ids from glibc's descriptors, found now (an agent
	 * thread, before the sampler or a crash needs them). */
	(void)pyframes_native_calibrate();
#endif
	if (compare_in_method(why, sizeof(why)))
		return refuse(why, moved, err, errlen);
	if (moved[0])
		errbuf_set(err, errlen,
			   "ok: read at this interpreter's own layout "
			   "(_PyRuntime.debug_offsets), where it is not the "
			   "headers': %s",
			   moved);
	return 0;
}
