/*
 * pystack: every thread's Python stack, with or without the GIL.
 * See pystack.h.  The GIL path uses the public C API only; the path
 * without it goes through cpython.read (cpython.h).
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fdown.h"
#include "cpython/cpython.h"
#include "errbuf.h"
#include "pygil.h"
#include "pyrepr.h"
#include "pystack.h"

#define WALK_TRIES 3 /* walks of a thread that changed under us */

static void opts_defaults(const struct pystack_opts *o, size_t *depth,
			  size_t *repr)
{
	*depth = o && o->max_depth ? o->max_depth : PYSTACK_DEPTH_MAX;
	if (*depth > PYSTACK_DEPTH_MAX)
		*depth = PYSTACK_DEPTH_MAX;
	*repr = o && o->repr_max ? o->repr_max : PYSTACK_REPR_DEFAULT;
}

static int id_in(uint64_t id, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; ids && i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

/* Is thread id wanted by the filter and exclusion list of o? */
static int wanted(const struct pystack_opts *o, uint64_t id)
{
	if (!o)
		return 1;
	if (o->threads && !id_in(id, o->threads, o->nthreads))
		return 0;
	return !id_in(id, o->exclude, o->nexclude);
}

/* The scheduler state of kernel thread tid, from its stat line. */
static void task_state(long tid, char out[16])
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;
	const char *s = "unknown";

	snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
	f = tid > 0 ? fdown_fopen(path) : NULL;
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		/* "tid (comm) S ...": comm may hold ')' itself. */
		p = strrchr(buf, ')');
		if (p && p[1] == ' ') {
			switch (p[2]) {
			case 'R':
				s = "running";
				break;
			case 'S':
				s = "sleeping";
				break;
			case 'D':
				s = "disk";
				break;
			case 'T':
			case 't':
				s = "stopped";
				break;
			}
		}
	}
	snprintf(out, 16, "%s", s);
}

/* The kernel's name of thread tid (malloc'd), "" when unknown; NULL only
 * when out of memory. */
static char *task_comm(long tid)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
	f = tid > 0 ? fdown_fopen(path) : NULL;
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		buf[strcspn(buf, "\n")] = '\0';
	}
	return strdup(buf);
}

static void frame_release(struct pystack_frame *f)
{
	free(f->func);
	free(f->file);
	for (size_t i = 0; i < f->nlocals; i++) {
		free(f->locals[i].name);
		free(f->locals[i].type);
		free(f->locals[i].value);
	}
	free(f->locals);
}

void pystack_thread_release(struct pystack_thread *t)
{
	for (size_t j = 0; j < t->nframes; j++)
		frame_release(&t->frames[j]);
	free(t->frames);
	free(t->name);
	memset(t, 0, sizeof(*t));
}

void pystack_release(struct pystack *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nthreads; i++)
		pystack_thread_release(&s->threads[i]);
	free(s->threads);
	memset(s, 0, sizeof(*s));
}

/*
 * Without the GIL.
 */

