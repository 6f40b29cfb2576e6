/*
 * variables: the handle table and the glue to pyviews.  See variables.h.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"
#include <frameobject.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython/cpython.h"
#include "debugger/debugger.h"
#include "gilcall.h"
#include "pygil.h"
#include "pystack.h"
#include "pyviews.h"
#include "variables.h"

#define SLOT_BITS 20
#define EPOCH_MASK 0x3ff

enum handle_mode { H_VALUE, H_LOCALS, H_GLOBALS };

struct handle {
	PyObject *obj;	 /* the value; for H_LOCALS the frame */
	PyObject *frame; /* where expressions about it evaluate, or NULL */
	enum handle_mode mode;
	char *evaluate_name; /* prefix for the children's, or NULL */
};

static struct handle *table; /* GIL */
static size_t nhandles, cap;
static unsigned table_epoch;

void variables_reset(void)
{
	for (size_t i = 0; i < nhandles; i++) {
		Py_XDECREF(table[i].obj);
		Py_XDECREF(table[i].frame);
		free(table[i].evaluate_name);
	}
	free(table);
	table = NULL;
	nhandles = cap = 0;
	table_epoch = debugger_epoch();
}

void variables_reset_stale(void)
{
	if (table_epoch != debugger_epoch())
		variables_reset();
}

static int64_t add(PyObject *obj, PyObject *frame, enum handle_mode mode,
		   const char *evaluate_name)
{
	struct handle *h;

	variables_reset_stale();
	if (nhandles == VARIABLES_HANDLES_MAX)
		return 0;
	if (nhandles == cap) {
		size_t c = cap ? cap * 2 : 256;
		struct handle *t = realloc(table, c * sizeof(*t));

		if (!t)
			return 0;
		table = t;
		cap = c;
	}
	h = &table[nhandles];
	h->evaluate_name = evaluate_name ? strdup(evaluate_name) : NULL;
	if (evaluate_name && !h->evaluate_name)
		return 0;
	h->obj = Py_NewRef(obj);
	h->frame = Py_XNewRef(frame);
	h->mode = mode;
	nhandles++;
	return ((int64_t)(table_epoch & EPOCH_MASK) << SLOT_BITS) |
	       (int64_t)nhandles;
}

static struct handle *lookup(int64_t ref, char *err, size_t errlen)
{
	int64_t slot = ref & ((1 << SLOT_BITS) - 1);
	unsigned ep = (unsigned)(ref >> SLOT_BITS);

	variables_reset_stale();
	if (ref <= 0 || ref >> (SLOT_BITS + 10)) {
		snprintf(err, errlen, "no variables reference %lld",
			 (long long)ref);
		return NULL;
	}
	if (ep != (table_epoch & EPOCH_MASK) || slot < 1 ||
	    (size_t)slot > nhandles) {
		snprintf(err, errlen,
			 "variables reference %lld is stale: the "
			 "program was resumed since",
			 (long long)ref);
		return NULL;
	}
	return &table[slot - 1];
}

int64_t variables_scope_ref(PyFrameObject *frame, int globals)
{
	PyObject *g;
	int64_t ref;

	if (!globals)
		return add((PyObject *)frame, (PyObject *)frame, H_LOCALS,
			   NULL);
	g = cpython.frame.globals(frame);
	if (!g) {
		PyErr_Clear();
		return 0;
	}
	ref = add(g, (PyObject *)frame, H_GLOBALS, NULL);
	Py_DECREF(g);
	return ref;
}

static char *type_name(PyObject *obj)
{
	PyTypeObject *t = Py_TYPE(obj);
	PyObject *q = PyType_GetQualName(t);
	const char *s = q ? PyUnicode_AsUTF8(q) : NULL;
	char *out = strdup(s ? s : _PyType_Name(t));

	if (!s)
		PyErr_Clear();
	Py_XDECREF(q);
	return out;
}

static char *str_of(PyObject *s)
{
	const char *t = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;

	if (!t) {
		PyErr_Clear();
		return NULL;
	}
	return strdup(t);
}

