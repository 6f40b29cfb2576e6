/*
 * pyviews: loads the embedded agent/python/pyviews.py.  See pyviews.h.
 */
#include "cpython/pycompat.h"

#include "pyviews.h"
#include "pyviews_src.h"

static PyObject *module; /* GIL; kept for the life of the process */

static PyObject *load(void)
{
	PyObject *mod, *dict, *code, *res;

	mod = PyModule_New("probing_views");
	if (!mod)
		return NULL;
	dict = PyModule_GetDict(mod);
	if (PyDict_SetItemString(dict, "__builtins__", PyEval_GetBuiltins()) <
	    0) {
		Py_DECREF(mod);
		return NULL;
	}
	code = Py_CompileString(pyviews_src, "<probing pyviews>",
				Py_file_input);
	res = code ? PyEval_EvalCode(code, dict, dict) : NULL;
	Py_XDECREF(code);
	if (!res) {
		Py_DECREF(mod);
		return NULL;
	}
	Py_DECREF(res);
	return mod;
}

PyObject *pyviews_get(const char *name)
{
	if (!module && !(module = load()))
		return NULL;
	return PyObject_GetAttrString(module, name);
}
