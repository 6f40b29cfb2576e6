/*
 * pymods: modules from sys.modules.  See pymods.h.
 */
#include "pymods.h"

#include <stdio.h>
#include <string.h>

/* sys.modules[name], borrowed, when it is a module; else NULL. */
static PyObject *entry(const char *name)
{
	PyObject *mods = PyImport_GetModuleDict(); /* borrowed */
	PyObject *m = PyDict_Check(mods) ? PyDict_GetItemString(mods, name)
					 : NULL;

	return m && PyModule_Check(m) ? m : NULL;
}

/* Are m's attributes looked up as a module's are?  Not a lazy module's
 * (importlib.util.LazyLoader's): reading any attribute of it runs its
 * import, the agent's reads included. */
static int plain(PyObject *m)
{
	return Py_TYPE(m)->tp_getattro == PyModule_Type.tp_getattro;
}

PyObject *pymods_get(const char *name)
{
	PyObject *e = entry(name), *n, *m;

	if (!e || !plain(e))
		return NULL;
	n = PyUnicode_FromString(name);
	m = n ? PyImport_GetModule(n) : NULL;
	Py_XDECREF(n);
	PyErr_Clear();
	/* The wait for another thread's import lets the GIL go: what is
	 * there now is looked at again. */
	if (m && (!PyModule_Check(m) || !plain(m)))
		Py_CLEAR(m);
	return m;
}

int pymods_ready(const char *name)
{
	PyObject *m = pymods_get(name), *spec, *init;
	int ok = 0;

	if (m) {
		spec = PyObject_GetAttrString(m, "__spec__");
		init = spec && spec != Py_None
			       ? PyObject_GetAttrString(spec, "_initializing")
			       : NULL;
		ok = !init || !PyObject_IsTrue(init);
		Py_XDECREF(init);
		Py_XDECREF(spec);
	}
	PyErr_Clear();
	Py_XDECREF(m);
	return ok;
}

int pymods_importing(const char *name)
{
	PyObject *m = entry(name), *spec, *init = NULL;
	int yes;

	if (m && !plain(m))
		return 1; /* lazy: the program's import still to come */
	/* From the module's dict: no attribute lookup of the module's. */
	spec = m ? Py_XNewRef(PyDict_GetItemString(PyModule_GetDict(m),
						   "__spec__"))
		 : NULL;
	if (spec && spec != Py_None)
		init = PyObject_GetAttrString(spec, "_initializing");
	yes = init && PyObject_IsTrue(init) == 1;
	Py_XDECREF(init);
	Py_XDECREF(spec);
	PyErr_Clear();
	return yes;
}

PyObject *pymods_attr(const char *module, const char *path)
{
	PyObject *e = entry(module), *o, *next;
	char part[64];

	/* A lazy module's first step from its dict, which has what its
	 * code made once that code has run (torch's, as its import ends,
	 * in the watch's call: pyafter.h), and nothing before. */
	if (e && !plain(e) && *path) {
		size_t n = strcspn(path, ".");

		snprintf(part, sizeof(part), "%.*s", (int)n, path);
		o = Py_XNewRef(PyDict_GetItemString(PyModule_GetDict(e), part));
		path += n + (path[n] == '.');
	} else {
		o = pymods_get(module);
	}
	while (o && *path) {
		size_t n = strcspn(path, ".");
		snprintf(part, sizeof(part), "%.*s", (int)n, path);
		next = PyObject_GetAttrString(o, part);
		Py_DECREF(o);
		o = next;
		path += n + (path[n] == '.');
	}
	if (!o)
		PyErr_Clear();
	return o;
}
