/*
 * app: the program's own rows.  See app.h.
 */
#include "app.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "errbuf.h"
#include "memory/memory.h"
#include "recorder.h"
#include "store.h"
#include "torch/torch_ring.h"

#define NAME_MAX_LEN 63
#define DRAIN_MAX (2 * APP_RING_ROWS) /* rows written per drain at most */

enum { V_NULL, V_INT, V_REAL, V_TEXT, V_BLOB };

/* One row in the ring: its table, and its values one after the other
 * (a type byte; 8 bytes of a number, or 2 of length and the bytes). */
struct row {
	uint16_t table;
	uint16_t n;
	uint16_t len;
	uint16_t unused;
	unsigned char data[APP_ROW_MAX - 8];
};

/* A table's definition is written once, before its id is given out;
 * rec and failed belong to the drain (drain_lock). */
struct table {
	char name[NAME_MAX_LEN + 1];
	char columns[RECORDER_COLS_MAX * (NAME_MAX_LEN + 12)];
	char doc[200];
	int ncols;
	char types[RECORDER_COLS_MAX]; /* V_INT ... V_BLOB, or 0: any */
	struct recorder *rec;
	int failed; /* no recorder could be made: its rows are dropped */
};

static pthread_mutex_t defs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
static struct table tables[APP_TABLES_MAX];
static int ntables; /* under defs_lock; read by the drain under it */
static struct torch_ring ring;
static _Atomic int ring_ready; /* the ring is made (release/acquire) */
static struct store *store;    /* under drain_lock */
static _Atomic int used, pending;
static _Atomic uint64_t appended, cut, written, errors;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_error[256]; /* under error_lock (never held long) */

enum { SPANS, STEPS };

/* ---- definitions --------------------------------------------------- */

static int valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN ||
	    !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
	      *s == '_'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

static int type_of(const char *decl)
{
	static const char *const names[] = {"", "INTEGER", "REAL", "TEXT",
					    "BLOB"};

	for (int i = 0; i < 5; i++)
		if (!strcmp(decl, names[i]))
			return i; /* 0 for "": any */
	return -1;
}

/* Adds a definition under defs_lock: its id, or -errno with err. */
static int define_locked(const char *name, int ncols, const char *const *cols,
			 const int *types, const char *doc, char *err,
			 size_t errlen)
{
	static const char *const decl[] = {"", " INTEGER", " REAL", " TEXT",
					   " BLOB"};
	struct table *t;
	size_t at = 0;

	for (int i = 0; i < ntables; i++) {
		if (strcasecmp(tables[i].name, name))
			continue;
		t = &tables[i];
		if (t->ncols == ncols) {
			int same = 1;

			for (int c = 0; c < ncols && same; c++)
				same = t->types[c] == types[c];
			/* The same columns (a module imported again). */
			if (same)
				return i;
		}
		snprintf(err, errlen,
			 "app.%s is defined already, with other columns "
			 "(a table's columns are fixed for the process: give "
			 "this one another name)",
			 name);
		return -EEXIST;
	}
	if (ntables == APP_TABLES_MAX) {
		snprintf(err, errlen, "at most %d tables in app", APP_TABLES_MAX);
		return -ENOSPC;
	}
	t = &tables[ntables];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->doc, sizeof(t->doc), "%s", doc ? doc : "");
	for (int c = 0; c < ncols; c++) {
		int n = snprintf(t->columns + at, sizeof(t->columns) - at,
				 "%s\"%s\"%s", c ? ", " : "", cols[c],
				 decl[types[c]]);

		if (n < 0 || (size_t)n >= sizeof(t->columns) - at)
			return -ENAMETOOLONG; /* not with the caps checked */
		at += (size_t)n;
		t->types[c] = (char)types[c];
	}
	t->ncols = ncols;
	return ntables++;
}

/* The ring, made with the first definition of the program's. */
static int ring_locked(char *err, size_t errlen)
{
	int rc;

	if (atomic_load_explicit(&ring_ready, memory_order_acquire))
		return 0;
	rc = torch_ring_init(&ring, APP_RING_ROWS, sizeof(struct row));
	if (rc) {
		snprintf(err, errlen, "out of memory for app's rows");
		return rc;
	}
	atomic_store_explicit(&ring_ready, 1, memory_order_release);
	return 0;
}

