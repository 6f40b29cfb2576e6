/*
 * excepthooks: see excepthooks.h.  The state is guarded by the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include "excepthooks.h"

static excepthooks_fn callback;
static PyObject *saved_sys_hook, *saved_thread_hook; /* found there */
static PyObject *our_sys_hook, *our_thread_hook;

/* sys.excepthook(type, value, tb): stop, then the hook found before. */
static PyObject *sys_hook(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	PyObject *prev, *r;

	(void)self;
	if (n == 3 && callback)
		callback(args[1], args[2]);
	/* Read after the callback: it may let go of the GIL, and the hooks
	 * may be removed meanwhile. */
	prev = saved_sys_hook ? saved_sys_hook
			      : PySys_GetObject("__excepthook__");
	if (!prev)
		Py_RETURN_NONE;
	Py_INCREF(prev);
	r = PyObject_Vectorcall(prev, args, (size_t)n, NULL);
	Py_DECREF(prev);
	return r;
}

/* threading.excepthook(args): the same for threads. */
static PyObject *thread_hook(PyObject *self, PyObject *a)
{
	PyObject *value = PyObject_GetAttrString(a, "exc_value");
	PyObject *tb =
		value ? PyObject_GetAttrString(a, "exc_traceback") : NULL;
	PyObject *prev, *r;

	(void)self;
	if (value && tb && callback)
		callback(value, tb);
	PyErr_Clear();
	Py_XDECREF(value);
	Py_XDECREF(tb);
	prev = saved_thread_hook;
	if (!prev) {
		/* The default: threading.__excepthook__ (3.10 on), which is
		 * _thread._excepthook (3.8 on). */
		PyObject *nm = PyUnicode_FromString("_thread");
		PyObject *th = nm ? PyImport_GetModule(nm) : NULL;

		Py_XDECREF(nm);
		prev = th ? PyObject_GetAttrString(th, "_excepthook") : NULL;
		Py_XDECREF(th);
		if (!prev) {
			PyErr_Clear();
			Py_RETURN_NONE;
		}
	} else {
		Py_INCREF(prev);
	}
	r = PyObject_CallOneArg(prev, a);
	Py_DECREF(prev);
	return r;
}

static PyMethodDef sys_hook_def = {"probing_excepthook",
				   (PyCFunction)(void (*)(void))sys_hook,
				   METH_FASTCALL, NULL};
static PyMethodDef thread_hook_def = {"probing_thread_excepthook", thread_hook,
				      METH_O, NULL};

void excepthooks_set(excepthooks_fn fn)
{
	PyObject *name = PyUnicode_FromString("threading");
	PyObject *th = name ? PyImport_GetModule(name) : NULL;
	PyObject *cur;
	int on = fn != NULL;

	Py_XDECREF(name);
	PyErr_Clear();
	callback = fn;
	if (on) {
		if (!our_sys_hook)
			our_sys_hook = PyCFunction_New(&sys_hook_def, NULL);
		if (!our_thread_hook)
			our_thread_hook =
				PyCFunction_New(&thread_hook_def, NULL);
		cur = PySys_GetObject("excepthook");
		if (our_sys_hook && cur != our_sys_hook) {
			Py_XSETREF(saved_sys_hook, Py_XNewRef(cur));
			PySys_SetObject("excepthook", our_sys_hook);
		}
		cur = th ? PyObject_GetAttrString(th, "excepthook") : NULL;
		if (th && our_thread_hook && cur && cur != our_thread_hook) {
			Py_XSETREF(saved_thread_hook, Py_NewRef(cur));
			PyObject_SetAttrString(th, "excepthook",
					       our_thread_hook);
		}
		Py_XDECREF(cur);
	} else {
		cur = PySys_GetObject("excepthook");
		if (cur && cur == our_sys_hook && saved_sys_hook)
			PySys_SetObject("excepthook", saved_sys_hook);
		Py_CLEAR(saved_sys_hook);
		cur = th ? PyObject_GetAttrString(th, "excepthook") : NULL;
		if (cur && cur == our_thread_hook && saved_thread_hook)
			PyObject_SetAttrString(th, "excepthook",
					       saved_thread_hook);
		Py_XDECREF(cur);
		Py_CLEAR(saved_thread_hook);
	}
	PyErr_Clear();
	Py_XDECREF(th);
}
