/*
 * pytasks: asyncio's tasks through the embedded pytasks.py.  See pytasks.h.
 */
#include "cpython/pycompat.h"

#include "pytasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cJSON.h"
#include "cpython/cpython.h"
#include "gilcall.h"
#include "pyembed.h"
#include "pygil.h"
#include "pyrepr.h"
#include "pytasks_src.h"

#define TAKE_RUN_MS 10000 /* the listing interrupted past this */
#define CONVERT_SLICE 500 /* tasks converted between two lets-go of the GIL
			     (about 1 ms) */

static PyObject *module; /* GIL; kept for the life of the process */

struct take_call {
	struct gilcall c;
	size_t max_depth;
	struct pytasks res;
	int rc;
	char err[256];
};

static uint64_t id_of(PyObject *o)
{
	uint64_t v = o && PyLong_Check(o)
			     ? (uint64_t)PyLong_AsUnsignedLongLongMask(o)
			     : 0;

	if (PyErr_Occurred())
		PyErr_Clear();
	return v;
}

/* After the i-th item of a conversion, every CONVERT_SLICE: the GIL let
 * go for an instant (what is converted must be held by a tuple). */
static void let_go_every_slice(size_t i)
{
	if ((i + 1) % CONVERT_SLICE == 0) {
		Py_BEGIN_ALLOW_THREADS
		Py_END_ALLOW_THREADS
	}
}

/* Reads pytasks.py's flat tuple, one item at a time, never past its end.
 * A tuple: nothing the program runs while the GIL is let go between
 * slices can change it (a list can be found by gc.get_objects() and
 * cleared). */
struct flat {
	PyObject *tuple;
	Py_ssize_t at, n;
	int bad; /* read past the end, or a count out of bounds */
};

static PyObject *next(struct flat *f)
{
	if (f->at >= f->n) {
		f->bad = 1;
		return NULL;
	}
	return PyTuple_GET_ITEM(f->tuple, f->at++);
}

/* A count (of frames, of ids) that the items left can hold. */
static size_t count(struct flat *f, size_t each)
{
	uint64_t n = id_of(next(f));

	if (n > (uint64_t)(f->n - f->at) / each) {
		f->bad = 1;
		return 0;
	}
	return (size_t)n;
}

static int task(struct flat *f, struct pytask *t, size_t max_depth)
{
	PyObject *waited;
	size_t nframes, nids;

	t->id = id_of(next(f));
	t->name = pyrepr_utf8_dup(next(f));
	t->state = pyrepr_utf8_dup(next(f));
	t->loop = id_of(next(f));
	t->thread_id = id_of(next(f));
	t->coro = pyrepr_utf8_dup(next(f));
	t->awaits = pyrepr_utf8_dup(next(f));
	waited = next(f);
	t->waited_s = waited && PyFloat_Check(waited)
			      ? PyFloat_AS_DOUBLE(waited)
			      : -1;
	if (!t->name || !t->state || !t->coro || !t->awaits)
		return -ENOMEM;
	nframes = count(f, 3);
	t->frames = nframes ? calloc(nframes, sizeof(*t->frames)) : NULL;
	if (nframes && !t->frames)
		return -ENOMEM;
	for (size_t i = 0; i < nframes; i++) {
		struct pytask_frame *fr = &t->frames[t->nframes];

		fr->func = pyrepr_utf8_dup(next(f));
		fr->file = pyrepr_utf8_dup(next(f));
		fr->line = (int)id_of(next(f));
		if (!fr->func || !fr->file) {
			free(fr->func);
			free(fr->file);
			return -ENOMEM;
		}
		/* Deeper than asked for: read past, not kept. */
		if (t->nframes < max_depth)
			t->nframes++;
		else {
			free(fr->func);
			free(fr->file);
		}
	}
	nids = count(f, 1);
	t->awaits_tasks = nids ? calloc(nids, sizeof(uint64_t)) : NULL;
	if (nids && !t->awaits_tasks)
		return -ENOMEM;
	for (size_t i = 0; i < nids; i++)
		t->awaits_tasks[t->nawaits++] = id_of(next(f));
	return f->bad ? -EPROTO : 0;
}

