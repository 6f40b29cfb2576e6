/*
 * pyafter: after-import calls.  See pyafter.h.
 *
 * A Watch, first on sys.meta_path, finds the spec of the module it
 * watches as the finders after it would, and covers the spec's loader's
 * exec_module (on that loader object only, an attribute of its instance)
 * with a Cover that runs the module, takes itself off and calls back.
 * Anything unusual and the Watch steps aside (the import goes on as
 * without it, and the caller's poll finds the module later): a finder
 * after it without find_spec (3.9-3.11's legacy ones), no spec, a loader
 * that is a class or has an exec_module of its own on the object, or one
 * it cannot cover.
 *
 * Both are C types: no frame of ours shows in the program's tracers and
 * debuggers (a pdb step over an import stopped in a Python Watch: bdb's
 * skip of importlib* did not cover it).
 *
 * sys.meta_path is replaced, never changed in place: an import running in
 * another thread walks the list it had (changing it under that walk made
 * it skip a finder: ModuleNotFoundError).
 */
#include "cpython/pycompat.h"

#include "pyafter.h"

#include <unistd.h>

struct watch {
	PyObject_HEAD
	PyObject *name; /* str */
};

/* This thread is in the finders after the watch: not again.  Per thread:
 * the finders may run Python, another thread's import meanwhile is
 * another look (importlib.util.find_spec takes no lock). */
static _Thread_local int finding;

/* A loader's exec_module while the watched module is found and not run. */
struct cover {
	PyObject_HEAD
	PyObject *name, *loader, *run; /* run: the loader's exec_module */
};

static void (*done_fn)(void);
static pid_t owner; /* the process the watch was set in */
static int ready;   /* the types */

/* ---- the cover ------------------------------------------------------- */

/* Both have a __module__, as a Python class gives its instances: code
 * that looks at what is on sys.meta_path (CPython 3.14's own test_bdb
 * filters the finders by it) or at a loader's exec_module expects one,
 * and an instance of a C type has none unless its type says so. */
static PyObject *get_module(PyObject *op, void *unused)
{
	(void)op, (void)unused;
	return PyUnicode_FromString("probing");
}

static PyGetSetDef module_getset[] = {
	{"__module__", get_module, NULL, NULL, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

/* loader.__dict__'s exec_module gone, where it is still c. */
static void uncover(struct cover *c)
{
	PyObject *d = PyObject_GetAttrString(c->loader, "__dict__");

	if (d && PyDict_Check(d) &&
	    PyDict_GetItemString(d, "exec_module") == (PyObject *)c)
		PyDict_DelItemString(d, "exec_module");
	Py_XDECREF(d);
	PyErr_Clear();
}

static PyObject *cover_call(PyObject *op, PyObject *args, PyObject *kw)
{
	static char *names[] = {"module", NULL};
	struct cover *c = (struct cover *)op;
	PyObject *module, *mname, *r, *et, *ev, *etb;
	int same;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O:exec_module", names,
					 &module))
		return NULL;
	Py_INCREF(op); /* uncover drops the loader's reference */
	mname = PyObject_GetAttrString(module, "__name__");
	same = mname && PyUnicode_Check(mname) &&
	       !PyUnicode_Compare(mname, c->name);
	Py_XDECREF(mname);
	PyErr_Clear();
	/* A loader of many modules (a zipimporter) runs the others the
	 * module imports meanwhile: those as they were. */
	r = PyObject_CallOneArg(c->run, module);
	if (same) {
		PyErr_Fetch(&et, &ev, &etb);
		uncover(c);
		PyErr_Restore(et, ev, etb);
		if (r && done_fn && getpid() == owner) {
			done_fn();
			PyErr_Clear(); /* errors of ours never reach the import */
		}
	}
	Py_DECREF(op);
	return r;
}

static int cover_traverse(PyObject *op, visitproc visit, void *arg)
{
	struct cover *c = (struct cover *)op;

	Py_VISIT(c->name);
	Py_VISIT(c->loader);
	Py_VISIT(c->run);
	return 0;
}

static int cover_clear(PyObject *op)
{
	struct cover *c = (struct cover *)op;

	Py_CLEAR(c->name);
	Py_CLEAR(c->loader);
	Py_CLEAR(c->run);
	return 0;
}

static void cover_dealloc(PyObject *op)
{
	PyObject_GC_UnTrack(op);
	cover_clear(op);
	PyObject_GC_Del(op);
}