int pystack_take_nogil(struct pystack *out, const struct pystack_opts *o,
		       char *err, size_t errlen)
{
	struct cpython_thread *ts = NULL;
	struct cpython_frame *fr = NULL;
	size_t depth, repr, nts = 0;
	uint64_t holder, main_id;
	long holder_native;
	int rc;

	memset(out, 0, sizeof(*out));
	opts_defaults(o, &depth, &repr);
	if (cpython.read.off_reason()) {
		errbuf_set(err, errlen, "%s", cpython.read.off_reason());
		return -ENOTSUP;
	}
	if (cpython.read.ready() < 0) {
		errbuf_set(err, errlen, "Python is not initialised");
		return -ENOENT;
	}
	/* Scratch; only what is written gets read (large: untouched pages
	 * cost nothing). */
	ts = malloc(PYSTACK_THREADS_MAX * sizeof(*ts));
	fr = malloc(depth * sizeof(*fr));
	if (!ts || !fr)
		goto nomem;
	/* A list that keeps changing gives what could be read of it; one
	 * that gave nothing is read again (a running interpreter has a
	 * thread at least: none read is not "no Python threads"). */
	for (int k = 0; k < WALK_TRIES; k++) {
		rc = cpython.read.threads(ts, PYSTACK_THREADS_MAX, &nts, NULL,
					  0);
		if (rc >= 0 || rc == -ENOENT || nts > 0)
			break;
	}
	if (rc < 0 && rc != -ENOENT && nts == 0) {
		errbuf_set(err, errlen,
			   "the interpreter's threads could not be read "
			   "without the GIL (their list kept changing): try "
			   "again");
		free(ts);
		free(fr);
		return -EAGAIN;
	}
	if (rc == -ENOENT) {
		errbuf_set(err, errlen, "Python is not initialised");
		free(ts);
		free(fr);
		return -ENOENT;
	}
	out->threads = calloc(nts ? nts : 1, sizeof(*out->threads));
	if (!out->threads)
		goto nomem;
	if (cpython.read.gil_holder(&holder, &holder_native) < 0)
		holder = 0;
	main_id = cpython.read.main_thread();
	for (size_t i = 0; i < nts; i++) {
		struct pystack_thread *t = &out->threads[out->nthreads];
		size_t n = 0;
		int trunc = 0;

		if (!wanted(o, ts[i].thread_id))
			continue;
		out->nthreads++;
		t->thread_id = ts[i].thread_id;
		t->native_id = ts[i].native_id;
		t->daemon = -1;
		t->holds_gil = holder && holder == t->thread_id;
		t->is_main = main_id && main_id == t->thread_id;
		/* threading names the main thread so whether or not it was
		 * imported; the kernel's name ("python3") would say less. */
		t->name = t->is_main ? strdup("MainThread")
				     : task_comm(t->native_id);
		if (!t->name)
			goto nomem;
		for (int k = 0; k < WALK_TRIES; k++) {
			rc = cpython.read.walk(&ts[i], fr, depth, &n, &trunc,
					       NULL, 0);
			if (rc != -EFAULT)
				break;
		}
		if (rc < 0) {
			snprintf(t->state, sizeof(t->state), "unknown");
			continue;
		}
		task_state(t->native_id, t->state);
		t->truncated = trunc;
		if (!n)
			continue;
		t->frames = calloc(n, sizeof(*t->frames));
		if (!t->frames)
			goto nomem;
		for (size_t j = 0; j < n; j++) {
			struct pystack_frame *f = &t->frames[j];

			t->nframes++;
			f->func = strdup(fr[j].func);
			f->file = strdup(fr[j].file);
			f->lineno = fr[j].lineno;
			if (!f->func || !f->file)
				goto nomem;
		}
	}
	free(ts);
	free(fr);
	return 0;
nomem:
	free(ts);
	free(fr);
	pystack_release(out);
	errbuf_set(err, errlen, "out of memory");
	return -ENOMEM;
}

uint64_t pystack_gil_holder(long *native_id)
{
	uint64_t id;
	long nid;

	if (cpython.read.gil_holder(&id, &nid) < 0)
		id = 0, nid = 0;
	if (native_id)
		*native_id = nid;
	return id;
}

/*
 * With the GIL.
 */

/* str -> malloc'd UTF-8 (lone surrogates backslash-escaped); NULL with no
 * exception set when out of memory or not a str. */
static char *utf8_dup(PyObject *s)
{
	const char *p;
	PyObject *b;
	char *r;

	if (!s || !PyUnicode_Check(s))
		return NULL;
	p = PyUnicode_AsUTF8(s);
	if (p)
		return strdup(p);
	PyErr_Clear();
	b = PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace");
	if (!b) {
		PyErr_Clear();
		return NULL;
	}
	r = strdup(PyBytes_AS_STRING(b));
	Py_DECREF(b);
	return r;
}

/* The text of the exception being raised, "Type: msg" (malloc'd); clears
 * it.  *kbint is set when it is a KeyboardInterrupt. */
static char *exc_text(int *kbint)
{
	PyObject *type, *value, *tb, *msg = NULL;
	const char *tname = "Exception", *m = NULL;
	char buf[512];

	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	*kbint = type &&
		 PyErr_GivenExceptionMatches(type, PyExc_KeyboardInterrupt);
	if (type && PyType_Check(type))
		tname = ((PyTypeObject *)type)->tp_name;
	if (value && !*kbint)
		msg = PyObject_Str(value);
	if (msg)
		m = PyUnicode_AsUTF8(msg);
	PyErr_Clear();
	if (m && *m)
		snprintf(buf, sizeof(buf), "%s: %s", tname, m);
	else
		snprintf(buf, sizeof(buf), "%s", tname);
	Py_XDECREF(msg);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	return strdup(buf);
}

