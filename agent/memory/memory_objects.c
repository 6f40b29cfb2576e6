/*
 * memory_objects: walking Python's heap with a budget.  See
 * memory_objects.h.
 */
#include "memory_objects.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpython/cpython.h"
#include "python/pygil.h"

#define CHECK_EVERY 4096       /* objects between deadline checks */
#define UNTRACKED_DEPTH_MAX 8  /* untracked containers walked into, nested */
#define HOLDERS_MAX (1u << 18) /* tensors given a holder */
#define MODULES_MAX 65536      /* modules looked at for holders */
#define ITEMS_MAX 10000	       /* items of a list/dict variable looked at */
#define FRAMES_MAX 64	       /* frames per thread looked at */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static uint64_t hash_ptr(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* ---- pointer sets and maps (open addressing, no deletion) ----------- */

struct ptrmap {
	const void **keys;
	void **vals;
	size_t cap, n, max; /* cap a power of two, max <= cap / 2 */
};

static int ptrmap_init(struct ptrmap *m, size_t max, int with_vals)
{
	size_t cap = 16;

	while (cap < 2 * max)
		cap <<= 1;
	memset(m, 0, sizeof(*m));
	m->keys = calloc(cap, sizeof(*m->keys));
	m->vals = with_vals ? calloc(cap, sizeof(*m->vals)) : NULL;
	if (!m->keys || (with_vals && !m->vals)) {
		free(m->keys);
		free(m->vals);
		return -ENOMEM;
	}
	m->cap = cap;
	m->max = max;
	return 0;
}

static void ptrmap_release(struct ptrmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* The slot of key: *found says whether it was there.  NULL when the key
 * is new and the map is full. */
static size_t ptrmap_slot(struct ptrmap *m, const void *key, int *found)
{
	size_t i = (size_t)hash_ptr(key) & (m->cap - 1);

	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	*found = m->keys[i] == key;
	return i;
}

/* Adds key; 1 added, 0 already there, -1 full. */
static int ptrmap_add(struct ptrmap *m, const void *key, void *val)
{
	int found;
	size_t i = ptrmap_slot(m, key, &found);

	if (found)
		return 0;
	if (m->n >= m->max)
		return -1;
	m->keys[i] = key;
	if (m->vals)
		m->vals[i] = val;
	m->n++;
	return 1;
}

static void *ptrmap_get(struct ptrmap *m, const void *key)
{
	int found;
	size_t i;

	if (!m->cap)
		return NULL;
	i = ptrmap_slot(m, key, &found);
	return found && m->vals ? m->vals[i] : NULL;
}

/* ---- the walk ----------------------------------------------------- */

struct type_stat {
	PyTypeObject *type; /* NULL: the "other types" bucket */
	uint64_t count, bytes;
};

struct walk {
	struct ptrmap types; /* type -> struct type_stat * */
	struct type_stat *stats;
	size_t nstats;
	struct type_stat other;
	struct ptrmap seen; /* untracked objects counted */
	int depth;	    /* untracked containers walked into, nested */
	int incomplete;
	uint64_t untracked, bytes;
};

static void count(struct walk *w, PyObject *o)
{
	size_t size = _PySys_GetSizeOf(o);
	struct type_stat *s;

	if (size == (size_t)-1) {
		PyErr_Clear();
		size = (size_t)Py_TYPE(o)->tp_basicsize;
	}
	s = ptrmap_get(&w->types, Py_TYPE(o));
	if (!s && w->nstats < MEMORY_TYPES_MAX &&
	    ptrmap_add(&w->types, Py_TYPE(o), &w->stats[w->nstats]) == 1) {
		s = &w->stats[w->nstats++];
		s->type = Py_TYPE(o);
	}
	if (!s)
		s = &w->other;
	s->count++;
	s->bytes += size;
	w->bytes += size;
}

static int visit(PyObject *o, void *arg)
{
	struct walk *w = arg;
	int rc;

	if (!o || (PyObject_IS_GC(o) && PyObject_GC_IsTracked(o)))
		return 0; /* walked from the list */
	rc = ptrmap_add(&w->seen, o, NULL);
	if (rc < 0)
		w->incomplete = 1;
	if (rc == 1) {
		w->untracked++;
		count(w, o);
		/* A container the collector does not track (a dict or tuple
		 * of atomic values only: 3.9 and 3.10 keep instance
		 * attributes in such dicts) is walked into, to a bound. */
		if (PyObject_IS_GC(o) && Py_TYPE(o)->tp_traverse &&
		    w->depth < UNTRACKED_DEPTH_MAX) {
			w->depth++;
			Py_TYPE(o)->tp_traverse(o, visit, w);
			w->depth--;
		}
	}
	return 0;
}

static void type_name(PyTypeObject *t, char *out, size_t outlen)
{
	PyObject *mod = NULL, *qual = NULL;
	const char *m, *q;

	if (!t) {
		snprintf(out, outlen, "(other types)");
		return;
	}
	if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) {
		mod = PyObject_GetAttrString((PyObject *)t, "__module__");
		qual = PyObject_GetAttrString((PyObject *)t, "__qualname__");
	}
	m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
	q = qual && PyUnicode_Check(qual) ? PyUnicode_AsUTF8(qual) : NULL;
	if (m && q && strcmp(m, "builtins"))
		snprintf(out, outlen, "%s.%s", m, q);
	else
		snprintf(out, outlen, "%s", q ? q : t->tp_name);
	Py_XDECREF(mod);
	Py_XDECREF(qual);
	PyErr_Clear();
}

