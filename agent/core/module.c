/*
 * module: the Python face of the agent, the extension module
 * probing._probing (libprobing-cpXY.so itself, loaded by agent/pkg/probing).
 * Importing it runs the library constructor, which starts the agent;
 * init() waits for it, applies settings and listens where asked.
 */
#include "cpython/pycompat.h"
#include <errno.h>

#include "agent.h"
#include "app/app.h"
#include "auth.h"
#include "config.h"
#include "cpython/cpython.h"

#define EXPORT __attribute__((visibility("default")))

static int apply_settings(PyObject *settings)
{
	PyObject *key, *value, *text;
	Py_ssize_t pos = 0;
	char err[512];

	if (!settings || settings == Py_None)
		return 0;
	if (!PyDict_Check(settings)) {
		PyErr_SetString(PyExc_TypeError, "settings must be a dict");
		return -1;
	}
	/* All or nothing: check them all first. */
	for (int pass = 0; pass < 2; pass++) {
		pos = 0;
		while (PyDict_Next(settings, &pos, &key, &value)) {
			const char *k, *v;
			if (!PyUnicode_Check(key)) {
				PyErr_SetString(PyExc_TypeError,
						"setting names must be str");
				return -1;
			}
			text = PyBool_Check(value)
				? PyUnicode_FromString(value == Py_True ? "on"
									: "off")
				: PyObject_Str(value);
			if (!text)
				return -1;
			k = PyUnicode_AsUTF8(key);
			v = PyUnicode_AsUTF8(text);
			int rc = !k || !v ? -1
				 : pass == 0 ? config_check(k, v, err, sizeof(err))
					     : config_set(k, v, err, sizeof(err));
			Py_DECREF(text);
			if (rc) {
				if (!PyErr_Occurred())
					PyErr_SetString(PyExc_ValueError, err);
				return -1;
			}
		}
	}
	return 0;
}

static PyObject *py_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"listen", "settings", "timeout", "token",
				 NULL};
	const char *listen = NULL, *token = NULL;
	PyObject *settings = NULL;
	double timeout = 5.0;
	char err[1024], canon[256], addrs[1024];
	int rc;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|zOdz", kwlist, &listen,
					 &settings, &timeout, &token))
		return NULL;
	if (apply_settings(settings))
		return NULL;
	agent_python_runs();
	rc = agent_start();
	if (rc) {
		errno = -rc;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	Py_BEGIN_ALLOW_THREADS
	rc = agent_wait_ready((int)(timeout * 1000), err, sizeof(err));
	Py_END_ALLOW_THREADS
	if (rc == -EALREADY)
		Py_RETURN_NONE;  /* another copy serves: starting twice is a no-op */
	if (rc) {
		PyErr_Format(PyExc_RuntimeError, "probing: %s", err);
		return NULL;
	}
	agent_register_atexit();
	/* After the start: the agent reads PROBING_TOKEN when it starts, and
	 * the program's own word comes later, so it wins. */
	if (token && auth_token_set(token, "probing.init", err, sizeof(err))) {
		PyErr_Format(PyExc_ValueError, "probing: token: %s", err);
		return NULL;
	}
	if (listen && *listen) {
		Py_BEGIN_ALLOW_THREADS
		rc = agent_set_listen(listen, canon, sizeof(canon), err,
				      sizeof(err));
		Py_END_ALLOW_THREADS
		if (rc) {
			PyErr_Format(PyExc_OSError, "probing: %s", err);
			return NULL;
		}
	}
	agent_addresses(addrs, sizeof(addrs));
	return PyUnicode_FromString(addrs);
}

static PyObject *py_address(PyObject *self, PyObject *unused)
{
	char addrs[1024];

	(void)self, (void)unused;
	agent_addresses(addrs, sizeof(addrs));
	if (!addrs[0])
		Py_RETURN_NONE;
	return PyUnicode_FromString(addrs);
}

static PyMethodDef methods[] = {
	{"init", (PyCFunction)(void (*)(void))py_init,
	 METH_VARARGS | METH_KEYWORDS,
	 "init(listen=None, settings=None, timeout=5.0, token=None) -> addresses\n"
	 "Starts the agent (a no-op when it runs) and waits for it."},
	{"address", py_address, METH_NOARGS,
	 "The agent's addresses, comma-separated, or None."},
	{"_app_define", app_py_define, METH_VARARGS,
	 "_app_define(name, ((column, type), ...), doc=None) -> id\n"
	 "Defines app.<name> (agent/pkg/probing/app.py)."},
	{"_app_append", app_py_append, METH_VARARGS,
	 "_app_append(id, (value, ...))\nAppends a row to a table of app."},
	{"_app_stats", app_py_stats, METH_NOARGS,
	 "Rows appended, dropped (the ring full), cut, written; errors."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
	PyModuleDef_HEAD_INIT,
	"_probing",
	"The Probing agent (libprobing-cpXY.so).",
	-1,
	methods,
	NULL,
	NULL,
	NULL,
	NULL,
};

EXPORT PyObject *PyInit__probing(void)
{
	char err[256];
	PyObject *m;

	if (cpython.check(err, sizeof(err))) {
		PyErr_SetString(PyExc_ImportError, err);
		return NULL;
	}
	m = PyModule_Create(&module);
	if (m)
		PyModule_AddStringConstant(m, "__version__", PROBING_VERSION);
	/* Here, with the GIL, as the program imports us: the agent's own
	 * thread registers it too, but only once it has the GIL, which a
	 * short program may never let it have before it exits. */
	if (m)
		agent_register_atexit();
	return m;
}