char *pystack_repr(PyObject *obj, size_t max, int *failed)
{
	PyObject *r;
	char *s;

	*failed = 0;
	if (!max)
		max = PYSTACK_REPR_DEFAULT;
	if (max > PYSTACK_REPR_LIMIT)
		max = PYSTACK_REPR_LIMIT;
	r = pyrepr_bounded(obj, (long)max);
	if (!r) {
		int kb;
		char *t = exc_text(&kb), *out;
		size_t n;

		*failed = kb ? 2 : 1;
		if (!t)
			return NULL;
		n = strlen(t) + 32;
		out = malloc(n);
		if (out)
			snprintf(out, n, "<repr failed: %s>", t);
		free(t);
		return out;
	}
	s = utf8_dup(r);
	Py_DECREF(r);
	return s;
}

/* The locals of a frame waiting for their reprs: references owned. */
struct pending {
	struct pystack_frame *frame;
	PyFrameObject *fobj; /* set when the locals are read in phase two */
	PyObject **kv;	     /* key, value pairs */
	size_t n;
};

struct gil_walk {
	const struct pystack_opts *o;
	size_t depth, repr;
	PyObject *active; /* threading._active, borrowed, or NULL */
	uint64_t main_id;
	PyThreadState *self;
	PyFrameObject **fbuf; /* depth + 1 */
	struct pending *pend;
	size_t npend, pendcap;
};

/* Name and daemon of thread id from threading._active without running
 * Python code: the instance dict's _name and _daemonic. */
static void thread_names(struct gil_walk *w, struct pystack_thread *t)
{
	PyObject *key, *th, *dict = NULL, *v;

	t->daemon = -1;
	if (!w->active)
		return;
	key = PyLong_FromUnsignedLongLong(t->thread_id);
	th = key ? PyDict_GetItemWithError(w->active, key) : NULL;
	Py_XDECREF(key);
	if (th)
		dict = PyObject_GenericGetDict(th, NULL);
	if (dict && PyDict_Check(dict)) {
		v = PyDict_GetItemString(dict, "_name");
		if (v && PyUnicode_Check(v))
			t->name = utf8_dup(v);
		v = PyDict_GetItemString(dict, "_daemonic");
		if (v && PyBool_Check(v))
			t->daemon = v == Py_True;
	}
	Py_XDECREF(dict);
	PyErr_Clear();
}

/* Takes up to PYSTACK_LOCALS_MAX key, value references from the mapping
 * loc into p.  With an exact dict no Python code runs.  0 or -ENOMEM. */
static int locals_copy(struct pending *p, PyObject *loc)
{
	PyObject *k, *v, *items = NULL;
	Py_ssize_t pos = 0;

	p->kv = calloc(2 * PYSTACK_LOCALS_MAX, sizeof(*p->kv));
	if (!p->kv)
		return -ENOMEM;
	if (PyDict_Check(loc)) {
		while (p->n < PYSTACK_LOCALS_MAX &&
		       PyDict_Next(loc, &pos, &k, &v)) {
			p->kv[2 * p->n] = Py_NewRef(k);
			p->kv[2 * p->n + 1] = Py_NewRef(v);
			p->n++;
		}
		return 0;
	}
	/* Another mapping (a class body's __prepare__): phase two only. */
	items = PyMapping_Items(loc);
	for (Py_ssize_t i = 0;
	     items && i < PyList_GET_SIZE(items) && p->n < PYSTACK_LOCALS_MAX;
	     i++) {
		PyObject *kv = PyList_GET_ITEM(items, i);

		if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2)
			continue;
		p->kv[2 * p->n] = Py_NewRef(PyTuple_GET_ITEM(kv, 0));
		p->kv[2 * p->n + 1] = Py_NewRef(PyTuple_GET_ITEM(kv, 1));
		p->n++;
	}
	Py_XDECREF(items);
	PyErr_Clear();
	return 0;
}

/*
 * Queues the locals of frame f for phase two.  A function's locals are
 * copied now: PyFrame_GetLocals then fills a plain dict of its own and
 * runs no Python code (the GC is paused), so they match the stack.  Other
 * frames (module, class body, exec) have their namespace as f_locals,
 * which may be any mapping whose __setitem__ is Python: those keep a
 * reference to the frame and are read in phase two.  0 or -ENOMEM.
 */