static int by_count_desc(const void *a, const void *b)
{
	const struct type_stat *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static int by_bytes_desc(const void *a, const void *b)
{
	const struct type_stat *x = a, *y = b;

	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static struct memory_type_stat *top_list(struct type_stat *s, size_t n,
					 size_t top,
					 int (*cmp)(const void *, const void *))
{
	struct memory_type_stat *out;

	qsort(s, n, sizeof(*s), cmp);
	out = calloc(top ? top : 1, sizeof(*out));
	for (size_t i = 0; out && i < top && i < n; i++) {
		type_name(s[i].type, out[i].name, sizeof(out[i].name));
		out[i].count = s[i].count;
		out[i].bytes = s[i].bytes;
	}
	return out;
}

/* ---- tensors ---------------------------------------------------------- */

/* sys.modules[name] (new reference) without importing; NULL when absent. */
static PyObject *get_module(const char *name)
{
	PyObject *n = PyUnicode_FromString(name), *m;

	m = n ? PyImport_GetModule(n) : NULL;
	Py_XDECREF(n);
	if (!m)
		PyErr_Clear();
	return m;
}

static PyTypeObject *torch_type(const char *module, const char *name)
{
	PyObject *m = get_module(module), *t;

	t = m ? PyObject_GetAttrString(m, name) : NULL;
	Py_XDECREF(m);
	if (t && !PyType_Check(t))
		Py_CLEAR(t);
	PyErr_Clear();
	return (PyTypeObject *)t;
}

static long long call_ll(PyObject *o, const char *method)
{
	PyObject *r = PyObject_CallMethod(o, method, NULL);
	long long v = r && PyLong_Check(r) ? PyLong_AsLongLong(r) : 0;

	Py_XDECREF(r);
	PyErr_Clear();
	return v;
}

static void attr_str(PyObject *o, const char *attr, char *out, size_t outlen)
{
	PyObject *a = PyObject_GetAttrString(o, attr);
	PyObject *s = a ? PyObject_Str(a) : NULL;
	const char *t = s ? PyUnicode_AsUTF8(s) : NULL;

	snprintf(out, outlen, "%s", t ? t : "?");
	Py_XDECREF(s);
	Py_XDECREF(a);
	PyErr_Clear();
}

/* The bytes of t's elements; 0 for a tensor that holds no memory: a
 * meta tensor, torch.compile's FakeTensors (shapes on a "device" with no
 * data: a compiled process makes many), and subclasses whose data lives
 * in tensors they wrap (counted as those).  Their data_ptr() is 0 or
 * raises. */
static uint64_t tensor_bytes(PyObject *t)
{
	long long n, e;

	if (call_ll(t, "data_ptr") == 0)
		return 0;
	n = call_ll(t, "nelement");
	e = call_ll(t, "element_size");
	return n > 0 && e > 0 ? (uint64_t)n * (uint64_t)e : 0;
}

static void add_tensor_kind(struct memory_report *r, PyObject *t)
{
	char dev[32], dt[32];
	uint64_t bytes = tensor_bytes(t);
	size_t i;

	if (bytes == 0)
		return; /* no memory: not in the figures (nor counted) */

	attr_str(t, "device", dev, sizeof(dev));
	attr_str(t, "dtype", dt, sizeof(dt));
	for (i = 0; i < r->ntensors; i++)
		if (!strcmp(r->tensors[i].device, dev) &&
		    !strcmp(r->tensors[i].dtype, dt))
			break;
	if (i == r->ntensors) {
		if (i == MEMORY_TENSOR_KINDS_MAX)
			return;
		snprintf(r->tensors[i].device, sizeof(r->tensors[i].device),
			 "%s", dev);
		snprintf(r->tensors[i].dtype, sizeof(r->tensors[i].dtype), "%s",
			 dt);
		r->ntensors++;
	}
	r->tensors[i].count++;
	r->tensors[i].bytes += bytes;
}

static double cuda_mb(PyObject *cuda, const char *fn, int dev)
{
	PyObject *r = PyObject_CallMethod(cuda, fn, "i", dev);
	double v = r && PyLong_Check(r) ? PyLong_AsDouble(r) / 1048576.0 : 0;

	Py_XDECREF(r);
	PyErr_Clear();
	return v;
}

static void cuda_stats(struct memory_report *r)
{
	PyObject *cuda = get_module("torch.cuda");
	PyObject *init =
		cuda ? PyObject_CallMethod(cuda, "is_initialized", NULL) : NULL;
	long long n = init == Py_True ? call_ll(cuda, "device_count") : 0;

	for (int d = 0; d < n && d < MEMORY_CUDA_MAX; d++) {
		struct memory_cuda *c = &r->cuda[r->ncuda++];
		c->device = d;
		c->allocated = cuda_mb(cuda, "memory_allocated", d);
		c->max_allocated = cuda_mb(cuda, "max_memory_allocated", d);
		c->reserved = cuda_mb(cuda, "memory_reserved", d);
		c->max_reserved = cuda_mb(cuda, "max_memory_reserved", d);
	}
	Py_XDECREF(init);
	Py_XDECREF(cuda);
	PyErr_Clear();
}

static PyObject *gc_objects(char *err, size_t errlen)
{
	PyObject *gc = PyImport_ImportModule("gc");
	PyObject *objs =
		gc ? PyObject_CallMethod(gc, "get_objects", NULL) : NULL;

	Py_XDECREF(gc);
	if (!objs || !PyList_Check(objs)) {
		PyErr_Clear();
		Py_XDECREF(objs);
		snprintf(err, errlen, "gc.get_objects() failed");
		return NULL;
	}
	return objs;
}

int memory_objects_report(size_t top, int budget_ms, struct memory_report *out,
			  char *err, size_t errlen)
{
	double t0 = now_ms(), deadline = t0 + budget_ms;
	struct walk w = {0};
	PyObject *objs;
	PyTypeObject *tensor;
	Py_ssize_t n, i;
	int rc = -ENOMEM;

	memset(out, 0, sizeof(*out));
	if (top > MEMORY_TOP_MAX)
		top = MEMORY_TOP_MAX;
	out->py_blocks = (uint64_t)probing_allocated_blocks();
	w.stats = calloc(MEMORY_TYPES_MAX + 1, sizeof(*w.stats)); /* + other */
	out->tensors = calloc(MEMORY_TENSOR_KINDS_MAX, sizeof(*out->tensors));
	if (!w.stats || !out->tensors ||
	    ptrmap_init(&w.types, MEMORY_TYPES_MAX, 1) ||
	    ptrmap_init(&w.seen, MEMORY_SEEN_MAX, 0)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	objs = gc_objects(err, errlen);
	if (!objs) {
		rc = -EIO;
		goto out;
	}
	tensor = torch_type("torch", "Tensor");
	out->torch = tensor != NULL;
	n = PyList_GET_SIZE(objs);
	for (i = 0; i < n && i < MEMORY_WALK_MAX; i++) {
		PyObject *o = PyList_GET_ITEM(objs, i);
		traverseproc trav = Py_TYPE(o)->tp_traverse;

		if (i % CHECK_EVERY == 0 && i &&
		    (now_ms() > deadline || pygil_should_stop()))
			break;
		count(&w, o);
		if (trav)
			trav(o, visit, &w);
		if (tensor && PyObject_TypeCheck(o, tensor))
			add_tensor_kind(out, o);
	}
	out->objects = (uint64_t)i;
	out->complete = i == n && !w.incomplete;
	Py_DECREF(objs);
	Py_XDECREF(tensor);
	out->untracked = w.untracked;
	out->bytes = w.bytes;
	if (w.other.count)
		w.stats[w.nstats++] = w.other;
	out->ntop = top < w.nstats ? top : w.nstats;
	out->by_count = top_list(w.stats, w.nstats, out->ntop, by_count_desc);
	out->by_size = top_list(w.stats, w.nstats, out->ntop, by_bytes_desc);
	if (!out->by_count || !out->by_size) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	cuda_stats(out);
	PyErr_Clear();
	rc = 0;
out:
	out->elapsed_ms = now_ms() - t0;
	free(w.stats);
	ptrmap_release(&w.types);
	ptrmap_release(&w.seen);
	if (rc)
		memory_report_release(out);
	return rc;
}

void memory_report_release(struct memory_report *r)
{
	free(r->by_count);
	free(r->by_size);
	free(r->tensors);
	r->by_count = r->by_size = NULL;
	r->tensors = NULL;
	r->ntop = r->ntensors = 0;
}

/* ---- python.tensors: who holds what ------------------------------ */

struct holders {
	struct ptrmap map; /* tensor -> malloc'd name */
	double deadline;
};

static void hold(struct holders *h, PyObject *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void hold(struct holders *h, PyObject *t, const char *fmt, ...)
{
	char buf[MEMORY_NAME_MAX];
	va_list ap;
	int found;

	if (h->map.n >= h->map.max)
		return;
	ptrmap_slot(&h->map, t, &found);
	if (found)
		return; /* the first name found wins */
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	char *s = strdup(buf);
	if (s && ptrmap_add(&h->map, t, s) != 1)
		free(s);
}

static void hold_items(struct holders *h, PyTypeObject *tensor, PyObject *v,
		       const char *name)
{
	PyObject *key, *item;
	Py_ssize_t pos = 0;

	if (PyObject_TypeCheck(v, tensor)) {
		hold(h, v, "%s", name);
	} else if (PyList_Check(v) || PyTuple_Check(v)) {
		Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
		for (Py_ssize_t i = 0; i < n && i < ITEMS_MAX; i++) {
			item = PySequence_Fast_GET_ITEM(v, i);
			if (PyObject_TypeCheck(item, tensor))
				hold(h, item, "%s[%zd]", name, i);
		}
	} else if (PyDict_Check(v)) {
		for (int i = 0;
		     i < ITEMS_MAX && PyDict_Next(v, &pos, &key, &item); i++) {
			const char *k = PyUnicode_Check(key)
						? PyUnicode_AsUTF8(key)
						: NULL;
			if (k && PyObject_TypeCheck(item, tensor))
				hold(h, item, "%s['%s']", name, k);
		}
	}
	PyErr_Clear();
}

static void hold_namespace(struct holders *h, PyTypeObject *tensor,
			   PyObject *ns, const char *prefix)
{
	PyObject *key, *v;
	Py_ssize_t pos = 0;
	char name[MEMORY_NAME_MAX];

	if (!ns || !PyDict_Check(ns))
		return;
	while (PyDict_Next(ns, &pos, &key, &v)) {
		const char *k =
			PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
		if (!k || k[0] == '_')
			continue;
		snprintf(name, sizeof(name), "%s%s", prefix, k);
		hold_items(h, tensor, v, name);
	}
	PyErr_Clear();
}

/* Parameters and buffers of module m (named path), and its children. */
static void hold_module(struct holders *h, PyTypeObject *tensor, PyObject *m,
			const char *path, int depth)
{
	static const char *const dicts[] = {"_parameters", "_buffers"};
	PyObject *key, *v, *grad;
	Py_ssize_t pos;
	char name[MEMORY_NAME_MAX];

	if (depth > 64 || now_ms() > h->deadline)
		return;
	for (int d = 0; d < 2; d++) {
		PyObject *dict = PyObject_GetAttrString(m, dicts[d]);
		pos = 0;
		while (dict && PyDict_Check(dict) &&
		       PyDict_Next(dict, &pos, &key, &v)) {
			const char *k = PyUnicode_Check(key)
						? PyUnicode_AsUTF8(key)
						: NULL;
			if (!k || !PyObject_TypeCheck(v, tensor))
				continue;
			hold(h, v, "%s.%s", path, k);
			grad = PyObject_GetAttrString(v, "grad");
			if (grad && PyObject_TypeCheck(grad, tensor))
				hold(h, grad, "%s.%s.grad", path, k);
			Py_XDECREF(grad);
		}
		Py_XDECREF(dict);
		PyErr_Clear();
	}
	PyObject *mods = PyObject_GetAttrString(m, "_modules");
	pos = 0;
	while (mods && PyDict_Check(mods) &&
	       PyDict_Next(mods, &pos, &key, &v)) {
		const char *k =
			PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
		if (!k || v == Py_None)
			continue;
		snprintf(name, sizeof(name), "%s.%s", path, k);
		hold_module(h, tensor, v, name, depth + 1);
	}
	Py_XDECREF(mods);
	PyErr_Clear();
}

/* The variables in view: __main__'s globals, then the locals of every
 * thread's frames, innermost first. */
#define SPACES_MAX 1024

struct spaces {
	PyObject *dict[SPACES_MAX];  /* owned */
	char prefix[SPACES_MAX][80]; /* "" or "func:" */
	size_t n;
};

static void spaces_add(struct spaces *sp, PyObject *dict, const char *prefix)
{
	if (sp->n == SPACES_MAX || !dict || !PyDict_Check(dict))
		return;
	Py_INCREF(dict);
	sp->dict[sp->n] = dict;
	snprintf(sp->prefix[sp->n], sizeof(sp->prefix[0]), "%s", prefix);
	sp->n++;
}

static void spaces_fill(struct spaces *sp, PyObject *main_dict)
{
	PyObject *sys = PyImport_ImportModule("sys");
	PyObject *frames =
		sys ? PyObject_CallMethod(sys, "_current_frames", NULL) : NULL;
	PyObject *key, *f;
	Py_ssize_t pos = 0;
	char prefix[80];

	spaces_add(sp, main_dict, "");
	while (frames && PyDict_Check(frames) &&
	       PyDict_Next(frames, &pos, &key, &f)) {
		PyFrameObject *stack[FRAMES_MAX], *fr = (PyFrameObject *)f;
		int depth = 0;

		/* Outermost first: the loop that owns the model and the
		 * batch names them, rather than the library frames below it
		 * (forward's self, _call_impl's input). */
		Py_INCREF(fr);
		while (fr && depth < FRAMES_MAX) {
			stack[depth++] = fr;
			fr = PyFrame_GetBack(fr);
		}
		Py_XDECREF(fr);
		while (depth-- > 0) {
			PyCodeObject *co = PyFrame_GetCode(stack[depth]);
			const char *fn = PyUnicode_AsUTF8(co->co_name);
			if (fn && strcmp(fn, "<module>")) {
				PyObject *locals =
					cpython.frame.locals(stack[depth]);
				snprintf(prefix, sizeof(prefix), "%s:", fn);
				spaces_add(sp, locals, prefix);
				Py_XDECREF(locals);
			}
			Py_DECREF(co);
			Py_DECREF(stack[depth]);
			PyErr_Clear();
		}
	}
	Py_XDECREF(frames);
	Py_XDECREF(sys);
	PyErr_Clear();
}

static void spaces_release(struct spaces *sp)
{
	for (size_t i = 0; i < sp->n; i++)
		Py_DECREF(sp->dict[i]);
	sp->n = 0;
}

/* The name of root module m: a variable bound to it (a global of
 * __main__, else a local), else its class. */
static void root_name(const struct spaces *sp, PyObject *m, char *out,
		      size_t outlen)
{
	PyObject *key, *v;

	for (size_t i = 0; i < sp->n; i++) {
		Py_ssize_t pos = 0;
		while (PyDict_Next(sp->dict[i], &pos, &key, &v))
			if (v == m && PyUnicode_Check(key) &&
			    PyUnicode_CompareWithASCIIString(key, "self")) {
				snprintf(out, outlen, "%s",
					 PyUnicode_AsUTF8(key));
				PyErr_Clear();
				return;
			}
	}
	snprintf(out, outlen, "%s", Py_TYPE(m)->tp_name);
}

static void hold_modules(struct holders *h, PyTypeObject *tensor,
			 PyObject *objs, const struct spaces *sp)
{
	PyTypeObject *module = torch_type("torch.nn.modules.module", "Module");
	struct ptrmap children;
	PyObject **mods;
	size_t nmods = 0;
	char name[MEMORY_NAME_MAX];

	mods = module ? calloc(MODULES_MAX, sizeof(*mods)) : NULL;
	if (!mods || ptrmap_init(&children, MODULES_MAX, 0)) {
		free(mods);
		Py_XDECREF(module);
		return;
	}
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objs) && nmods < MODULES_MAX;
	     i++) {
		PyObject *o = PyList_GET_ITEM(objs, i), *sub, *key, *v;
		Py_ssize_t pos = 0;

		if (!PyObject_TypeCheck(o, module))
			continue;
		mods[nmods++] = o;
		sub = PyObject_GetAttrString(o, "_modules");
		while (sub && PyDict_Check(sub) &&
		       PyDict_Next(sub, &pos, &key, &v))
			ptrmap_add(&children, v, NULL);
		Py_XDECREF(sub);
		PyErr_Clear();
	}
	for (size_t i = 0; i < nmods; i++) {
		int found;
		ptrmap_slot(&children, mods[i], &found);
		if (found)
			continue;
		root_name(sp, mods[i], name, sizeof(name));
		hold_module(h, tensor, mods[i], name, 0);
	}
	ptrmap_release(&children);
	free(mods);
	Py_DECREF(module);
}

static void shape_text(PyObject *t, char *out, size_t outlen)
{
	PyObject *shape = PyObject_GetAttrString(t, "shape");
	size_t k;

	snprintf(out, outlen, "[");
	k = 1;
	for (Py_ssize_t i = 0; shape && PyTuple_Check(shape) &&
			       i < PyTuple_GET_SIZE(shape) && k < outlen;
	     i++)
		k += (size_t)snprintf(
			out + k, outlen - k, "%s%lld", i ? ", " : "",
			PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i)));
	if (k < outlen)
		snprintf(out + k, outlen - k, "]");
	Py_XDECREF(shape);
	PyErr_Clear();
}

