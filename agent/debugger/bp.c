/*
 * bp: one breakpoint's condition, hit condition and log message.  See
 * bp.h.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp.h"
#include "errbuf.h"

char *bp_error_text(void)
{
	PyObject *t, *v, *tb, *s = NULL;
	const char *tn = "Exception", *msg = NULL;
	char *out;
	size_t n;

	PyErr_Fetch(&t, &v, &tb);
	PyErr_NormalizeException(&t, &v, &tb);
	if (t && PyType_Check(t))
		tn = _PyType_Name((PyTypeObject *)t);
	if (v)
		s = PyObject_Str(v);
	if (s)
		msg = PyUnicode_AsUTF8(s);
	PyErr_Clear();
	n = strlen(tn) + (msg ? strlen(msg) : 0) + 4;
	if (n > BP_LOG_MAX)
		n = BP_LOG_MAX;
	out = malloc(n);
	if (out)
		snprintf(out, n, "%s%s%s", tn, msg && *msg ? ": " : "",
			 msg ? msg : "");
	Py_XDECREF(s);
	Py_XDECREF(t);
	Py_XDECREF(v);
	Py_XDECREF(tb);
	return out;
}

/* ---- parsing what the client sent ------------------------------------- */

static int parse_hit(const char *text, enum bp_hit_op *op, long *n)
{
	const char *p = text;
	char *end;

	*op = HIT_NONE;
	if (!text || !*text)
		return 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!strncmp(p, "==", 2)) {
		*op = HIT_EQ;
		p += 2;
	} else if (!strncmp(p, ">=", 2)) {
		*op = HIT_GE;
		p += 2;
	} else if (!strncmp(p, "<=", 2)) {
		*op = HIT_LE;
		p += 2;
	} else if (*p == '>') {
		*op = HIT_GT;
		p++;
	} else if (*p == '<') {
		*op = HIT_LT;
		p++;
	} else if (*p == '%') {
		*op = HIT_MOD;
		p++;
	} else {
		*op = HIT_EQ; /* a bare number: stop on that hit */
	}
	while (*p == ' ' || *p == '\t')
		p++;
	errno = 0;
	*n = strtol(p, &end, 10);
	if (errno || end == p || *n < 0 || (*op == HIT_MOD && *n == 0))
		return -1;
	while (*end == ' ' || *end == '\t')
		end++;
	return *end ? -1 : 0;
}

/* "x={x} and {{braces}}" -> ["x=", <code x>, " and {braces}"]; NULL
 * with msg on a syntax error. */
static PyObject *parse_log(const char *text, char *msg, size_t msglen)
{
	PyObject *parts = PyList_New(0), *item;
	const char *p = text;
	char lit[BP_TEXT_MAX + 1];
	size_t nl = 0;

	if (!parts)
		return NULL;
	while (*p) {
		if ((p[0] == '{' && p[1] == '{') ||
		    (p[0] == '}' && p[1] == '}')) {
			lit[nl++] = *p;
			p += 2;
			continue;
		}
		if (*p != '{') {
			lit[nl++] = *p++;
			continue;
		}
		const char *close = strchr(p + 1, '}');
		char expr[BP_TEXT_MAX + 1];
		size_t el;

		if (!close) {
			errbuf_set(msg, msglen, "log message: '{' without '}'");
			goto fail;
		}
		el = (size_t)(close - p - 1);
		memcpy(expr, p + 1, el);
		expr[el] = 0;
		if (nl) {
			item = PyUnicode_DecodeUTF8(lit, (Py_ssize_t)nl,
						    "replace");
			if (!item || PyList_Append(parts, item) < 0) {
				Py_XDECREF(item);
				goto fail;
			}
			Py_DECREF(item);
			nl = 0;
		}
		item = Py_CompileString(expr, "<logpoint>", Py_eval_input);
		if (!item) {
			char *e = bp_error_text();

			errbuf_set(msg, msglen, "log message {%s}: %s", expr,
				   e ? e : "syntax error");
			free(e);
			goto fail;
		}
		if (PyList_Append(parts, item) < 0) {
			Py_DECREF(item);
			goto fail;
		}
		Py_DECREF(item);
		p = close + 1;
	}
	if (nl) {
		item = PyUnicode_DecodeUTF8(lit, (Py_ssize_t)nl, "replace");
		if (!item || PyList_Append(parts, item) < 0) {
			Py_XDECREF(item);
			goto fail;
		}
		Py_DECREF(item);
	}
	return parts;
fail:
	PyErr_Clear();
	Py_DECREF(parts);
	return NULL;
}

