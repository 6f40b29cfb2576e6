/*
 * forkwarn: see forkwarn.h.  The state is guarded by the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include "forkwarn.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/thread.h"

static int registered;
static PyObject *our_filter; /* the tuple in the filters (a reference) */

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
	/* After the command name (field 2), which may hold spaces and
	 * parentheses: each space starts the next field. */
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

/* The filter's message matcher: true for os.fork()'s warning about this
 * process while the program's own threads are one.  Never raises. */
static PyObject *match(PyObject *self, PyObject *text)
{
	char want[96];
	const char *s;
	int threads;

	(void)self;
	snprintf(want, sizeof(want),
		 "This process (pid=%d) is multi-threaded, use of ",
		 (int)getpid());
	s = PyUnicode_Check(text) ? PyUnicode_AsUTF8(text) : NULL;
	if (!s) {
		PyErr_Clear();
		Py_RETURN_FALSE;
	}
	if (strncmp(s, want, strlen(want)) != 0)
		Py_RETURN_FALSE;
	threads = kernel_threads();
	if (threads < 0 || threads - agent_threads_live() > 1)
		Py_RETURN_FALSE;
	Py_RETURN_TRUE;
}

static PyMethodDef match_def = {"match", match, METH_O, NULL};

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

/*
 * Our filter first in the filters, unless it is there already.  The
 * warnings machinery is not told that its filters changed: that would
 * reset every module's registry of warnings shown, and the program's
 * "once" and "default" warnings would show again.  Not told, it still
 * reads the filters afresh for any message not shown before — as the
 * fork warning, which names the pid, is.
 */
static void ensure_filter(void)
{
	PyObject *warnings = PyImport_ImportModule("warnings");
	PyObject *l = warnings ? filters_of(warnings) : NULL;

	for (Py_ssize_t i = 0; l && i < PyList_GET_SIZE(l); i++)
		if (PyList_GET_ITEM(l, i) == our_filter)
			goto out;
	if (l)
		(void)PyList_Insert(l, 0, our_filter);
out:
	Py_XDECREF(l);
	Py_XDECREF(warnings);
	PyErr_Clear();
}

static PyObject *before_fork(PyObject *self, PyObject *unused)
{
	(void)self, (void)unused;
	if (our_filter)
		ensure_filter();
	Py_RETURN_NONE;
}

static PyMethodDef before_def = {"_probing_before_fork", before_fork,
				 METH_NOARGS, NULL};

/* Whether this interpreter warns at fork (3.12 on): asked at run time,
 * the code above the version layer being version-blind. */
static int warns_at_fork(void)
{
	PyObject *v = PySys_GetObject("version_info"); /* borrowed */
	PyObject *want = Py_BuildValue("(ii)", 3, 12);
	int r = v && want ? PyObject_RichCompareBool(v, want, Py_GE) : 0;

	Py_XDECREF(want);
	PyErr_Clear();
	return r == 1;
}

void forkwarn_register(void)
{
	PyObject *types = NULL, *ns = NULL, *m = NULL, *os = NULL, *b = NULL,
		 *r = NULL;

	if (registered || !warns_at_fork())
		return;
	registered = 1;
	/* A message matcher as the filters take one: an object with a
	 * match() method (a compiled pattern, usually). */
	types = PyImport_ImportModule("types");
	m = PyCFunction_New(&match_def, NULL);
	ns = types && m ? PyObject_CallMethod(types, "SimpleNamespace", NULL)
			: NULL;
	if (!ns || PyObject_SetAttrString(ns, "match", m) < 0 ||
	    PyObject_SetAttrString(ns, "probing", Py_True) < 0)
		goto out;
	our_filter = Py_BuildValue("(sOOOi)", "ignore", ns,
				   PyExc_DeprecationWarning, Py_None, 0);
	if (!our_filter)
		goto out;
	ensure_filter();
	os = PyImport_ImportModule("os");
	b = PyCFunction_New(&before_def, NULL);
	if (os && b) {
		PyObject *reg = PyObject_GetAttrString(os, "register_at_fork");
		PyObject *kw = reg ? Py_BuildValue("{sO}", "before", b) : NULL;
		PyObject *args = kw ? PyTuple_New(0) : NULL;

		r = args ? PyObject_Call(reg, args, kw) : NULL;
		Py_XDECREF(args);
		Py_XDECREF(kw);
		Py_XDECREF(reg);
	}
out:
	Py_XDECREF(r);
	Py_XDECREF(b);
	Py_XDECREF(os);
	Py_XDECREF(ns);
	Py_XDECREF(m);
	Py_XDECREF(types);
	PyErr_Clear();
}