int memory_objects_tensors(int budget_ms, struct memory_tensor **out, size_t *n,
			   int *complete, char *err, size_t errlen)
{
	double deadline = now_ms() + budget_ms;
	PyTypeObject *tensor = torch_type("torch", "Tensor");
	struct holders h = {.deadline = deadline};
	struct spaces *sp = NULL;
	struct memory_tensor *rows = NULL;
	PyObject *objs = NULL, *main_mod = NULL, *main_dict = NULL;
	size_t nrows = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	*complete = 1;
	if (!tensor) {
		snprintf(err, errlen, "torch is not imported in this process");
		return -ENOENT;
	}
	objs = gc_objects(err, errlen);
	if (!objs) {
		Py_DECREF(tensor);
		return -EIO;
	}
	sp = calloc(1, sizeof(*sp)); /* 90 KiB: not on a GIL thread's stack */
	if (!sp || ptrmap_init(&h.map, HOLDERS_MAX, 1)) {
		rc = -ENOMEM;
		goto out;
	}
	main_mod = get_module("__main__");
	main_dict = main_mod ? PyModule_GetDict(main_mod) : NULL;
	spaces_fill(sp, main_dict);
	hold_modules(&h, tensor, objs, sp);
	for (size_t i = 0; i < sp->n; i++)
		hold_namespace(&h, tensor, sp->dict[i], sp->prefix[i]);
	rows = calloc(64, sizeof(*rows));
	size_t cap = 64;
	for (Py_ssize_t i = 0; rows && i < PyList_GET_SIZE(objs); i++) {
		PyObject *o = PyList_GET_ITEM(objs, i), *gf;
		const char *holder;

		if (i % CHECK_EVERY == 0 &&
		    (now_ms() > deadline || pygil_should_stop())) {
			*complete = 0;
			break;
		}
		if (!PyObject_TypeCheck(o, tensor))
			continue;
		if (nrows == MEMORY_TENSORS_MAX) {
			*complete = 0;
			break;
		}
		if (nrows == cap) {
			struct memory_tensor *r =
				realloc(rows, 2 * cap * sizeof(*rows));
			if (!r)
				break;
			rows = r;
			cap *= 2;
		}
		struct memory_tensor *m = &rows[nrows++];
		memset(m, 0, sizeof(*m));
		m->id = (uint64_t)(uintptr_t)o;
		shape_text(o, m->shape, sizeof(m->shape));
		attr_str(o, "dtype", m->dtype, sizeof(m->dtype));
		attr_str(o, "device", m->device, sizeof(m->device));
		m->bytes = tensor_bytes(o);
		PyObject *rg = PyObject_GetAttrString(o, "requires_grad");
		m->requires_grad = rg == Py_True;
		Py_XDECREF(rg);
		gf = PyObject_GetAttrString(o, "grad_fn");
		if (gf && gf != Py_None) {
			const char *tn = Py_TYPE(gf)->tp_name,
				   *dot = strrchr(tn, '.');
			snprintf(m->grad_fn, sizeof(m->grad_fn), "%s",
				 dot ? dot + 1 : tn);
		}
		Py_XDECREF(gf);
		PyErr_Clear();
		holder = ptrmap_get(&h.map, o);
		snprintf(m->holder, sizeof(m->holder), "%s",
			 holder ? holder : "");
	}
	if (!rows) {
		rc = -ENOMEM;
		goto out;
	}
	*out = rows;
	*n = nrows;
out:
	if (rc)
		snprintf(err, errlen, "out of memory");
	for (size_t i = 0; h.map.vals && i < h.map.cap; i++)
		free(h.map.vals[i]);
	ptrmap_release(&h.map);
	if (sp)
		spaces_release(sp);
	free(sp);
	Py_XDECREF(main_mod);
	Py_XDECREF(objs);
	Py_DECREF(tensor);
	return rc;
}
