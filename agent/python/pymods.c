/*
 * pymods: modules from sys.modules.  See pymods.h.
 */
#include "pymods.h"

#include <stdio.h>
#include <string.h>

PyObject *pymods_get(const char *name)
{
	PyObject *n = PyUnicode_FromString(name), *m;

	m = n ? PyImport_GetModule(n) : NULL;
	Py_XDECREF(n);
	if (!m)
		PyErr_Clear();
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

PyObject *pymods_attr(const char *module, const char *path)
{
	PyObject *o = pymods_get(module), *next;
	char part[64];

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
