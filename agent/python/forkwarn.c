/*
 * forkwarn: see forkwarn.h.  The state is guarded by the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include "forkwarn.h"

#include <stdio.h>
#include <unistd.h>

#include "core/thread.h"

#if PY_VERSION_HEX >= 0x030C0000

static int registered;
static PyObject *our_filter; /* the entry put in the filters, or NULL */

/* The threads of the process as os.fork()'s warning counts them (the
 * 20th field of /proc/self/stat), or -1. */
static int kernel_threads(void)
{
	char buf[1024], *p;
	FILE *f = fopen("/proc/self/stat", "re");
	size_t n;
	int field = 2, threads = -1;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* After the command name, which may hold spaces and parentheses. */
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	for (p++; *p && field < 20; p++)
		if (*p == ' ')
			field++;
	if (field == 20)
		sscanf(p, "%d", &threads);
	return threads;
}

/* The warnings module's list of filters (3.14 may keep them per
 * context): a new reference, or NULL. */
static PyObject *filters_of(PyObject *warnings)
{
	PyObject *l;

	if (PyObject_HasAttrString(warnings, "_get_filters"))
		l = PyObject_CallMethod(warnings, "_get_filters", NULL);
	else
		l = PyObject_GetAttrString(warnings, "filters");
	if (l && !PyList_Check(l))
		Py_CLEAR(l);
	return l;
}

static PyObject *after_fork(PyObject *self, PyObject *unused);

static PyObject *before_fork(PyObject *self, PyObject *unused)
{
	PyObject *warnings = NULL, *msg = NULL, *r = NULL, *l = NULL;
	int threads = kernel_threads();

	(void)self, (void)unused;
	/* The filter of the fork before, still there from 3.13 on. */
	Py_XDECREF(after_fork(NULL, NULL));
	/* Only when the program's own threads are one: the warning would
	 * not be printed without us. */
	if (threads < 0 || threads - agent_threads_live() > 1)
		Py_RETURN_NONE;
	warnings = PyImport_ImportModule("warnings");
	msg = warnings ? PyUnicode_FromFormat(
				 "This process \\(pid=%d\\) is multi-threaded, "
				 "use of [a-z]+\\(\\) may lead to deadlocks in "
				 "the child\\.$",
				 (int)getpid())
		       : NULL;
	if (msg)
		r = PyObject_CallMethod(warnings, "filterwarnings", "sOO",
					"ignore", msg,
					PyExc_DeprecationWarning);
	l = r ? filters_of(warnings) : NULL;
	if (l && PyList_GET_SIZE(l) > 0)
		our_filter = Py_NewRef(PyList_GET_ITEM(l, 0));
	Py_XDECREF(l);
	Py_XDECREF(r);
	Py_XDECREF(msg);
	Py_XDECREF(warnings);
	PyErr_Clear();
	Py_RETURN_NONE;
}

/* Our filter out: after the fork in the child, and in the parent up to
 * 3.12 (from 3.13 the parent warns after its after-fork hooks, so there
 * the filter stays until the next fork's before_fork, which takes it out
 * first: nothing else says that message). */
static PyObject *after_fork(PyObject *self, PyObject *unused)
{
	PyObject *warnings, *l = NULL, *r = NULL;

	(void)self, (void)unused;
	if (!our_filter)
		Py_RETURN_NONE;
	warnings = PyImport_ImportModule("warnings");
	l = warnings ? filters_of(warnings) : NULL;
	for (Py_ssize_t i = 0; l && i < PyList_GET_SIZE(l); i++) {
		if (PyList_GET_ITEM(l, i) != our_filter)
			continue;
		if (PySequence_DelItem(l, i) == 0) {
			/* Tell the warnings machinery its filters changed. */
			const char *fn =
				PyObject_HasAttrString(warnings,
						       "_filters_mutated")
					? "_filters_mutated"
					: "_filters_mutated_lock_held";

			if (PyObject_HasAttrString(warnings, fn))
				r = PyObject_CallMethod(warnings, fn, NULL);
		}
		break;
	}
	Py_XDECREF(r);
	Py_XDECREF(l);
	Py_XDECREF(warnings);
	Py_CLEAR(our_filter);
	PyErr_Clear();
	Py_RETURN_NONE;
}

static PyMethodDef before_def = {"_probing_before_fork", before_fork,
				 METH_NOARGS, NULL};
static PyMethodDef after_def = {"_probing_after_fork", after_fork,
				METH_NOARGS, NULL};

void forkwarn_register(void)
{
	PyObject *os = NULL, *reg = NULL, *b = NULL, *a = NULL, *kw = NULL,
		 *args = NULL, *r = NULL;

	if (registered)
		return;
	os = PyImport_ImportModule("os");
	reg = os ? PyObject_GetAttrString(os, "register_at_fork") : NULL;
	b = PyCFunction_New(&before_def, NULL);
	a = PyCFunction_New(&after_def, NULL);
	kw = PyDict_New();
	args = PyTuple_New(0);
	if (reg && b && a && kw && args &&
	    PyDict_SetItemString(kw, "before", b) == 0 &&
#if PY_VERSION_HEX < 0x030D0000
	    PyDict_SetItemString(kw, "after_in_parent", a) == 0 &&
#endif
	    PyDict_SetItemString(kw, "after_in_child", a) == 0)
		r = PyObject_Call(reg, args, kw);
	registered = r != NULL;
	Py_XDECREF(r);
	Py_XDECREF(args);
	Py_XDECREF(kw);
	Py_XDECREF(a);
	Py_XDECREF(b);
	Py_XDECREF(reg);
	Py_XDECREF(os);
	PyErr_Clear();
}

#else

void forkwarn_register(void)
{
}

#endif