/* (flat, n, left out, note) into out. */
static int convert(PyObject *res, struct pytasks *out, size_t max_depth)
{
	struct flat f = {0};
	PyObject *note;
	uint64_t n;

	if (!PyTuple_CheckExact(res) || PyTuple_GET_SIZE(res) != 4 ||
	    !PyTuple_CheckExact(PyTuple_GET_ITEM(res, 0)))
		return -EPROTO;
	f.tuple = PyTuple_GET_ITEM(res, 0);
	f.n = PyTuple_GET_SIZE(f.tuple);
	n = id_of(PyTuple_GET_ITEM(res, 1));
	out->left_out = (size_t)id_of(PyTuple_GET_ITEM(res, 2));
	note = PyTuple_GET_ITEM(res, 3);
	if (PyUnicode_Check(note)) {
		const char *s = PyUnicode_AsUTF8(note);

		snprintf(out->note, sizeof(out->note), "%s", s ? s : "");
		PyErr_Clear();
	}
	/* Each task is 10 items at least (no frame, no task awaited). */
	if (n > (uint64_t)f.n / 10 || n > PYTASKS_MAX)
		return -EPROTO;
	if (!n)
		return 0;
	out->tasks = calloc((size_t)n, sizeof(*out->tasks));
	if (!out->tasks)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int rc = task(&f, &out->tasks[out->n++], max_depth);

		if (rc)
			return rc;
		/* The tuple cannot change: the loops may run meanwhile. */
		let_go_every_slice((size_t)i);
	}
	return 0;
}

/* ---- without the GIL: the order, and who awaits whom ---- */

struct by_id {
	uint64_t id;
	size_t i;
};

static int by_id_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct by_id *)a)->id;
	uint64_t y = ((const struct by_id *)b)->id;

	return x < y ? -1 : x > y;
}