int variables_describe(PyObject *obj, const char *name,
		       const char *evaluate_name, PyFrameObject *frame,
		       struct variable *out)
{
	PyObject *fn = pyviews_get("describe"), *d = NULL;
	int failed = 0, expandable = 0;

	memset(out, 0, sizeof(*out));
	d = fn ? PyObject_CallOneArg(fn, obj) : NULL;
	Py_XDECREF(fn);
	if (d && PyTuple_Check(d) && PyTuple_GET_SIZE(d) == 4) {
		PyObject *text = PyTuple_GET_ITEM(d, 0);

		if (text != Py_None)
			out->value = str_of(text);
		expandable = PyObject_IsTrue(PyTuple_GET_ITEM(d, 1)) == 1;
		out->named = PyLong_AsLongLong(PyTuple_GET_ITEM(d, 2));
		out->indexed = PyLong_AsLongLong(PyTuple_GET_ITEM(d, 3));
		if (out->named < 0 || out->indexed < 0)
			out->named = out->indexed = 0;
	}
	Py_XDECREF(d);
	PyErr_Clear();
	if (!out->value)
		out->value = pystack_repr(obj, VARIABLES_REPR_MAX, &failed);
	out->name = strdup(name ? name : "");
	out->type = type_name(obj);
	if (evaluate_name && strlen(evaluate_name) <= VARIABLES_EXPR_MAX)
		out->evaluate_name = strdup(evaluate_name);
	if (expandable)
		out->ref = add(obj, (PyObject *)frame, H_VALUE,
			       out->evaluate_name);
	if (!out->ref)
		out->named = out->indexed = 0;
	if (!out->value || !out->name || !out->type) {
		variable_release(out);
		return -ENOMEM;
	}
	return 0;
}

/* The namespace object a handle's children come from (new reference). */
static PyObject *parent_of(const struct handle *h, const char **mode)
{
	switch (h->mode) {
	case H_LOCALS:
		*mode = "scope";
		return cpython.frame.locals((PyFrameObject *)h->obj);
	case H_GLOBALS:
		*mode = "globals";
		return Py_NewRef(h->obj);
	default:
		*mode = "";
		return Py_NewRef(h->obj);
	}
}

int variables_list(int64_t ref, enum variables_filter filter, int64_t start,
		   int64_t count, struct variable **out, size_t *n, char *err,
		   size_t errlen)
{
	struct handle *h = lookup(ref, err, errlen);
	PyObject *parent, *fn, *items, *frame, *prefix;
	struct variable *v;
	const char *mode;
	Py_ssize_t k;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!h)
		return -ESTALE;
	if (start < 0 || count < 0 || start > PY_SSIZE_T_MAX / 2 ||
	    count > PY_SSIZE_T_MAX / 2) {
		snprintf(err, errlen, "start and count must be >= 0");
		return -EINVAL;
	}
	parent = parent_of(h, &mode);
	frame = Py_XNewRef(h->frame);
	prefix = h->evaluate_name ? PyUnicode_FromString(h->evaluate_name)
				  : Py_NewRef(Py_None);
	if (filter != VARIABLES_ALL && parent && h->mode == H_VALUE) {
		/* Only containers have indexed children; the rest named. */
		PyObject *dfn = pyviews_get("describe"), *d;
		int indexed = 0;

		d = dfn ? PyObject_CallOneArg(dfn, parent) : NULL;
		Py_XDECREF(dfn);
		if (d && PyTuple_Check(d) && PyTuple_GET_SIZE(d) == 4)
			indexed = PyObject_IsTrue(PyTuple_GET_ITEM(d, 3)) == 1;
		Py_XDECREF(d);
		PyErr_Clear();
		if ((filter == VARIABLES_NAMED) == indexed)
			goto out; /* none of that kind */
	}
	fn = parent && prefix ? pyviews_get("children") : NULL;
	items = fn ? PyObject_CallFunction(fn, "OsnnO", parent, mode,
					   (Py_ssize_t)start, (Py_ssize_t)count,
					   prefix)
		   : NULL;
	Py_XDECREF(fn);
	if (!items || !PyList_Check(items)) {
		Py_XDECREF(items);
		rc = gilcall_fail_from_exc(-EIO, "cannot list the children",
					   err, errlen);
		goto out;
	}
	k = PyList_GET_SIZE(items);
	v = calloc(k ? (size_t)k : 1, sizeof(*v));
	if (!v) {
		Py_DECREF(items);
		rc = -ENOMEM;
		goto out;
	}
	for (Py_ssize_t i = 0; i < k; i++) {
		PyObject *t = PyList_GET_ITEM(items, i);
		char *name, *ev = NULL;

		if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3)
			continue;
		name = str_of(PyTuple_GET_ITEM(t, 0));
		if (PyTuple_GET_ITEM(t, 2) != Py_None)
			ev = str_of(PyTuple_GET_ITEM(t, 2));
		if (name &&
		    variables_describe(PyTuple_GET_ITEM(t, 1), name, ev,
				       (PyFrameObject *)frame, &v[*n]) == 0)
			(*n)++;
		free(name);
		free(ev);
		if (pygil_should_stop())
			break;
	}
	Py_DECREF(items);
	*out = v;
