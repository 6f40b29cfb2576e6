/*
 * dbgtasks: a stop's held threads and asyncio tasks.  See dbgtasks.h.
 */
#include "cpython/pycompat.h"
#include <frameobject.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpython/cpython.h"
#include "debugger.h"
#include "dbgtasks.h"
#include "python/gilcall.h"
#include "python/pygil.h"
#include "python/pyrepr.h"
#include "python/pytasks.h"

#define CAPTURE_RUN_MS 5000 /* the capture interrupted past this */

struct entry {
	struct dbgtask_entry e;
	int64_t frame_base;
	struct debugger_pframe *frames;
	size_t nframes;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int enabled;
static unsigned captured; /* the epoch of the table; 0: none */
static unsigned asked;	  /* the latest epoch a capture was asked for */
static unsigned failed;	  /* an epoch whose capture failed; 0: none */
static unsigned generation; /* bumped by each release: a capture that
			       began before one keeps nothing */
static struct entry *table;
static size_t ntable;
static int64_t next_frame = DBGTASKS_FRAME_BASE;

void dbgtasks_enable(int on)
{
	atomic_store(&enabled, on);
}

int dbgtasks_enabled(void)
{
	return atomic_load(&enabled);
}

/* GIL held. */
static void entry_free(struct entry *x)
{
	for (size_t d = 0; d < x->nframes; d++) {
		free(x->frames[d].func);
		free(x->frames[d].file);
		Py_XDECREF(x->frames[d].obj);
	}
	free(x->frames);
}

static void table_free(struct entry *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		entry_free(&t[i]);
	free(t);
}

struct debugger_pframe *dbgtasks_frames_of(PyFrameObject *f, size_t max,
					   size_t *n)
{
	struct debugger_pframe *fr = calloc(max ? max : 1, sizeof(*fr));
	PyFrameObject *cur;
	size_t k = 0;

	*n = 0;
	if (!fr)
		return NULL;
	cur = (PyFrameObject *)Py_XNewRef((PyObject *)f);
	while (cur && k < max) {
		PyCodeObject *co = PyFrame_GetCode(cur);

		fr[k].obj = (PyObject *)cur;
		fr[k].line = PyFrame_GetLineNumber(cur);
		fr[k].func = pyrepr_utf8_dup(cpython.frame.qualname(co));
		fr[k].file = pyrepr_utf8_dup(co->co_filename);
		Py_DECREF(co);
		k++;
		cur = PyFrame_GetBack(cur);
	}
	Py_XDECREF(cur);
	*n = k;
	return fr;
}

/* GIL held: one entry from debug_view()'s (id, label, ident, frames). */
static int entry_of(PyObject *row, struct entry *x)
{
	PyObject *label, *frames;
	Py_ssize_t n;

	if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4 ||
	    !PyList_Check(PyTuple_GET_ITEM(row, 3)))
		return -EPROTO;
	label = PyTuple_GET_ITEM(row, 1);
	frames = PyTuple_GET_ITEM(row, 3);
	snprintf(x->e.label, sizeof(x->e.label), "%s",
		 PyUnicode_Check(label) && PyUnicode_AsUTF8(label)
			 ? PyUnicode_AsUTF8(label)
			 : "task");
	PyErr_Clear();
	x->e.ident = (uint64_t)PyLong_AsUnsignedLongLongMask(
		PyTuple_GET_ITEM(row, 2));
	PyErr_Clear();
	n = PyList_GET_SIZE(frames);
	if (n > DBGTASKS_FRAMES_MAX)
		n = DBGTASKS_FRAMES_MAX;
	x->frames = n ? calloc((size_t)n, sizeof(*x->frames)) : NULL;
	if (n && !x->frames)
		return -ENOMEM;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *f = PyList_GET_ITEM(frames, i);
		struct debugger_pframe *p = &x->frames[x->nframes];
		PyCodeObject *co;