static int task_cmp(const void *a, const void *b)
{
	const struct pytask *x = a, *y = b;
	int c;

	if (x->thread_id != y->thread_id)
		return x->thread_id < y->thread_id ? -1 : 1;
	if ((c = strcmp(x->name, y->name)))
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Sorts the tasks by thread and name, and fills each one's awaited_by
 * from the others' awaits_tasks. */
static int tasks_link(struct pytasks *ts)
{
	struct by_id *ix;

	if (!ts->n)
		return 0;
	qsort(ts->tasks, ts->n, sizeof(*ts->tasks), task_cmp);
	ix = calloc(ts->n, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	for (size_t i = 0; i < ts->n; i++)
		ix[i] = (struct by_id){ts->tasks[i].id, i};
	qsort(ix, ts->n, sizeof(*ix), by_id_cmp);
	for (int pass = 0; pass < 2; pass++) {
		/* Pass 0 counts, pass 1 fills. */
		for (size_t i = 0; i < ts->n; i++) {
			const struct pytask *t = &ts->tasks[i];

			for (size_t k = 0; k < t->nawaits; k++) {
				struct by_id key = {t->awaits_tasks[k], 0};
				struct by_id *hit = bsearch(&key, ix, ts->n,
							    sizeof(*ix),
							    by_id_cmp);
				struct pytask *u;

				if (!hit)
					continue;
				u = &ts->tasks[hit->i];
				if (pass)
					u->awaited_by[u->nawaited_by++] = t->id;
				else
					u->nawaited_by++;
			}
		}
		for (size_t i = 0; !pass && i < ts->n; i++) {
			struct pytask *u = &ts->tasks[i];

			if (u->nawaited_by &&
			    !(u->awaited_by = calloc(u->nawaited_by,
						     sizeof(uint64_t)))) {
				free(ix);
				return -ENOMEM;
			}
			u->nawaited_by = 0;
		}
	}
	free(ix);
	return 0;
}

PyObject *pytasks_get(const char *name)
{
	if (!module && !(module = pyembed_load("probing_tasks", pytasks_src,
					       "<probing pytasks>")))
		return NULL;
	return PyObject_GetAttrString(module, name);
}

static void take_run(struct gilcall *gc)
{
	struct take_call *c = (struct take_call *)gc;
	PyObject *fn, *res;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	fn = pytasks_get("snapshot");
	res = fn ? PyObject_CallFunction(fn, "nnd", (Py_ssize_t)PYTASKS_MAX,
					 (Py_ssize_t)c->max_depth,
					 (double)ts.tv_sec + ts.tv_nsec / 1e9)
		 : NULL;
	Py_XDECREF(fn);
	if (!res) {
		c->rc = gilcall_fail_from_exc(-EIO, "listing the tasks failed",
					      c->err, sizeof(c->err));
		return;
	}
	c->rc = convert(res, &c->res, c->max_depth);
	Py_DECREF(res);
	if (c->rc)
		snprintf(c->err, sizeof(c->err), "listing the tasks: %s",
			 c->rc == -ENOMEM ? "out of memory"
					  : "pytasks.py answered garbled");
}

static void take_release(struct gilcall *gc)
{
	struct take_call *c = (struct take_call *)gc;

	pytasks_release(&c->res);
	free(c);
}

int pytasks_take(struct pytasks *out, size_t max_depth, volatile int *cancel,
		 char *err, size_t errlen)
{
	struct take_call *c = calloc(1, sizeof(*c));
	int rc;

	memset(out, 0, sizeof(*out));
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->c.run = take_run;
	c->c.release = take_release;
	c->c.kind = PYGIL_REPR;
	c->c.what = "listing asyncio's tasks";
	c->max_depth = max_depth ? max_depth : 1;
	rc = gilcall_run(&c->c, TAKE_RUN_MS, cancel, err, errlen);
	if (!rc && c->rc) {
		rc = c->rc;
		snprintf(err, errlen, "%s", c->err);
	} else if (!rc) {
		*out = c->res;
		memset(&c->res, 0, sizeof(c->res));
	}
	gilcall_done(&c->c);
	if (!rc && (rc = tasks_link(out))) {
		pytasks_release(out);
		snprintf(err, errlen, "listing the tasks: out of memory");
	}
	return rc;
}

void pytasks_release(struct pytasks *t)
{
	for (size_t i = 0; i < t->n; i++) {
		struct pytask *k = &t->tasks[i];

		for (size_t d = 0; d < k->nframes; d++) {
			free(k->frames[d].func);
			free(k->frames[d].file);
		}
		free(k->frames);
		free(k->name);
		free(k->state);
		free(k->coro);
		free(k->awaits);
		free(k->awaits_tasks);
		free(k->awaited_by);
	}
	free(t->tasks);
	memset(t, 0, sizeof(*t));
}

/* ---- roots ---- */

struct roots_call {
	struct pytask_roots *out;
	int rc;
	char err[256];
};

/* A str's UTF-8 (a lone surrogate escaped: \\udc80), cut to
 * PYTASKS_ROOT_NAME_MAX bytes at a character's start (a long name is cut
 * before it is encoded); NULL when out of memory. */
static char *name_dup(PyObject *o)
{
	PyObject *cut = NULL, *b;
	char *s;
	size_t n;

	if (!PyUnicode_Check(o))
		return pyrepr_utf8_dup(o);
	if (PyUnicode_GET_LENGTH(o) > PYTASKS_ROOT_NAME_MAX) {
		cut = PyUnicode_Substring(o, 0, PYTASKS_ROOT_NAME_MAX);
		if (!cut)
			PyErr_Clear();
	}
	b = PyUnicode_AsEncodedString(cut ? cut : o, "utf-8",
				      "backslashreplace");
	Py_XDECREF(cut);
	if (!b) {
		PyErr_Clear();
		return pyrepr_utf8_dup(o);
	}
	s = strdup(PyBytes_AS_STRING(b));
	Py_DECREF(b);

	if (!s || strlen(s) <= PYTASKS_ROOT_NAME_MAX)
		return s;
	n = PYTASKS_ROOT_NAME_MAX;
	while (n && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	s[n] = '\0';
	return s;
}

/* Where task keeps its name: the offset of the field of the object that
 * holds name; 0 when none (the pure-Python Task: in its __dict__).  The
 * offset found is kept per type and checked on each task (a field that
 * held the same object by chance is looked for again). */
#define NAME_TYPES 8

static PyObject *field_at(PyObject *o, size_t at)
{
	PyObject *v;

	memcpy(&v, (char *)o + at, sizeof(v));
	return v;
}

static size_t name_offset(PyObject *task, PyObject *name)
{
	static struct {
		PyTypeObject *tp;
		size_t off;
	} seen[NAME_TYPES];
	static size_t nseen;
	PyTypeObject *tp = Py_TYPE(task);
	size_t i;

	/* The GIL is held: the object and its fields stay as they are. */
	for (i = 0; i < nseen; i++)
		if (seen[i].tp == tp && field_at(task, seen[i].off) == name)
			return seen[i].off;
	for (size_t at = sizeof(PyObject);
	     at + sizeof(PyObject *) <= (size_t)tp->tp_basicsize;
	     at += sizeof(PyObject *)) {
		if (field_at(task, at) != name)
			continue;
		for (i = 0; i < nseen && seen[i].tp != tp; i++)
			;
		if (i < NAME_TYPES) {
			seen[i].tp = tp;
			seen[i].off = at;
			nseen += i == nseen;
		}
		return at;
	}
	return 0;
}

/* roots()'s (flat, left out) into out: 5 items a task. */
static int roots_convert(PyObject *res, struct pytask_roots *out)
{
	PyObject *flat;
	Py_ssize_t n;

	if (!PyTuple_CheckExact(res) || PyTuple_GET_SIZE(res) != 2 ||
	    !PyTuple_CheckExact(PyTuple_GET_ITEM(res, 0)))
		return -EPROTO;
	flat = PyTuple_GET_ITEM(res, 0);
	n = PyTuple_GET_SIZE(flat) / 5;
	out->left_out = (size_t)id_of(PyTuple_GET_ITEM(res, 1));
	if (n > PYTASKS_MAX)
		return -EPROTO;
	if (!n)
		return 0;
	out->r = calloc((size_t)n, sizeof(*out->r));
	if (!out->r)
		return -ENOMEM;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *name = PyTuple_GET_ITEM(flat, 5 * i);
		PyObject *coro = PyTuple_GET_ITEM(flat, 5 * i + 1);
		PyObject *code = PyTuple_GET_ITEM(flat, 5 * i + 2);
		PyObject *task = PyTuple_GET_ITEM(flat, 5 * i + 4);
		struct pytask_root *r = &out->r[out->n];
		size_t off;
		Py_hash_t h;

		if (!PyCode_Check(code) ||
		    !(PyCoro_CheckExact(coro) || PyGen_CheckExact(coro) ||
		      PyAsyncGen_CheckExact(coro)))
			continue;
		r->frame = cpython.frame.gen_raw_addr(coro, code);
		if (!r->frame)
			continue;
		r->code = (uintptr_t)code;
		r->thread_id = id_of(PyTuple_GET_ITEM(flat, 5 * i + 3));
		if (PyUnicode_CheckExact(name) &&
		    (off = name_offset(task, name)) &&
		    (h = PyObject_Hash(name)) != -1) {
			r->task = (uintptr_t)task;
			r->task_type = (uintptr_t)Py_TYPE(task);
			r->name_field = off;
			r->name_len = (int64_t)PyUnicode_GET_LENGTH(name);
			r->name_hash = (int64_t)h;
		}
		PyErr_Clear();
		r->name = name_dup(name);
		if (!r->name)
			return -ENOMEM;
		out->n++;
		/* The tuple holds what is read: the loops may run. */
		let_go_every_slice((size_t)i);
	}
	return 0;
}

static void roots_run(void *arg)
{
	struct roots_call *c = arg;
	struct timespec t0, t1;
	PyObject *fn, *res;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fn = pytasks_get("roots");
	res = fn ? PyObject_CallFunction(fn, "n", (Py_ssize_t)PYTASKS_MAX)
		 : NULL;
	Py_XDECREF(fn);
	if (!res) {
		c->rc = gilcall_fail_from_exc(-EIO, "listing the tasks failed",
					      c->err, sizeof(c->err));
		return;
	}
	c->rc = roots_convert(res, c->out);
	Py_DECREF(res);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	c->out->took_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
			  (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (c->rc)
		snprintf(c->err, sizeof(c->err), "listing the tasks: %s",
			 c->rc == -ENOMEM ? "out of memory"
					  : "pytasks.py answered garbled");
}

int pytasks_roots(struct pytask_roots *out, int start_ms, char *err,
		  size_t errlen)
{
	struct roots_call c = {.out = out};
	int rc;

	memset(out, 0, sizeof(*out));
	rc = gilcall_ours(roots_run, &c, start_ms, err, errlen);
	if (!rc && c.rc) {
		rc = c.rc;
		snprintf(err, errlen, "%s", c.err);
	}
	if (rc)
		pytasks_roots_release(out);
	return rc;
}

void pytasks_roots_release(struct pytask_roots *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->r[i].name);
	free(r->r);
	memset(r, 0, sizeof(*r));
}

long pytasks_find(const struct pytasks *t, uint64_t id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->tasks[i].id == id)
			return (long)i;
	return -1;
}

static cJSON *id_array(const uint64_t *ids, size_t n)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)ids[i]));
	return a;
}

