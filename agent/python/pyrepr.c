/*
 * pyrepr: reprs whose work is bounded.  See pyrepr.h.
 *
 * The text is gathered as a list of str pieces with a budget of
 * characters; once the budget is spent every writer returns at once, so
 * no container is walked further than what is shown.  Separators count
 * against the budget too: a container of items whose reprs are empty
 * still ends after max / 2 of them.
 */
#include "pyrepr.h"

#include "cpython/pycompat.h"
#include <string.h>

struct out {
	PyObject *parts; /* list of str */
	Py_ssize_t left; /* characters still allowed */
	int cut;	 /* the budget ran out: the text ends in "..." */
};

static int walk(struct out *o, PyObject *obj, int depth);

/* Appends s (a str), or as much of it as the budget allows.  0 or -1. */
static int put(struct out *o, PyObject *s)
{
	Py_ssize_t n = PyUnicode_GET_LENGTH(s);
	PyObject *head;
	int rc;

	if (o->cut)
		return 0;
	if (n <= o->left) {
		o->left -= n;
		return PyList_Append(o->parts, s);
	}
	head = PyUnicode_Substring(s, 0, o->left);
	if (!head)
		return -1;
	rc = PyList_Append(o->parts, head);
	Py_DECREF(head);
	o->left = 0;
	o->cut = 1;
	return rc;
}

static int put_text(struct out *o, const char *ascii)
{
	PyObject *s;
	int rc;

	if (o->cut)
		return 0;
	s = PyUnicode_FromString(ascii);
	if (!s)
		return -1;
	rc = put(o, s);
	Py_DECREF(s);
	return rc;
}

/* Appends repr(obj): obj's own code.  0 or -1. */
static int put_repr(struct out *o, PyObject *obj)
{
	PyObject *r = PyObject_Repr(obj);
	int rc;

	if (!r)
		return -1;
	rc = put(o, r);
	Py_DECREF(r);
	return rc;
}

/* The name CPython's reprs give a type: tp_name after its last dot. */
static const char *short_name(PyTypeObject *tp)
{
	const char *dot = strrchr(tp->tp_name, '.');

	return dot ? dot + 1 : tp->tp_name;
}

/* list and tuple: items read one at a time (a repr may change the list). */
static int sequence(struct out *o, PyObject *seq, int depth, int is_tuple)
{
	const char *open = is_tuple ? "(" : "[", *close = is_tuple ? ")" : "]";
	Py_ssize_t i, n;
	int rc;

	n = is_tuple ? PyTuple_GET_SIZE(seq) : PyList_GET_SIZE(seq);
	if (n == 0)
		return put_text(o, is_tuple ? "()" : "[]");
	if (depth >= PYREPR_DEPTH)
		return put_text(o, is_tuple ? "(...)" : "[...]");
	rc = Py_ReprEnter(seq);
	if (rc)
		return rc < 0 ? -1 : put_text(o, is_tuple ? "(...)" : "[...]");
	rc = put_text(o, open);
	for (i = 0; !rc && !o->cut; i++) {
		PyObject *item;

		n = is_tuple ? PyTuple_GET_SIZE(seq) : PyList_GET_SIZE(seq);
		if (i >= n)
			break;
		item = is_tuple ? PyTuple_GET_ITEM(seq, i)
				: PyList_GET_ITEM(seq, i);
		Py_INCREF(item);
		rc = i ? put_text(o, ", ") : 0;
		if (!rc)
			rc = walk(o, item, depth + 1);
		Py_DECREF(item);
	}
	if (!rc && is_tuple && n == 1)
		rc = put_text(o, ",");
	if (!rc)
		rc = put_text(o, close);
	Py_ReprLeave(seq);
	return rc;
}