/* app.spans and app.steps, ids SPANS and STEPS, defined first whoever
 * comes first: the agent starting, or the program (which may define its
 * tables and set markers before the agent has started). */
static int markers_locked(char *err, size_t errlen)
{
	static const char *const span_cols[] = {
		"ts", "end_ts", "duration", "name", "depth", "step",
		"native_id", "rank"};
	static const int span_types[] = {V_REAL, V_REAL, V_REAL, V_TEXT,
					 V_INT,	 V_INT,	 V_INT,	 V_INT};
	static const char *const step_cols[] = {"step",	     "ts",
						"end_ts",    "duration",
						"native_id", "rank"};
	static const int step_types[] = {V_INT, V_REAL, V_REAL,
					 V_REAL, V_INT, V_INT};
	int rc;

	if (ntables > STEPS)
		return 0;
	rc = define_locked("spans", 8, span_cols, span_types,
			   "the program's probing.span() markers (Unix "
			   "seconds; duration in seconds)",
			   err, errlen);
	if (rc == SPANS)
		rc = define_locked("steps", 6, step_cols, step_types,
				   "the program's probing.step() markers "
				   "(Unix seconds)",
				   err, errlen);
	return rc < 0 ? rc : 0;
}

int app_init(struct store *st, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&drain_lock);
	store = st;
	pthread_mutex_unlock(&drain_lock);
	pthread_mutex_lock(&defs_lock);
	rc = markers_locked(err, errlen);
	pthread_mutex_unlock(&defs_lock);
	return rc;
}

/* ---- the drain ------------------------------------------------------ */

static void note_error(const char *what, const char *err)
{
	atomic_fetch_add(&errors, 1);
	pthread_mutex_lock(&error_lock);
	errbuf_set(last_error, sizeof(last_error), "%s: %s", what, err);
	pthread_mutex_unlock(&error_lock);
}

/* Makes the recorders of the tables defined since the last drain
 * (drain_lock held; never defs_lock while the store's mutex is taken). */
static void make_recorders(void)
{
	struct recorder_opts o = {.schema = "app"};
	struct table copy;
	char err[256];
	int n;

	pthread_mutex_lock(&defs_lock);
	n = ntables;
	pthread_mutex_unlock(&defs_lock);
	o.max_rows = (size_t)config_int("app.max_rows");
	o.max_bytes = (size_t)config_int("app.max_mb") << 20;
	for (int i = 0; i < n; i++) {
		if (tables[i].rec || tables[i].failed)
			continue;
		pthread_mutex_lock(&defs_lock);
		copy = tables[i];
		pthread_mutex_unlock(&defs_lock);
		o.name = copy.name;
		o.columns = copy.columns;
		o.doc = copy.doc[0] ? copy.doc : NULL;
		if (recorder_new(store, &o, &tables[i].rec, err, sizeof(err))) {
			tables[i].rec = NULL;
			tables[i].failed = 1;
			note_error(copy.name, err);
		}
	}
}

/* Binds a row's values to t's insert: the row's bytes, or -1. */
static long bind_row(const struct table *t, const struct row *r)
{
	struct store_stmt *s = recorder_stmt(t->rec);
	const unsigned char *p = r->data, *end = r->data + r->len;
	long bytes = 0;

	if (r->n != t->ncols || r->len > sizeof(r->data))
		return -1;
	for (int i = 1; i <= r->n; i++) {
		int64_t v;
		double d;
		uint16_t len;
		int type;

		if (p >= end)
			return -1;
		type = *p++;
		if (type == V_NULL) {
			store_stmt_null(s, i);
			continue;
		}
		if (type == V_INT || type == V_REAL) {
			if (end - p < 8)
				return -1;
			if (type == V_INT) {
				memcpy(&v, p, 8);
				store_stmt_int(s, i, v);
			} else {
				memcpy(&d, p, 8);
				store_stmt_real(s, i, d);
			}
			p += 8;
			bytes += 8;
			continue;
		}
		if (end - p < 2)
			return -1;
		memcpy(&len, p, 2);
		p += 2;
		if (end - p < len)
			return -1;
		if (type == V_TEXT)
			store_stmt_text_len(s, i, (const char *)p, len);
		else
			store_stmt_blob(s, i, p, len);
		p += len;
		bytes += len;
	}
	return bytes;
}