static int locals_take(struct gil_walk *w, PyFrameObject *f,
		       struct pystack_frame *pf)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	int optimized = (co->co_flags & CO_OPTIMIZED) != 0;
	struct pending *p;
	PyObject *loc;
	int rc = 0;

	Py_DECREF(co);
	if (w->npend == w->pendcap) {
		size_t cap = w->pendcap ? w->pendcap * 2 : 64;
		struct pending *np = realloc(w->pend, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		w->pend = np;
		w->pendcap = cap;
	}
	p = &w->pend[w->npend++];
	memset(p, 0, sizeof(*p));
	p->frame = pf;
	if (!optimized) {
		p->fobj = (PyFrameObject *)Py_NewRef(f);
		return 0;
	}
	loc = cpython.frame.locals(f);
	if (loc && PyDict_CheckExact(loc))
		rc = locals_copy(p, loc);
	Py_XDECREF(loc);
	PyErr_Clear();
	return rc;
}

/* Fills t's frames from tstate ts.  Phase one: no Python code runs.
 * Returns 0, -ENOMEM, or 1 when the thread is to be left out. */
static int thread_frames(struct gil_walk *w, PyThreadState *ts,
			 struct pystack_thread *t)
{
	size_t n = 0;
	PyFrameObject *f = cpython.frame.thread_frame(ts);
	int rc = 0;

	while (f && n < w->depth) {
		w->fbuf[n++] = f;
		f = PyFrame_GetBack(f);
	}
	if (f) {
		t->truncated = 1;
		Py_DECREF(f);
	}
	PyErr_Clear();
	if (ts == w->self && !n)
		return 1;
	if (n) {
		t->frames = calloc(n, sizeof(*t->frames));
		if (!t->frames)
			rc = -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		struct pystack_frame *pf = &t->frames[i];
		PyCodeObject *co = PyFrame_GetCode(w->fbuf[i]);

		t->nframes++;
		pf->func = utf8_dup(cpython.frame.qualname(co));
		pf->file = utf8_dup(co->co_filename);
		pf->lineno = PyFrame_GetLineNumber(w->fbuf[i]);
		Py_DECREF(co);
		if (!pf->func || !pf->file)
			rc = -ENOMEM;
		else if (w->o && w->o->locals)
			rc = locals_take(w, w->fbuf[i], pf);
	}
	/* The frames are still on their threads' stacks (nothing ran), so
	 * these are not the last references. */
	for (size_t i = 0; i < n; i++)
		Py_DECREF(w->fbuf[i]);
	return rc;
}

/* Phase two: reprs, which run Python code.  0 or -ENOMEM. */
static int locals_repr(struct gil_walk *w)
{
	int stopped = 0, rc = 0;

	for (size_t i = 0; i < w->npend; i++) {
		struct pending *p = &w->pend[i];
		struct pystack_frame *pf = p->frame;

		if (p->fobj && !rc && !stopped) {
			PyObject *loc = cpython.frame.locals(p->fobj);

			if (loc && locals_copy(p, loc) < 0)
				rc = -ENOMEM;
			Py_XDECREF(loc);
			PyErr_Clear();
		}
		Py_CLEAR(p->fobj);
		pf->locals = rc ? NULL
				: calloc(p->n ? p->n : 1, sizeof(*pf->locals));
		if (!pf->locals)
			rc = -ENOMEM;
		for (size_t j = 0; j < p->n; j++) {
			PyObject *k = p->kv[2 * j], *v = p->kv[2 * j + 1];
			struct pystack_var *var;
			PyObject *tn;
			int failed = 0;

			if (rc)
				goto drop;
			var = &pf->locals[pf->nlocals++];
			var->name =
				PyUnicode_Check(k) ? utf8_dup(k) : strdup("?");
			tn = PyType_GetName(Py_TYPE(v));
			var->type =
				tn ? utf8_dup(tn) : strdup(Py_TYPE(v)->tp_name);
			Py_XDECREF(tn);
			PyErr_Clear();
			if (stopped)
				var->value = strdup("<interrupted>");
			else
				var->value = pystack_repr(v, w->repr, &failed);
			/* Our deadline passed (not a KeyboardInterrupt
			 * that a repr raised of its own): no more reprs. */
			if (failed == 2 && pygil_should_stop())
				stopped = 1;
			if (!var->name || !var->type || !var->value)
				rc = -ENOMEM;
		drop:
			Py_DECREF(k);
			Py_DECREF(v);
		}
		free(p->kv);
		p->kv = NULL;
	}
	return rc;
}