static int dict(struct out *o, PyObject *d, int depth)
{
	PyObject *k, *v;
	Py_ssize_t pos = 0;
	int rc, first = 1;

	if (PyDict_GET_SIZE(d) == 0)
		return put_text(o, "{}");
	if (depth >= PYREPR_DEPTH)
		return put_text(o, "{...}");
	rc = Py_ReprEnter(d);
	if (rc)
		return rc < 0 ? -1 : put_text(o, "{...}");
	rc = put_text(o, "{");
	while (!rc && !o->cut && PyDict_Next(d, &pos, &k, &v)) {
		/* A repr may change the dict: hold what is shown. */
		Py_INCREF(k);
		Py_INCREF(v);
		rc = first ? 0 : put_text(o, ", ");
		first = 0;
		if (!rc)
			rc = walk(o, k, depth + 1);
		if (!rc)
			rc = put_text(o, ": ");
		if (!rc)
			rc = walk(o, v, depth + 1);
		Py_DECREF(k);
		Py_DECREF(v);
	}
	if (!rc)
		rc = put_text(o, "}");
	Py_ReprLeave(d);
	return rc;
}

/* set and frozenset: "{1, 2}", "frozenset({1})", "Sub({1})", "set()". */
static int set(struct out *o, PyObject *s, int depth)
{
	PyObject *it, *item;
	char head[128];
	int rc, named = !Py_IS_TYPE(s, &PySet_Type), first = 1;

	if (PySet_GET_SIZE(s) == 0) {
		snprintf(head, sizeof(head), "%s()", Py_TYPE(s)->tp_name);
		return put_text(o, head);
	}
	snprintf(head, sizeof(head), "%s(", Py_TYPE(s)->tp_name);
	if (depth >= PYREPR_DEPTH)
		return put_text(o, "{...}");
	rc = Py_ReprEnter(s);
	if (rc)
		return rc < 0 ? -1 : put_text(o, "{...}");
	it = PyObject_GetIter(s);
	rc = it ? 0 : -1;
	if (!rc && named)
		rc = put_text(o, head);
	if (!rc)
		rc = put_text(o, "{");
	while (!rc && !o->cut && (item = PyIter_Next(it))) {
		rc = first ? 0 : put_text(o, ", ");
		first = 0;
		if (!rc)
			rc = walk(o, item, depth + 1);
		Py_DECREF(item);
	}
	if (!rc && PyErr_Occurred())
		rc = -1; /* the set changed size while shown */
	if (!rc)
		rc = put_text(o, named ? "})" : "}");
	Py_XDECREF(it);
	Py_ReprLeave(s);
	return rc;
}

/* str, bytes, bytearray: the repr of their first o->left characters or
 * bytes (a longer one is cut by put anyway). */
static int text(struct out *o, PyObject *obj)
{
	PyObject *head;
	Py_ssize_t n = o->left;
	int rc;

	if (PyUnicode_Check(obj)) {
		if (PyUnicode_GET_LENGTH(obj) <= n)
			return put_repr(o, obj);
		head = PyUnicode_Substring(obj, 0, n);
	} else if (PyBytes_Check(obj)) {
		if (PyBytes_GET_SIZE(obj) <= n)
			return put_repr(o, obj);
		head = PyBytes_FromStringAndSize(PyBytes_AS_STRING(obj), n);
	} else {
		char name[128];

		if (PyByteArray_GET_SIZE(obj) < n)
			n = PyByteArray_GET_SIZE(obj);
		head = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(obj), n);
		snprintf(name, sizeof(name), "%s(", short_name(Py_TYPE(obj)));
		rc = head ? put_text(o, name) : -1;
		if (!rc)
			rc = put_repr(o, head);
		if (!rc)
			rc = put_text(o, ")");
		Py_XDECREF(head);
		return rc;
	}
	if (!head)
		return -1;
	rc = put_repr(o, head);
	Py_DECREF(head);
	/* The slice's repr may have fitted: what follows it is not shown. */
	o->cut = 1;
	return rc;
}

static int integer(struct out *o, PyObject *obj)
{
	PyObject *fn, *bits;
	long long n;
	int overflow;
	char s[64];

	(void)PyLong_AsLongLongAndOverflow(obj, &overflow);
	if (!overflow)
		return put_repr(o, obj);
	fn = PyObject_GetAttrString((PyObject *)&PyLong_Type, "bit_length");
	bits = fn ? PyObject_CallOneArg(fn, obj) : NULL;
	Py_XDECREF(fn);
	n = bits ? PyLong_AsLongLong(bits) : -1;
	Py_XDECREF(bits);
	if (n < 0)
		return -1;
	if (n <= PYREPR_INT_BITS)
		return put_repr(o, obj);
	snprintf(s, sizeof(s), "<int of %lld bits>", n);
	return put_text(o, s);
}