static void commit(struct recorder *r, const char *name)
{
	char err[256];

	if (recorder_commit(r, err, sizeof(err)))
		note_error(name, err);
}

size_t app_drain(void)
{
	static struct row r; /* drain_lock */
	struct table *cur = NULL;
	char err[256];
	size_t n = 0;

	if (!atomic_load_explicit(&ring_ready, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&drain_lock);
	if (!store) {
		pthread_mutex_unlock(&drain_lock);
		return 0;
	}
	atomic_store(&pending, 0);
	make_recorders();
	while (n < DRAIN_MAX && torch_ring_pop(&ring, &r) == 0) {
		struct table *t = r.table < APP_TABLES_MAX ? &tables[r.table]
							   : NULL;
		long bytes;

		n++;
		if (!t || !t->rec) {
			atomic_fetch_add(&errors, 1);
			continue;
		}
		if (t != cur) {
			if (cur)
				commit(cur->rec, cur->name);
			cur = NULL;
			if (recorder_begin(t->rec, err, sizeof(err))) {
				note_error(t->name, err);
				continue;
			}
			cur = t;
		}
		bytes = bind_row(t, &r);
		if (bytes < 0) {
			note_error(t->name, "a garbled row");
			continue;
		}
		if (recorder_add(t->rec, (size_t)bytes, err, sizeof(err)))
			note_error(t->name, err);
		else
			atomic_fetch_add(&written, 1);
	}
	if (cur)
		commit(cur->rec, cur->name);
	pthread_mutex_unlock(&drain_lock);
	return n;
}

int app_tick(void)
{
	if (!atomic_load(&used))
		return -1;
	app_drain();
	return APP_TICK_MS;
}

int app_pending(void)
{
	return atomic_load(&pending);
}

void app_stop(void)
{
	app_drain();
}

void app_atfork_child(void)
{
	pthread_mutex_init(&defs_lock, NULL);
	pthread_mutex_init(&drain_lock, NULL);
	pthread_mutex_init(&error_lock, NULL);
	store = NULL; /* the parent's; the child's agent makes its own */
	for (int i = 0; i < ntables; i++) {
		tables[i].rec = NULL;
		tables[i].failed = 0;
	}
	/* What the parent appended is the parent's. */
	if (atomic_load(&ring_ready)) {
		atomic_store(&ring.head, 0);
		atomic_store(&ring.tail, 0);
	}
}

/* ---- the Python face -------------------------------------------------- */

/* Appends len bytes to the row; 0, or -1 when there is no room. */
static int put(struct row *r, const void *p, size_t len)
{
	if (len > sizeof(r->data) - r->len)
		return -1;
	memcpy(r->data + r->len, p, len);
	r->len = (uint16_t)(r->len + len);
	return 0;
}

/* The room left for a text or blob's bytes after its header, keeping
 * 9 bytes (a number's) for each value still to come. */
static size_t room(const struct row *r, int left)
{
	size_t free_ = sizeof(r->data) - r->len, keep = 3 + 9 * (size_t)left;

	return free_ > keep ? free_ - keep : 0;
}

/* Cuts UTF-8 at most max bytes long at a character boundary. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
		max--;
	return max;
}

static int put_value(struct row *r, PyObject *v, int type, int left,
		     const char *table, int col)
{
	unsigned char tag;

	if (v == Py_None) {
		tag = V_NULL;
		return put(r, &tag, 1);
	}
	if (PyLong_Check(v) && type != V_REAL) {
		int64_t i = PyLong_AsLongLong(v);

		if (i == -1 && PyErr_Occurred())
			return -1; /* OverflowError: past 64 bits */
		tag = V_INT;
		return put(r, &tag, 1) || put(r, &i, 8);
	}
	if ((PyFloat_Check(v) || PyLong_Check(v)) && type != V_INT) {
		/* Neither calls Python code (a subclass's __float__): the
		 * row is encoded with the GIL held throughout. */
		double d = PyFloat_Check(v) ? PyFloat_AS_DOUBLE(v)
					    : PyLong_AsDouble(v);

		if (d == -1.0 && PyErr_Occurred())
			return -1;
		tag = V_REAL;
		return put(r, &tag, 1) || put(r, &d, 8);
	}
	if ((PyUnicode_Check(v) && (type == 0 || type == V_TEXT)) ||
	    (PyBytes_Check(v) && (type == 0 || type == V_BLOB))) {
		Py_ssize_t n = 0;
		const char *s = PyUnicode_Check(v)
					? PyUnicode_AsUTF8AndSize(v, &n)
					: PyBytes_AsString(v);
		size_t len, max = room(r, left);
		uint16_t l16;

		if (!s)
			return -1;
		if (PyBytes_Check(v))
			n = PyBytes_Size(v);
		len = PyUnicode_Check(v) ? utf8_cut(s, (size_t)n, max)
					 : ((size_t)n < max ? (size_t)n : max);
		if (len < (size_t)n)
			atomic_fetch_add(&cut, 1);
		tag = PyUnicode_Check(v) ? V_TEXT : V_BLOB;
		l16 = (uint16_t)len;
		return put(r, &tag, 1) || put(r, &l16, 2) || put(r, s, len);
	}
	PyErr_Format(PyExc_TypeError,
		     "app.%s, column %d: a %s where the column takes %s", table,
		     col + 1, Py_TYPE(v)->tp_name,
		     type == V_INT	? "an int"
		     : type == V_REAL ? "a float or an int"
		     : type == V_TEXT ? "a str"
		     : type == V_BLOB ? "bytes"
				      : "an int, a float, a str or bytes");
	return -1;
}

