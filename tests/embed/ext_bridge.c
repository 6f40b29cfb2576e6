/*
 * _bridge: the bridge as an extension module, built like libprobing.so
 * (hidden visibility, libpython not linked: every Python symbol, _PyRuntime
 * included, comes from the host at load time).  ext_check.py loads it into
 * real interpreters (/usr/bin/python3.11 has libpython linked statically)
 * and compares it with sys._current_frames().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pyeval.h"
#include "python/pystack.h"

static PyObject *frame_obj(const struct pystack_frame *f)
{
	PyObject *loc = PyDict_New(), *r;

	if (!loc)
		return NULL;
	for (size_t i = 0; i < f->nlocals; i++) {
		PyObject *v = Py_BuildValue("(ss)", f->locals[i].type,
					    f->locals[i].value);

		if (!v || PyDict_SetItemString(loc, f->locals[i].name, v)) {
			Py_XDECREF(v);
			Py_DECREF(loc);
			return NULL;
		}
		Py_DECREF(v);
	}
	r = Py_BuildValue("(ssiO)", f->func, f->file, f->lineno, loc);
	Py_DECREF(loc);
	return r;
}

static PyObject *thread_obj(const struct pystack_thread *t)
{
	PyObject *frames = PyList_New(0), *r;

	if (!frames)
		return NULL;
	for (size_t i = 0; i < t->nframes; i++) {
		PyObject *f = frame_obj(&t->frames[i]);

		if (!f || PyList_Append(frames, f)) {
			Py_XDECREF(f);
			Py_DECREF(frames);
			return NULL;
		}
		Py_DECREF(f);
	}
	r = Py_BuildValue("{sKslsssisisisssisO}", "thread_id",
			  (unsigned long long)t->thread_id, "native_id",
			  t->native_id, "name", t->name, "daemon", t->daemon,
			  "holds_gil", t->holds_gil, "is_main", t->is_main,
			  "state", t->state, "truncated", t->truncated,
			  "frames", frames);
	Py_DECREF(frames);
	return r;
}

/* take(gil, locals, max_depth=0) -> [thread dict] */
static PyObject *take(PyObject *m, PyObject *args)
{
	struct pystack_opts o = {0};
	struct pystack s;
	int gil, locals, depth = 0, rc;
	char err[128] = "";
	PyObject *r;

	(void)m;
	if (!PyArg_ParseTuple(args, "pp|i", &gil, &locals, &depth))
		return NULL;
	o.locals = locals;
	o.max_depth = (size_t)depth;
	if (gil) {
		rc = pystack_take_gil(&s, &o, err, sizeof(err));
	} else {
		Py_BEGIN_ALLOW_THREADS rc =
			pystack_take_nogil(&s, &o, err, sizeof(err));
		Py_END_ALLOW_THREADS
	}
	if (rc < 0)
		return PyErr_Format(PyExc_OSError, "%d: %s", rc, err);
	r = PyList_New(0);
	for (size_t i = 0; r && i < s.nthreads; i++) {
		PyObject *t = thread_obj(&s.threads[i]);

		if (!t || PyList_Append(r, t))
			Py_CLEAR(r);
		Py_XDECREF(t);
	}
	pystack_release(&s);
	return r;
}

/* holder() -> (thread_id, native_id), read with the GIL released */
static PyObject *holder(PyObject *m, PyObject *a)
{
	uint64_t id;
	long nid;

	(void)m;
	(void)a;
	Py_BEGIN_ALLOW_THREADS id = pystack_gil_holder(&nid);
	Py_END_ALLOW_THREADS return Py_BuildValue("(Kl)",
						  (unsigned long long)id, nid);
}

/* holder_held() -> (thread_id, native_id), read with the GIL held */
static PyObject *holder_held(PyObject *m, PyObject *a)
{
	uint64_t id;
	long nid;

	(void)m;
	(void)a;
	id = pystack_gil_holder(&nid);
	return Py_BuildValue("(Kl)", (unsigned long long)id, nid);
}

/* eval(code) -> dict */
static PyObject *eval(PyObject *m, PyObject *arg)
{
	struct pyeval_result r;
	char err[128] = "";
	PyObject *d;

	(void)m;
	if (!PyUnicode_Check(arg))
		return PyErr_Format(PyExc_TypeError, "str expected");
	if (pyeval_run(PyUnicode_AsUTF8(arg), &r, err, sizeof(err)) < 0)
		return PyErr_Format(PyExc_OSError, "%s", err);
	d = Py_BuildValue("{sisssssssssi}", "ok", r.ok, "value", r.value,
			  "type", r.type, "output", r.output, "error", r.error,
			  "interrupted", r.interrupted);
	pyeval_result_release(&r);
	return d;
}

static PyMethodDef methods[] = {
	{"take", take, METH_VARARGS, NULL},
	{"holder", holder, METH_NOARGS, NULL},
	{"holder_held", holder_held, METH_NOARGS, NULL},
	{"eval", eval, METH_O, NULL},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef def = {
	PyModuleDef_HEAD_INIT,
	"_bridge",
	NULL,
	-1,
	methods,
	NULL,
	NULL,
	NULL,
	NULL,
};

PyMODINIT_FUNC PyInit__bridge(void)
{
	return PyModule_Create(&def);
}
