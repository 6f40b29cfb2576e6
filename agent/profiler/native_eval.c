/*
 * native_eval: a Python function calls a C function of ours, which looks
 * at the native frames in between to find the evaluation loop's code
 * (native.h, native_learn_eval_here).  The Python half of it: native.c
 * is pure.
 */
#include "native.h"

#include <Python.h>

#include "cpython/pycompat.h"

static PyObject *probe(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	native_learn_eval_here();
	Py_RETURN_NONE;
}

static PyMethodDef probe_def = {"probe", probe, METH_NOARGS, NULL};

void native_learn_eval(void)
{
	static int done;
	PyObject *g, *fn = NULL, *p = NULL, *r = NULL;

	if (done)
		return;
	done = 1;
	if (native_eval_symbol_whole())
		return;
	g = PyDict_New();
	if (g && PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins()))
		Py_CLEAR(g);
	fn = g ? PyRun_String("lambda probe: probe()", Py_eval_input, g, g)
	       : NULL;
	p = fn ? PyCFunction_New(&probe_def, NULL) : NULL;
	r = p ? PyObject_CallOneArg(fn, p) : NULL;
	Py_XDECREF(r);
	Py_XDECREF(p);
	Py_XDECREF(fn);
	Py_XDECREF(g);
	PyErr_Clear();
}