		if (!PyFrame_Check(f))
			continue;
		co = PyFrame_GetCode((PyFrameObject *)f);
		p->obj = Py_NewRef(f);
		p->line = PyFrame_GetLineNumber((PyFrameObject *)f);
		p->func = pyrepr_utf8_dup(cpython.frame.qualname(co));
		p->file = pyrepr_utf8_dup(co->co_filename);
		Py_DECREF(co);
		x->nframes++;
		if (!p->func || !p->file)
			return -ENOMEM; /* the caller frees what x holds */
	}
	return 0;
}

struct capture_call {
	struct gilcall c;
	unsigned epoch;
	long paused[DEBUGGER_PAUSED_MAX];
	size_t npaused;
	int rc;
	char err[160];
	char tasks_err[160]; /* the tasks alone could not be listed */
};

static int is_paused(const struct capture_call *c, long tid)
{
	for (size_t i = 0; i < c->npaused; i++)
		if (c->paused[i] == tid)
			return 1;
	return 0;
}

/* GIL held: the frames of ts, if it is held: a thread with a Python
 * frame but this one, the agent's and the paused.  1 when t took them,
 * 0 when it is not held, -ENOMEM. */
static int held_entry(const struct capture_call *c, PyThreadState *ts,
		      struct entry *t)
{
	long tid = (long)cpython.frame.native_id(ts);
	PyFrameObject *f;

	if (ts == PyThreadState_Get() || tid <= 0 ||
	    pygil_is_own_thread(tid) || is_paused(c, tid) ||
	    !(f = cpython.frame.thread_frame(ts)))
		return 0;
	t->frames = dbgtasks_frames_of(f, DBGTASKS_FRAMES_MAX, &t->nframes);
	Py_DECREF(f);
	if (!t->frames)
		return -ENOMEM;
	t->e.id = tid;
	t->e.ident = (uint64_t)ts->thread_id;
	return 1;
}

/* GIL held: an entry in t (at most max) per held thread of this
 * interpreter, the main thread's first (the list is newest first, and
 * may be longer than max).  Their number. */
static size_t held_threads(const struct capture_call *c, struct entry *t,
			   size_t max)
{
	size_t n = 0;
#ifndef Py_GIL_DISABLED
	PyInterpreterState *in =
		PyThreadState_GetInterpreter(PyThreadState_Get());
	long main_tid = (long)getpid();
	int gc, rc = 0;

	/* No Python code may run during the walk: a collection (a frame
	 * object made may start one) could run finalizers, which may
	 * switch threads and free thread states under it. */
	gc = PyGC_Disable();
	for (int pass = 0; pass < 2 && rc >= 0; pass++)
		for (PyThreadState *ts = PyInterpreterState_ThreadHead(in);
		     ts && n < max && rc >= 0; ts = PyThreadState_Next(ts)) {
			int is_main = (long)cpython.frame.native_id(ts) ==
				      main_tid;

			if (is_main != !pass)
				continue;
			rc = held_entry(c, ts, &t[n]);
			n += rc > 0;
		}
	if (gc)
		PyGC_Enable();
#else
	(void)c, (void)t, (void)max;
#endif
	return n;
}

/* GIL held: an entry in t (at most DBGTASKS_MAX) per asyncio task;
 * their number (c->rc and c->err say why none). */
static size_t tasks(struct capture_call *c, struct entry *t)
{
	PyObject *fn = pytasks_get("debug_view"), *res;
	Py_ssize_t len;
	size_t n = 0;

	res = fn ? PyObject_CallFunction(fn, "nn", (Py_ssize_t)DBGTASKS_MAX,
					 (Py_ssize_t)DBGTASKS_FRAMES_MAX)
		 : NULL;
	Py_XDECREF(fn);
	if (!res || !PyList_Check(res)) {
		PyErr_Clear();
		Py_XDECREF(res);
		snprintf(c->tasks_err, sizeof(c->tasks_err),
			 "listing asyncio's tasks failed");
		return 0;
	}
	len = PyList_GET_SIZE(res);
	if (len > DBGTASKS_MAX)
		len = DBGTASKS_MAX;
	for (Py_ssize_t i = 0; i < len; i++) {
		if (entry_of(PyList_GET_ITEM(res, i), &t[n])) {
			entry_free(&t[n]); /* what it had taken */
			memset(&t[n], 0, sizeof(t[n]));
			break;
		}
		t[n].e.id = DBGTASKS_ID_BASE + (long)n;
		n++;
	}
	Py_DECREF(res);
	return n;
}