static char *dup_opt(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

void bp_release(struct bp *b)
{
	free(b->name);
	free(b->cond_text);
	free(b->hit_text);
	free(b->log_text);
	Py_XDECREF(b->cond);
	Py_XDECREF(b->log_parts);
	memset(b, 0, sizeof(*b));
}

int bp_fill(struct bp *b, const struct bp_spec *s, char *msg, size_t msglen)
{
	if ((s->condition && strlen(s->condition) > BP_TEXT_MAX) ||
	    (s->log_message && strlen(s->log_message) > BP_TEXT_MAX) ||
	    (s->hit_condition && strlen(s->hit_condition) > BP_TEXT_MAX)) {
		errbuf_set(msg, msglen, "condition or message longer than %d",
			   BP_TEXT_MAX);
		return -EINVAL;
	}
	b->cond_text = dup_opt(s->condition);
	b->hit_text = dup_opt(s->hit_condition);
	b->log_text = dup_opt(s->log_message);
	if ((s->condition && *s->condition && !b->cond_text) ||
	    (s->hit_condition && *s->hit_condition && !b->hit_text) ||
	    (s->log_message && *s->log_message && !b->log_text))
		return -ENOMEM;
	if (b->cond_text) {
		b->cond = Py_CompileString(b->cond_text, "<condition>",
					   Py_eval_input);
		if (!b->cond) {
			char *e = bp_error_text();

			errbuf_set(msg, msglen, "condition: %s",
				   e ? e : "syntax error");
			free(e);
			return -EINVAL;
		}
	}
	if (parse_hit(b->hit_text, &b->hit_op, &b->hit_n) < 0) {
		errbuf_set(msg, msglen,
			   "hit condition '%s': expected a number, optionally "
			   "after ==, >=, >, <=, < or %%",
			   b->hit_text);
		return -EINVAL;
	}
	if (b->log_text) {
		b->log_parts = parse_log(b->log_text, msg, msglen);
		if (!b->log_parts)
			return -EINVAL;
	}
	return 0;
}

static int hit_passes(const struct bp *b)
{
	switch (b->hit_op) {
	case HIT_NONE:
		return 1;
	case HIT_EQ:
		return b->hits == b->hit_n;
	case HIT_GE:
		return b->hits >= b->hit_n;
	case HIT_GT:
		return b->hits > b->hit_n;
	case HIT_LE:
		return b->hits <= b->hit_n;
	case HIT_LT:
		return b->hits < b->hit_n;
	case HIT_MOD:
		return b->hits % b->hit_n == 0;
	}
	return 1;
}

static void append(char *buf, size_t *len, const char *s, size_t n)
{
	if (*len + n > BP_LOG_MAX)
		n = BP_LOG_MAX - *len;
	memcpy(buf + *len, s, n);
	*len += n;
	buf[*len] = 0;
}

/* The log message made of parts in frame namespaces g/l (malloc'd). */
static char *format_log(PyObject *parts, PyObject *g, PyObject *l)
{
	char *out = malloc(BP_LOG_MAX + 1);
	size_t len = 0;

	if (!out)
		return NULL;
	out[0] = 0;
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
		PyObject *p = PyList_GET_ITEM(parts, i), *v, *s;
		const char *t;
		Py_ssize_t n;

		if (PyUnicode_Check(p)) {
			t = PyUnicode_AsUTF8AndSize(p, &n);
			if (t)
				append(out, &len, t, (size_t)n);
			continue;
		}
		Py_INCREF(p);
		v = PyEval_EvalCode(p, g, l);
		Py_DECREF(p);
		s = v ? PyObject_Str(v) : NULL;
		t = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
		if (t) {
			append(out, &len, t, (size_t)n);
		} else {
			char *e = bp_error_text();

			append(out, &len, "<", 1);
			if (e)
				append(out, &len, e, strlen(e));
			append(out, &len, ">", 1);
			free(e);
		}
		Py_XDECREF(v);
		Py_XDECREF(s);
		PyErr_Clear();
	}
	return out;
}

static void add_log(struct bp_hit *hit, char *s)
{
	if (s && hit->log) {
		size_t n = strlen(hit->log) + strlen(s) + 2;
		char *j = malloc(n);

		if (j)
			snprintf(j, n, "%s\n%s", hit->log, s);
		free(hit->log);
		free(s);
		hit->log = j;
	} else if (s) {
		hit->log = s;
	}
}

void bp_consider(struct bp *b, PyObject *g, PyObject *l, struct bp_hit *hit,
		 const unsigned *gen)
{
	unsigned g0 = *gen;
	int id = b->id;

	if (b->cond) {
		PyObject *cond = Py_NewRef(b->cond), *v;
		int t;

		v = PyEval_EvalCode(cond, g, l);
		Py_DECREF(cond);
		t = v ? PyObject_IsTrue(v) : -1;
		Py_XDECREF(v);
		if (t < 0) {
			char *e = bp_error_text();

			if (!hit->error && e && *gen == g0) {
				size_t n =
					strlen(e) + strlen(b->cond_text) + 64;
				hit->error = malloc(n);
				if (hit->error)
					snprintf(hit->error, n,
						 "breakpoint "
						 "condition '%s' raised %s",
						 b->cond_text, e);
			}
			free(e);
			goto stop;
		}
		if (!t || *gen != g0)
			return;
	}
	b->hits++;
	if (!hit_passes(b))
		return;
	if (b->log_parts) {
		PyObject *parts = Py_NewRef(b->log_parts);

		add_log(hit, format_log(parts, g, l));
		Py_DECREF(parts);
		return;
	}
stop:
	hit->stop = 1;
	if (hit->nids < BP_HIT_IDS_MAX)
		hit->ids[hit->nids++] = id;
}