/* Whether getting attribute name of the type raised our deadline's
 * interrupt, which must reach the caller (never cleared here). */
static int interrupted(void)
{
	return PyErr_ExceptionMatches(PyExc_KeyboardInterrupt);
}

/* A type whose instances look like arrays (numpy's, torch's): its repr
 * summarises a large one.  Asked of the type: no instance code runs.
 * 1, 0, or -1 with the interrupt set. */
static int array_like(PyTypeObject *tp)
{
	static const char *const names[] = {"shape", "dtype"};

	for (int i = 0; i < 2; i++) {
		PyObject *a = PyObject_GetAttrString((PyObject *)tp, names[i]);

		if (a) {
			Py_DECREF(a);
			continue;
		}
		if (interrupted())
			return -1;
		PyErr_Clear();
		return 0;
	}
	return 1;
}

/* Any other object: its own __repr__, unless it is large. */
static int other(struct out *o, PyObject *obj)
{
	PyTypeObject *tp = Py_TYPE(obj);
	int sized = (tp->tp_as_sequence && tp->tp_as_sequence->sq_length) ||
		    (tp->tp_as_mapping && tp->tp_as_mapping->mp_length);
	Py_ssize_t n;
	char s[192];

	if (sized && (n = array_like(tp)) <= 0) {
		if (n < 0)
			return -1;
		n = PyObject_Size(obj);
		if (n < 0 && interrupted())
			return -1; /* our deadline: no __repr__ after it */
		if (n < 0)
			PyErr_Clear(); /* no size after all: its repr says */
		else if (n > PYREPR_LEN_MAX) {
			snprintf(s, sizeof(s), "<%.120s of %zd items>",
				 short_name(tp), n);
			return put_text(o, s);
		}
	}
	return put_repr(o, obj);
}

static int walk(struct out *o, PyObject *obj, int depth)
{
	reprfunc r = Py_TYPE(obj)->tp_repr;

	if (o->cut)
		return 0;
	if (r == PyList_Type.tp_repr)
		return sequence(o, obj, depth, 0);
	if (r == PyTuple_Type.tp_repr)
		return sequence(o, obj, depth, 1);
	if (r == PyDict_Type.tp_repr)
		return dict(o, obj, depth);
	if (r == PySet_Type.tp_repr || r == PyFrozenSet_Type.tp_repr)
		return set(o, obj, depth);
	if ((r == PyUnicode_Type.tp_repr && PyUnicode_Check(obj)) ||
	    (r == PyBytes_Type.tp_repr && PyBytes_Check(obj)) ||
	    (r == PyByteArray_Type.tp_repr && PyByteArray_Check(obj)))
		return text(o, obj);
	if (r == PyLong_Type.tp_repr && PyLong_Check(obj))
		return integer(o, obj);
	return other(o, obj);
}

PyObject *pyrepr_bounded(PyObject *obj, long max)
{
	struct out o;
	PyObject *empty, *whole = NULL, *head, *r;

	if (max < 4)
		max = 4;
	o.parts = PyList_New(0);
	o.left = (Py_ssize_t)max;
	o.cut = 0;
	if (!o.parts)
		return NULL;
	empty = walk(&o, obj, 0) ? NULL : PyUnicode_FromString("");
	if (empty)
		whole = PyUnicode_Join(empty, o.parts);
	Py_XDECREF(empty);
	Py_DECREF(o.parts);
	if (!whole || !o.cut)
		return whole;
	/* Cut short: the first max - 3 characters and "...". */
	head = PyUnicode_Substring(whole, 0, (Py_ssize_t)max - 3);
	Py_DECREF(whole);
	r = head ? PyUnicode_FromFormat("%U...", head) : NULL;
	Py_XDECREF(head);
	return r;
}

char *pyrepr_utf8_dup(PyObject *obj)
{
	const char *t = obj && PyUnicode_Check(obj) ? PyUnicode_AsUTF8(obj)
						    : NULL;

	if (!t)
		PyErr_Clear();
	return strdup(t ? t : "?");
}