static PyTypeObject cover_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "probing.Cover",
	.tp_basicsize = sizeof(struct cover),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "a loader's exec_module, covered by Probing until the "
		  "module it loads has run",
	.tp_call = cover_call,
	.tp_getset = module_getset,
	.tp_traverse = cover_traverse,
	.tp_clear = cover_clear,
	.tp_dealloc = cover_dealloc,
};

/* ---- the watch ------------------------------------------------------- */

/* sys.meta_path, a new reference (the program's code that iterating it
 * may run can replace it, and free the one borrowed), or NULL. */
static PyObject *meta_path(void)
{
	return Py_XNewRef(PySys_GetObject("meta_path"));
}

/* spec's loader covered, when it can be. */
static void cover(PyObject *name, PyObject *spec)
{
	PyObject *loader = PyObject_GetAttrString(spec, "loader");
	PyObject *run = loader ? PyObject_GetAttrString(loader, "exec_module")
			       : NULL;
	PyObject *d = run ? PyObject_GetAttrString(loader, "__dict__") : NULL;
	PyObject *key = d ? PyUnicode_FromString("exec_module") : NULL;
	struct cover *c = NULL;
	/* No __dict__ (__slots__): nothing to cover. */
	int own = !key || PySequence_Contains(d, key) != 0;

	PyErr_Clear();
	if (run && !own && !PyType_Check(loader) &&
	    (c = PyObject_GC_New(struct cover, &cover_type))) {
		c->name = Py_NewRef(name);
		c->loader = Py_NewRef(loader);
		c->run = Py_NewRef(run);
		PyObject_GC_Track((PyObject *)c);
		PyObject_SetAttrString(loader, "exec_module", (PyObject *)c);
	}
	Py_XDECREF((PyObject *)c);
	Py_XDECREF(key);
	Py_XDECREF(d);
	Py_XDECREF(run);
	Py_XDECREF(loader);
	PyErr_Clear();
}

/* The spec of the finders after w on sys.meta_path, NULL with an error
 * of theirs, None where it steps aside. */
static PyObject *find(struct watch *w, PyObject *name, PyObject *path,
		      PyObject *target)
{
	PyObject *meta = meta_path();
	PyObject *finders = meta ? PySequence_Tuple(meta) : NULL;
	PyObject *spec = Py_NewRef(Py_None);
	Py_ssize_t n = finders ? PyTuple_GET_SIZE(finders) : 0, at = n;

	Py_XDECREF(meta);
	PyErr_Clear();
	for (Py_ssize_t i = 0; i < n; i++)
		if (PyTuple_GET_ITEM(finders, i) == (PyObject *)w)
			at = i + 1;
	for (Py_ssize_t i = at; i < n; i++) {
		/* Not PyObject_HasAttrString: from 3.13 it hands an error
		 * of the finder's to the program's sys.unraisablehook. */
		PyObject *f = PyObject_GetAttrString(
			PyTuple_GET_ITEM(finders, i), "find_spec");

		if (!f)
			at = n;
		Py_XDECREF(f);
		PyErr_Clear();
	}
	finding = 1;
	for (Py_ssize_t i = at; i < n && spec == Py_None; i++) {
		Py_DECREF(spec);
		spec = PyObject_CallMethod(PyTuple_GET_ITEM(finders, i),
					   "find_spec", "OOO", name, path,
					   target);
		if (!spec)
			break;
	}
	finding = 0;
	Py_XDECREF(finders);
	return spec;
}

static PyObject *watch_find_spec(PyObject *op, PyObject *args, PyObject *kw)
{
	static char *names[] = {"name", "path", "target", NULL};
	struct watch *w = (struct watch *)op;
	PyObject *name, *path = Py_None, *target = Py_None, *spec;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:find_spec", names,
					 &name, &path, &target))
		return NULL;
	if (finding || !PyUnicode_Check(name) ||
	    PyUnicode_Compare(name, w->name))
		Py_RETURN_NONE;
	Py_INCREF(op);
	spec = find(w, name, path, target);
	if (spec && spec != Py_None)
		cover(name, spec);
	Py_DECREF(op);
	return spec;
}

/* The legacy protocol's (3.9-3.11 callers of each finder) and
 * importlib.invalidate_caches's: nothing to find, nothing cached. */