static void capture_run(struct gilcall *gc)
{
	struct capture_call *c = (struct capture_call *)gc;
	struct entry *t, *old;
	size_t n, nold;
	unsigned gen;

	pthread_mutex_lock(&lock);
	gen = generation;
	if (captured == c->epoch) {
		pthread_mutex_unlock(&lock);
		return;
	}
	pthread_mutex_unlock(&lock);
	t = calloc(DBGTASKS_HELD_MAX + DBGTASKS_MAX, sizeof(*t));
	if (!t) {
		c->rc = -ENOMEM;
		snprintf(c->err, sizeof(c->err), "out of memory");
		return;
	}
	n = held_threads(c, t, DBGTASKS_HELD_MAX);
	if (atomic_load(&enabled))
		n += tasks(c, t + n);
	pthread_mutex_lock(&lock);
	if (gen != generation || c->epoch != asked) {
		/* The session ended meanwhile, or the program was resumed
		 * and a later stop's capture asked for: nothing is kept for
		 * this one. */
		pthread_mutex_unlock(&lock);
		table_free(t, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		t[i].frame_base = next_frame;
		next_frame += DBGTASKS_FRAMES_MAX;
	}
	old = table;
	nold = ntable;
	table = t;
	ntable = n;
	captured = c->epoch;
	pthread_mutex_unlock(&lock);
	table_free(old, nold);
}

static void plain_release(struct gilcall *gc)
{
	free(gc);
}

int dbgtasks_capture(unsigned epoch, const long *paused, size_t npaused,
		     volatile int *cancel, char *note, size_t notelen)
{
	struct capture_call *c;
	int rc;

	note[0] = 0;
	pthread_mutex_lock(&lock);
	rc = captured == epoch ? 0 : failed == epoch ? -EAGAIN : 1;
	if (rc == 1 && (int)(epoch - asked) > 0)
		asked = epoch;
	pthread_mutex_unlock(&lock);
	if (rc <= 0)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(note, notelen, "out of memory");
		return -ENOMEM;
	}
	c->c.run = capture_run;
	c->c.release = plain_release;
	c->c.kind = PYGIL_REPR;
	c->c.what = "reading the stop's threads in C and tasks";
	c->epoch = epoch;
	if (npaused > DEBUGGER_PAUSED_MAX)
		npaused = DEBUGGER_PAUSED_MAX;
	memcpy(c->paused, paused, npaused * sizeof(*paused));
	c->npaused = npaused;
	rc = gilcall_run(&c->c, CAPTURE_RUN_MS, cancel, note, notelen);
	if (!rc && c->rc) {
		rc = c->rc;
		snprintf(note, notelen, "%s", c->err);
	} else if (!rc && c->tasks_err[0]) {
		snprintf(note, notelen, "no asyncio tasks: %s", c->tasks_err);
	}
	gilcall_done(&c->c);
	/* Not tried again in this stop: each request would wait for the
	 * GIL again (a thread that holds it in C). */
	if (rc && rc != -ECANCELED) {
		pthread_mutex_lock(&lock);
		failed = epoch;
		pthread_mutex_unlock(&lock);
	}
	return rc;
}

size_t dbgtasks_held_list(unsigned epoch, long *ids, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; captured == epoch && i < ntable && n < max; i++)
		if (table[i].e.id < DBGTASKS_ID_BASE)
			ids[n++] = table[i].e.id;
	pthread_mutex_unlock(&lock);
	return n;
}

size_t dbgtasks_list(unsigned epoch, struct dbgtask_entry *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; captured == epoch && i < ntable && n < max; i++)
		if (table[i].e.id >= DBGTASKS_ID_BASE)
			out[n++] = table[i].e;
	pthread_mutex_unlock(&lock);
	return n;
}