out:
	Py_XDECREF(parent);
	Py_XDECREF(frame);
	Py_XDECREF(prefix);
	PyErr_Clear();
	return rc;
}

/* Evaluates expr where handle h's frame (or __main__) evaluates. */
static PyObject *eval_for(const struct handle *h, const char *expr)
{
	PyObject *g, *l, *code, *v;

	if (h->frame) {
		g = cpython.frame.globals((PyFrameObject *)h->frame);
		l = cpython.frame.locals((PyFrameObject *)h->frame);
	} else {
		PyObject *m = PyImport_AddModule("__main__");

		g = m ? Py_NewRef(PyModule_GetDict(m)) : NULL;
		l = Py_XNewRef(g);
	}
	if (!g || !l) {
		Py_XDECREF(g);
		Py_XDECREF(l);
		return NULL;
	}
	code = Py_CompileString(expr, "<setVariable>", Py_eval_input);
	v = code ? PyEval_EvalCode(code, g, l) : NULL;
	Py_XDECREF(code);
	Py_DECREF(g);
	Py_DECREF(l);
	return v;
}

int variables_set(int64_t ref, const char *name, const char *expr,
		  struct variable *out, char *err, size_t errlen)
{
	struct handle *h = lookup(ref, err, errlen);
	PyObject *parent = NULL, *fn = NULL, *value = NULL, *r = NULL;
	PyObject *frame = NULL;
	const char *mode;
	char *ev = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!h)
		return -ESTALE;
	frame = Py_XNewRef(h->frame);
	value = eval_for(h, expr);
	if (!value) {
		rc = gilcall_fail_from_exc(-EINVAL, "the value", err, errlen);
		goto out;
	}
	/* The handle may be gone if the expression let a resume happen. */
	h = lookup(ref, err, errlen);
	if (!h) {
		rc = -ESTALE;
		goto out;
	}
	parent = parent_of(h, &mode);
	fn = parent ? pyviews_get("set_child") : NULL;
	r = fn ? PyObject_CallFunction(fn, "OssO", parent, mode, name, value)
	       : NULL;
	if (!r) {
		rc = gilcall_fail_from_exc(-EINVAL, "cannot set it", err,
					   errlen);
		goto out;
	}
	if (h->mode == H_LOCALS) {
		(void)cpython.frame.locals_write((PyFrameObject *)h->obj,
						 parent);
		PyErr_Clear();
	}
	if (h->mode != H_VALUE && strlen(name) <= VARIABLES_EXPR_MAX)
		ev = strdup(name);
	rc = variables_describe(value, name, ev, (PyFrameObject *)frame, out);
out:
	free(ev);
	Py_XDECREF(r);
	Py_XDECREF(fn);
	Py_XDECREF(parent);
	Py_XDECREF(value);
	Py_XDECREF(frame);
	PyErr_Clear();
	return rc;
}

void variable_release(struct variable *v)
{
	free(v->name);
	free(v->value);
	free(v->type);
	free(v->evaluate_name);
	memset(v, 0, sizeof(*v));
}

void variables_release(struct variable *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		variable_release(&v[i]);
	free(v);
}