static cJSON *task_json(const struct pytask *t)
{
	cJSON *o = cJSON_CreateObject(), *frames;

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "id", (double)t->id);
	cJSON_AddStringToObject(o, "name", t->name);
	cJSON_AddStringToObject(o, "state", t->state);
	cJSON_AddStringToObject(o, "coro", t->coro);
	cJSON_AddNumberToObject(o, "threadId", (double)t->thread_id);
	cJSON_AddNumberToObject(o, "loop", (double)t->loop);
	cJSON_AddStringToObject(o, "awaits", t->awaits);
	cJSON_AddItemToObject(o, "awaitsTasks",
			      id_array(t->awaits_tasks, t->nawaits));
	cJSON_AddItemToObject(o, "awaitedBy",
			      id_array(t->awaited_by, t->nawaited_by));
	if (t->waited_s >= 0)
		cJSON_AddNumberToObject(o, "waited", t->waited_s);
	frames = cJSON_AddArrayToObject(o, "frames");
	for (size_t d = 0; frames && d < t->nframes; d++) {
		cJSON *f = cJSON_CreateObject();

		if (!f)
			break;
		cJSON_AddStringToObject(f, "func", t->frames[d].func);
		cJSON_AddStringToObject(f, "file", t->frames[d].file);
		cJSON_AddNumberToObject(f, "line", t->frames[d].line);
		cJSON_AddItemToArray(frames, f);
	}
	return o;
}

/* About the JSON text of task t, in bytes. */
static size_t json_size(const struct pytask *t)
{
	size_t n = 200 + strlen(t->name) + strlen(t->coro) +
		   strlen(t->awaits) + 24 * (t->nawaits + t->nawaited_by);

	for (size_t d = 0; d < t->nframes; d++)
		n += 40 + strlen(t->frames[d].func) + strlen(t->frames[d].file);
	return n;
}

cJSON *pytasks_json(const struct pytasks *t, size_t *left)
{
	cJSON *a = cJSON_CreateArray();
	size_t size = 0, i;

	for (i = 0; a && i < t->n; i++) {
		cJSON *o;

		size += json_size(&t->tasks[i]);
		if (size > PYTASKS_JSON_MAX || !(o = task_json(&t->tasks[i])))
			break;
		cJSON_AddItemToArray(a, o);
	}
	*left = t->left_out + (t->n - i);
	return a;
}