static struct entry *entry_locked(unsigned epoch, long id)
{
	for (size_t i = 0; captured == epoch && i < ntable; i++)
		if (table[i].e.id == id)
			return &table[i];
	return NULL;
}

int dbgtasks_held(unsigned epoch, long native_id)
{
	int r;

	pthread_mutex_lock(&lock);
	r = native_id < DBGTASKS_ID_BASE && entry_locked(epoch, native_id);
	pthread_mutex_unlock(&lock);
	return r;
}

int dbgtasks_stale(unsigned epoch)
{
	int r;

	pthread_mutex_lock(&lock);
	r = captured && captured != epoch;
	pthread_mutex_unlock(&lock);
	return r;
}

int dbgtasks_copy_frames(const struct debugger_pframe *src, size_t nsrc,
			 int64_t base, size_t start, size_t levels,
			 struct debugger_frame **out, size_t *n)
{
	struct debugger_frame *f = NULL;
	size_t end = levels ? start + levels : nsrc, k = 0;

	*out = NULL;
	*n = 0;
	if (end > nsrc)
		end = nsrc;
	if (start < end && !(f = calloc(end - start, sizeof(*f))))
		return -ENOMEM;
	for (size_t d = start; d < end; d++, k++) {
		f[k].id = base + (int64_t)d;
		f[k].func = strdup(src[d].func ? src[d].func : "?");
		f[k].file = strdup(src[d].file ? src[d].file : "?");
		f[k].line = src[d].line;
		if (!f[k].func || !f[k].file) {
			debugger_frames_release(f, k + 1);
			return -ENOMEM;
		}
	}
	*out = f;
	*n = k;
	return 0;
}

int dbgtasks_frames(unsigned epoch, long id, size_t start, size_t levels,
		    struct debugger_frame **out, size_t *n, size_t *total)
{
	struct entry *x;
	int rc;

	*out = NULL;
	*n = *total = 0;
	pthread_mutex_lock(&lock);
	if (!(x = entry_locked(epoch, id))) {
		pthread_mutex_unlock(&lock);
		return -ESRCH;
	}
	*total = x->nframes;
	rc = dbgtasks_copy_frames(x->frames, x->nframes, x->frame_base, start,
				  levels, out, n);
	pthread_mutex_unlock(&lock);
	return rc;
}

PyFrameObject *dbgtasks_frame_object(unsigned epoch, int64_t id)
{
	PyObject *obj = NULL;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; captured == epoch && i < ntable && !obj; i++) {
		struct entry *x = &table[i];

		if (id >= x->frame_base &&
		    id < x->frame_base + (int64_t)x->nframes)
			obj = x->frames[id - x->frame_base].obj;
	}
	/* Dropped only with the GIL, which the caller holds. */
	Py_XINCREF(obj);
	pthread_mutex_unlock(&lock);
	return (PyFrameObject *)obj;
}

/* The lock held: takes the table out (the caller frees it, with the GIL
 * and without the lock). */
static void detach_locked(struct entry **old, size_t *nold)
{
	*old = table;
	*nold = ntable;
	table = NULL;
	ntable = 0;
	captured = 0;
}

void dbgtasks_drop_stale(unsigned epoch)
{
	struct entry *old = NULL;
	size_t nold = 0;

	pthread_mutex_lock(&lock);
	if (captured && captured != epoch)
		detach_locked(&old, &nold);
	pthread_mutex_unlock(&lock);
	table_free(old, nold);
}

void dbgtasks_release(void)
{
	struct entry *old;
	size_t nold;

	pthread_mutex_lock(&lock);
	generation++;
	detach_locked(&old, &nold);
	pthread_mutex_unlock(&lock);
	table_free(old, nold);
	atomic_store(&enabled, 0);
}

void dbgtasks_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	table = NULL;
	ntable = 0;
	captured = asked = failed = 0;
	atomic_store(&enabled, 0);
}
