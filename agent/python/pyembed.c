/*
 * pyembed: embedded Python sources as private modules.  See pyembed.h.
 */
#include "cpython/pycompat.h"

#include "pyembed.h"

PyObject *pyembed_load(const char *name, const char *src, const char *file)
{
	PyObject *mod, *dict, *code, *res;

	mod = PyModule_New(name);
	if (!mod)
		return NULL;
	dict = PyModule_GetDict(mod);
	if (PyDict_SetItemString(dict, "__builtins__", PyEval_GetBuiltins()) <
	    0) {
		Py_DECREF(mod);
		return NULL;
	}
	code = Py_CompileString(src, file, Py_file_input);
	res = code ? PyEval_EvalCode(code, dict, dict) : NULL;
	Py_XDECREF(code);
	if (!res) {
		Py_DECREF(mod);
		return NULL;
	}
	Py_DECREF(res);
	return mod;
}