/* Drops the references of locals not yet turned into text. */
static void pending_free(struct gil_walk *w)
{
	for (size_t i = 0; i < w->npend; i++) {
		for (size_t j = 0; w->pend[i].kv && j < 2 * w->pend[i].n; j++)
			Py_DECREF(w->pend[i].kv[j]);
		free(w->pend[i].kv);
		Py_XDECREF(w->pend[i].fobj);
	}
	free(w->pend);
}

/* threading._active, borrowed, when threading is imported. */
static PyObject *threading_active(void)
{
	PyObject *mods = PyImport_GetModuleDict(), *mod, *act = NULL;

	mod = mods ? PyDict_GetItemString(mods, "threading") : NULL;
	if (mod && PyModule_Check(mod))
		act = PyDict_GetItemString(PyModule_GetDict(mod), "_active");
	return act && PyDict_Check(act) ? act : NULL;
}

/* Phase one over every interpreter's threads.  0 or -ENOMEM. */
static int take_stacks(struct gil_walk *w, struct pystack *out)
{
	size_t count = 0;

	for (PyInterpreterState *in = PyInterpreterState_Head(); in;
	     in = PyInterpreterState_Next(in))
		for (PyThreadState *ts = PyInterpreterState_ThreadHead(in); ts;
		     ts = PyThreadState_Next(ts))
			count++;
	if (count > PYSTACK_THREADS_MAX)
		count = PYSTACK_THREADS_MAX;
	out->threads = calloc(count ? count : 1, sizeof(*out->threads));
	if (!out->threads)
		return -ENOMEM;
	for (PyInterpreterState *in = PyInterpreterState_Head(); in;
	     in = PyInterpreterState_Next(in)) {
		PyThreadState *ts = PyInterpreterState_ThreadHead(in);

		for (; ts && out->nthreads < count;
		     ts = PyThreadState_Next(ts)) {
			struct pystack_thread *t = &out->threads[out->nthreads];
			int rc;

			if (!wanted(w->o, ts->thread_id))
				continue;
			memset(t, 0, sizeof(*t));
			t->thread_id = ts->thread_id;
			t->native_id = (long)cpython.frame.native_id(ts);
			rc = thread_frames(w, ts, t);
			if (rc == 1) {
				memset(t, 0, sizeof(*t));
				continue;
			}
			out->nthreads++;
			if (rc < 0)
				return rc;
			t->holds_gil = ts == w->self;
			t->is_main = w->main_id && w->main_id == t->thread_id;
			if (PyThreadState_GetInterpreter(w->self) == in)
				thread_names(w, t);
			else
				t->daemon = -1;
			if (!t->name)
				t->name = t->is_main ? strdup("MainThread")
						     : task_comm(t->native_id);
			if (!t->name)
				return -ENOMEM;
			task_state(t->native_id, t->state);
		}
	}
	return 0;
}

int pystack_take_gil(struct pystack *out, const struct pystack_opts *o,
		     char *err, size_t errlen)
{
	struct gil_walk w = {.o = o};
	PyObject *et, *ev, *etb;
	int gc, rc;

	memset(out, 0, sizeof(*out));
	out->with_gil = 1;
	opts_defaults(o, &w.depth, &w.repr);
	w.fbuf = calloc(w.depth + 1, sizeof(*w.fbuf));
	if (!w.fbuf) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	PyErr_Fetch(&et, &ev, &etb);
	w.self = PyThreadState_Get();
	w.main_id = cpython.read.main_thread();
	w.active = threading_active();
	/* Phase one must run no Python code: a collection could run
	 * finalizers, which may switch threads and free thread states. */
	gc = PyGC_Disable();
	rc = take_stacks(&w, out);
	if (gc)
		PyGC_Enable();
	if (!rc)
		rc = locals_repr(&w);
	pending_free(&w);
	free(w.fbuf);
	PyErr_Clear();
	PyErr_Restore(et, ev, etb);
	if (rc < 0) {
		pystack_release(out);
		out->with_gil = 1;
		errbuf_set(err, errlen, "out of memory");
	}
	return rc;
}