static PyObject *watch_find_module(PyObject *op, PyObject *args)
{
	PyObject *name, *path = Py_None;

	(void)op;
	if (!PyArg_ParseTuple(args, "O|O:find_module", &name, &path))
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *watch_invalidate_caches(PyObject *op, PyObject *unused)
{
	(void)op, (void)unused;
	Py_RETURN_NONE;
}

static PyMethodDef watch_methods[] = {
	{"find_spec", (PyCFunction)(void (*)(void))watch_find_spec,
	 METH_VARARGS | METH_KEYWORDS, NULL},
	{"find_module", watch_find_module, METH_VARARGS, NULL},
	{"invalidate_caches", watch_invalidate_caches, METH_NOARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static void watch_dealloc(PyObject *op)
{
	Py_XDECREF(((struct watch *)op)->name);
	Py_TYPE(op)->tp_free(op);
}

static PyTypeObject watch_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "probing.Watch",
	.tp_basicsize = sizeof(struct watch),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Probing's wait for a module the program imports "
		  "(it finds nothing itself)",
	.tp_methods = watch_methods,
	.tp_getset = module_getset,
	.tp_dealloc = watch_dealloc,
};

/* sys.meta_path without its Watches, first of all a new one of name's
 * when name is not NULL; NULL (an error set) when it cannot be made. */
static PyObject *meta_path_but_watches(PyObject *name)
{
	PyObject *meta = meta_path();
	PyObject *seq = meta ? PySequence_Fast(meta, "sys.meta_path") : NULL;
	PyObject *out = seq ? PyList_New(0) : NULL;

	Py_XDECREF(meta);
	if (out && name) {
		struct watch *w = PyObject_New(struct watch, &watch_type);

		if (w) {
			w->name = name;
			Py_INCREF(name);
		}
		if (!w || PyList_Append(out, (PyObject *)w))
			Py_CLEAR(out);
		Py_XDECREF((PyObject *)w);
	}
	for (Py_ssize_t i = 0; out && i < PySequence_Fast_GET_SIZE(seq); i++) {
		PyObject *f = PySequence_Fast_GET_ITEM(seq, i);

		if (Py_TYPE(f) != &watch_type && PyList_Append(out, f))
			Py_CLEAR(out);
	}
	if (!seq && !PyErr_Occurred())
		PyErr_SetString(PyExc_RuntimeError, "no sys.meta_path");
	Py_XDECREF(seq);
	return out;
}

/* The Watch of name on sys.meta_path: first, or where it was put. */
static int watching(const char *name)
{
	PyObject *meta = meta_path();
	PyObject *seq = meta ? PySequence_Fast(meta, "sys.meta_path") : NULL;
	int found = 0;

	Py_XDECREF(meta);
	for (Py_ssize_t i = 0; seq && i < PySequence_Fast_GET_SIZE(seq); i++) {
		PyObject *f = PySequence_Fast_GET_ITEM(seq, i);

		if (Py_TYPE(f) == &watch_type &&
		    !PyUnicode_CompareWithASCIIString(
			    ((struct watch *)f)->name, name))
			found = 1;
	}
	Py_XDECREF(seq);
	PyErr_Clear();
	return found;
}

int pyafter_watch(const char *name, void (*done)(void))
{
	PyObject *n, *meta = NULL;
	int rc = -1;

	if (!ready && (PyType_Ready(&watch_type) || PyType_Ready(&cover_type)))
		goto out;
	ready = 1;
	done_fn = done;
	owner = getpid();
	/* One there already is kept where it is (a finder the program put
	 * before it stays first: no tug of war). */
	if (watching(name))
		return 0;
	n = PyUnicode_FromString(name);
	meta = n ? meta_path_but_watches(n) : NULL;
	Py_XDECREF(n);
	if (meta && !PySys_SetObject("meta_path", meta))
		rc = 0;
	Py_XDECREF(meta);
out:
	PyErr_Clear();
	return rc;
}

void pyafter_unwatch(void)
{
	PyObject *meta, *now;

	if (!ready)
		return; /* never watched */
	now = meta_path();
	meta = meta_path_but_watches(NULL);
	if (meta && now && PyObject_Length(now) != PyList_GET_SIZE(meta))
		PySys_SetObject("meta_path", meta);
	Py_XDECREF(meta);
	Py_XDECREF(now);
	PyErr_Clear();
}