PyObject *app_py_define(PyObject *self, PyObject *args)
{
	const char *name, *doc = NULL, *cols[RECORDER_COLS_MAX];
	int types[RECORDER_COLS_MAX], id;
	PyObject *spec;
	Py_ssize_t n;
	char err[256];

	(void)self;
	if (!PyArg_ParseTuple(args, "sO|z", &name, &spec, &doc))
		return NULL;
	if (!valid_name(name) || !strcasecmp(name, "spans") ||
	    !strcasecmp(name, "steps")) {
		PyErr_Format(PyExc_ValueError,
			     "%R is not a name for a table of app: letters, "
			     "digits and _ (not first), at most %d, and not "
			     "spans or steps (the markers')",
			     PyTuple_GET_ITEM(args, 0), NAME_MAX_LEN);
		return NULL;
	}
	if (!PyTuple_Check(spec) || (n = PyTuple_GET_SIZE(spec)) < 1 ||
	    n > RECORDER_COLS_MAX) {
		PyErr_Format(PyExc_ValueError,
			     "app.%s: 1 to %d columns, as a tuple of (name, "
			     "type) pairs",
			     name, RECORDER_COLS_MAX);
		return NULL;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *c = PyTuple_GET_ITEM(spec, i);
		const char *type;

		if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 2 ||
		    !PyUnicode_Check(PyTuple_GET_ITEM(c, 0)) ||
		    !PyUnicode_Check(PyTuple_GET_ITEM(c, 1))) {
			PyErr_Format(PyExc_ValueError,
				     "app.%s: column %zd is not a (name, type) "
				     "pair of str",
				     name, i + 1);
			return NULL;
		}
		cols[i] = PyUnicode_AsUTF8(PyTuple_GET_ITEM(c, 0));
		type = PyUnicode_AsUTF8(PyTuple_GET_ITEM(c, 1));
		if (!cols[i] || !type)
			return NULL;
		types[i] = type_of(type);
		if (!valid_name(cols[i]) || types[i] < 0) {
			PyErr_Format(PyExc_ValueError,
				     "app.%s: column %R %R: a name of letters, "
				     "digits and _ (at most %d), a type of "
				     "INTEGER, REAL, TEXT, BLOB or \"\"",
				     name, PyTuple_GET_ITEM(c, 0),
				     PyTuple_GET_ITEM(c, 1), NAME_MAX_LEN);
			return NULL;
		}
		for (Py_ssize_t j = 0; j < i; j++)
			if (!strcasecmp(cols[j], cols[i])) {
				PyErr_Format(PyExc_ValueError,
					     "app.%s: column %s twice", name,
					     cols[i]);
				return NULL;
			}
	}
	pthread_mutex_lock(&defs_lock);
	id = ring_locked(err, sizeof(err));
	if (!id)
		id = markers_locked(err, sizeof(err));
	if (!id)
		id = define_locked(name, (int)n, cols, types, doc, err,
				   sizeof(err));
	pthread_mutex_unlock(&defs_lock);
	if (id < 0) {
		PyErr_SetString(id == -ENOMEM ? PyExc_MemoryError
					      : PyExc_ValueError,
				err);
		return NULL;
	}
	atomic_store(&used, 1);
	atomic_store(&pending, 1);
	memory_wake();
	return PyLong_FromLong(id);
}

PyObject *app_py_append(PyObject *self, PyObject *args)
{
	struct row r; /* 2 KiB of the program's stack, for a moment */
	const struct table *t;
	PyObject *values;
	int id, ntab;

	(void)self;
	if (!PyArg_ParseTuple(args, "iO!", &id, &PyTuple_Type, &values))
		return NULL;
	pthread_mutex_lock(&defs_lock);
	if (!atomic_load(&ring_ready) || ntables <= STEPS) {
		char err[256];

		if (ring_locked(err, sizeof(err)) ||
		    markers_locked(err, sizeof(err))) {
			pthread_mutex_unlock(&defs_lock);
			return PyErr_NoMemory();
		}
	}
	ntab = ntables;
	pthread_mutex_unlock(&defs_lock);
	if (id < 0 || id >= ntab) {
		PyErr_Format(PyExc_ValueError, "no table %d in app", id);
		return NULL;
	}
	t = &tables[id];
	if (PyTuple_GET_SIZE(values) != t->ncols) {
		PyErr_Format(PyExc_ValueError, "app.%s has %d columns, not %zd",
			     t->name, t->ncols, PyTuple_GET_SIZE(values));
		return NULL;
	}
	r.table = (uint16_t)id;
	r.n = (uint16_t)t->ncols;
	r.len = 0;
	for (int i = 0; i < t->ncols; i++)
		if (put_value(&r, PyTuple_GET_ITEM(values, i), t->types[i],
			      t->ncols - i - 1, t->name, i)) {
			if (!PyErr_Occurred())
				PyErr_Format(PyExc_ValueError,
					     "app.%s: the row is longer than "
					     "%d bytes",
					     t->name, APP_ROW_MAX);
			return NULL;
		}
	if (!atomic_exchange(&used, 1)) {
		/* The first row: the recorder thread starts its turns. */
		atomic_store(&pending, 1);
		memory_wake();
	}
	if (torch_ring_push(&ring, &r) == 0)
		atomic_fetch_add(&appended, 1);
	Py_RETURN_NONE;
}

PyObject *app_py_stats(PyObject *self, PyObject *unused)
{
	char error[sizeof(last_error)];

	(void)self, (void)unused;
	pthread_mutex_lock(&error_lock);
	memcpy(error, last_error, sizeof(error));
	pthread_mutex_unlock(&error_lock);
	return Py_BuildValue(
		"{sKsKsKsKsKss}", "appended",
		(unsigned long long)atomic_load(&appended), "dropped",
		(unsigned long long)(atomic_load(&ring_ready)
					     ? atomic_load(&ring.dropped)
					     : 0),
		"cut", (unsigned long long)atomic_load(&cut), "written",
		(unsigned long long)atomic_load(&written), "errors",
		(unsigned long long)atomic_load(&errors), "error", error);
}
