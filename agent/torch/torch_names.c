/*
 * torch_names: module names cached per module object.  See torch_names.h.
 */
#include "torch_names.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpython/cpython.h"

#define SLOTS (2 * TORCH_MODULES_MAX) /* open addressing, half full at most */
#define CALL_IMPL_FILE "torch/nn/modules/module.py"
#define CALL_IMPL_DEPTH_MAX 512 /* frames looked at for an enclosing call */
#define NAME_SLOTS (2 * TORCH_NAMES_MAX)

struct entry {
	PyObject *key; /* the module's address (not a reference) */
	PyObject *wr;  /* a weak reference to it, owned */
	struct torch_module m;
	int provisional; /* named as a root by its class: a walk from a
			    real root may still name it */
};

static struct entry *table;
static _Atomic int nentries; /* read by torch_names_modules anywhere */
static int32_t next_index;

/* Interned names: written under the GIL, read by any thread below the
 * published count; a text never moves or goes. */
static char *texts[TORCH_NAMES_MAX];
static _Atomic int32_t ntexts;
static int32_t *name_slots; /* id + 1, 0 = empty */

static uint64_t hash_ptr(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static int ensure_tables(void)
{
	if (!table)
		table = calloc(SLOTS, sizeof(*table));
	if (!name_slots)
		name_slots = calloc(NAME_SLOTS, sizeof(*name_slots));
	if (!table || !name_slots)
		return -ENOMEM;
	if (atomic_load(&ntexts) == 0) {
		texts[0] = strdup("(other)");
		if (!texts[0])
			return -ENOMEM;
		atomic_store_explicit(&ntexts, 1, memory_order_release);
	}
	return 0;
}

int32_t torch_names_intern(const char *name)
{
	char buf[TORCH_NAME_LEN];
	int32_t n = atomic_load_explicit(&ntexts, memory_order_relaxed);
	uint64_t h;

	if (ensure_tables())
		return TORCH_NAME_OTHER;
	n = atomic_load_explicit(&ntexts, memory_order_relaxed);
	snprintf(buf, sizeof(buf), "%s", name);
	h = hash_str(buf);
	for (uint64_t i = 0; i < NAME_SLOTS; i++) {
		int32_t *slot = &name_slots[(h + i) & (NAME_SLOTS - 1)];
		if (*slot == 0) {
			if (n >= TORCH_NAMES_MAX)
				return TORCH_NAME_OTHER;
			texts[n] = strdup(buf);
			if (!texts[n])
				return TORCH_NAME_OTHER;
			*slot = n + 1;
			atomic_store_explicit(&ntexts, n + 1,
					      memory_order_release);
			return n;
		}
		if (strcmp(texts[*slot - 1], buf) == 0)
			return *slot - 1;
	}
	return TORCH_NAME_OTHER;
}

const char *torch_names_text(int32_t id)
{
	int32_t n = atomic_load_explicit(&ntexts, memory_order_acquire);

	if (id < 0 || id >= n)
		return "(other)";
	return texts[id];
}

static struct entry *find(PyObject *module)
{
	uint64_t h = hash_ptr(module);

	for (uint64_t i = 0; i < SLOTS; i++) {
		struct entry *e = &table[(h + i) & (SLOTS - 1)];
		if (!e->key || e->key == module)
			return e;
	}
	return NULL;
}

/* Does e's weak reference still lead to object o? */
static int refers_to(const struct entry *e, PyObject *o)
{
	PyObject *now = NULL;
	int same;

	if (!e->wr || PyWeakref_GetRef(e->wr, &now) < 0) {
		PyErr_Clear();
		return 0;
	}
	same = now == o;
	Py_XDECREF(now);
	return same;
}

/* Is e a live entry for module? */
static int valid(const struct entry *e, PyObject *module)
{
	return e && e->key == module && refers_to(e, module);
}

/* Rebuilds the table without the entries of dead modules. */
static void sweep(void)
{
	struct entry *old = table;

	table = calloc(SLOTS, sizeof(*table));
	if (!table) {
		table = old;
		return;
	}
	nentries = 0;
	for (int i = 0; i < SLOTS; i++) {
		struct entry *e = &old[i], *n;
		if (!e->key)
			continue;
		if (!refers_to(e, e->key)) {
			Py_XDECREF(e->wr);
			continue;
		}
		n = find(e->key);
		*n = *e;
		nentries++;
	}
	free(old);
}

/* Caches module as name; fills out whether cached or not. */
static void add(PyObject *module, const char *name, int provisional,
		struct torch_module *out)
{
	struct entry *e = find(module);
	PyObject *wr;
	int fresh = 0;

	out->name = torch_names_intern(name);
	out->index = next_index++;
	if (e && e->key == module) { /* a dead module's entry: reuse it */
		Py_CLEAR(e->wr);
	} else {
		if (nentries >= TORCH_MODULES_MAX) {
			sweep();
			e = find(module);
		}
		if (!e || nentries >= TORCH_MODULES_MAX)
			return;
		nentries++;
		fresh = 1;
	}
	wr = PyWeakref_NewRef(module, NULL);
	if (!wr) {
		/* Not cached: without a weak reference a successor at the
		 * same address could not be told from it.  A reused entry
		 * keeps its key (probe chains pass through it). */
		PyErr_Clear();
		if (fresh) {
			e->key = NULL;
			nentries--;
		}
		return;
	}
	e->key = module;
	e->wr = wr;
	e->m = *out;
	e->provisional = provisional;
}

static const char *class_name(PyObject *o)
{
	const char *n = Py_TYPE(o)->tp_name, *dot = strrchr(n, '.');

	return dot ? dot + 1 : n;
}

/* A module that torch.compile made (torch._dynamo's OptimizedModule,
 * which holds the user's module as _orig_mod)? */
static int is_compiled(PyObject *o)
{
	int r;

	if (strcmp(class_name(o), "OptimizedModule"))
		return 0;
	r = PyObject_HasAttrString(o, "_orig_mod");
	PyErr_Clear();
	return r;
}

/*
 * The name of mod, at path (named_modules' "" for the root) under the
 * walk's root, as the user knows it: torch.compile's wrapper is named by
 * the user's module with " [compiled]" (its row times the compiled
 * region: the modules inside it run as one graph and have no rows), and
 * the "_orig_mod" steps it puts into paths are left out ("encoder" for
 * encoder._orig_mod, "encoder.layers.0" for encoder._orig_mod.layers.0;
 * these modules have rows where they run as Python: graph breaks, eager
 * fallback, tracing on while compiling).
 */
static void display_name(PyObject *mod, const char *path, char *out,
			 size_t outlen)
{
	char buf[TORCH_NAME_LEN];
	const char *p = path;
	size_t n = 0;

	/* path without its "_orig_mod" segments */
	while (*p && n + 1 < sizeof(buf)) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);

		if (!(len == 9 && !strncmp(p, "_orig_mod", 9))) {
			size_t k = len;

			if (n && n + 1 < sizeof(buf))
				buf[n++] = '.';
			if (k > sizeof(buf) - 1 - n)
				k = sizeof(buf) - 1 - n;
			memcpy(buf + n, p, k);
			n += k;
		}
		p += dot ? len + 1 : len;
	}
	buf[n] = '\0';
	if (!n) { /* the root, or its _orig_mod: the user's class */
		PyObject *orig = is_compiled(mod)
					 ? PyObject_GetAttrString(mod, "_orig_mod")
					 : NULL;

		snprintf(buf, sizeof(buf), "%s",
			 class_name(orig ? orig : mod));
		Py_XDECREF(orig);
		PyErr_Clear();
	}
	snprintf(out, outlen, "%s%s", buf,
		 is_compiled(mod) ? " [compiled]" : "");
}

/*
 * Names every module under root that has no name yet; root itself (the
 * item named "") by its class, provisionally.  A module named
 * provisionally before (it was called with no traced module around it,
 * e.g. while tracing was being switched on in the middle of its parent's
 * forward) takes its name under this root.
 */
static void walk(PyObject *root)
{
	PyObject *gen, *item;
	struct torch_module m;
	int count = 0;

	gen = PyObject_CallMethod(root, "named_modules", NULL);
	PyObject *it = gen ? PyObject_GetIter(gen) : NULL;
	Py_XDECREF(gen);
	while (it && count++ < TORCH_MODULES_MAX && (item = PyIter_Next(it))) {
		PyObject *name =
			PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2
				? PyTuple_GET_ITEM(item, 0)
				: NULL;
		PyObject *mod = name ? PyTuple_GET_ITEM(item, 1) : NULL;
		const char *text = name && PyUnicode_Check(name)
					   ? PyUnicode_AsUTF8(name)
					   : NULL;
		struct entry *e = mod ? find(mod) : NULL;

		char shown[TORCH_NAME_LEN];

		if (text && mod)
			display_name(mod, text, shown, sizeof(shown));
		if (text && mod && !valid(e, mod)) {
			add(mod, shown, !*text, &m);
		} else if (text && *text && e->provisional) {
			e->m.name = torch_names_intern(shown);
			e->provisional = 0;
		}
		Py_DECREF(item);
	}
	Py_XDECREF(it);
	PyErr_Clear();
}

/* Is co torch's Module._call_impl, the frame of every module call? */
static int is_call_impl(PyCodeObject *co)
{
	const char *name = PyUnicode_Check(co->co_name)
				   ? PyUnicode_AsUTF8(co->co_name)
				   : NULL;
	const char *file = PyUnicode_Check(co->co_filename)
				   ? PyUnicode_AsUTF8(co->co_filename)
				   : NULL;
	size_t n = file ? strlen(file) : 0, tail = strlen(CALL_IMPL_FILE);

	PyErr_Clear();
	return name && file && !strcmp(name, "_call_impl") && n >= tail &&
	       !strcmp(file + n - tail, CALL_IMPL_FILE);
}

/*
 * The outermost module being called on this thread, other than module: the
 * `self` of the oldest _call_impl frame of the thread's stack (new
 * reference), or NULL.  A module called with no traced module around it
 * may still be called from inside another one's forward: tracing was
 * switched on in the middle of it.  That one, not the module, is its
 * root.
 */
static PyObject *enclosing_module(PyObject *module)
{
	PyFrameObject *f = PyEval_GetFrame();
	PyObject *outer = NULL;

	Py_XINCREF(f);
	for (int depth = 0; f && depth < CALL_IMPL_DEPTH_MAX; depth++) {
		PyCodeObject *co = PyFrame_GetCode(f);
		PyFrameObject *back;

		if (is_call_impl(co)) {
			PyObject *locals = cpython.frame.locals(f);
			PyObject *self = locals && PyDict_Check(locals)
						 ? PyDict_GetItemString(locals,
									"self")
						 : NULL;

			if (self && self != module) {
				Py_INCREF(self);
				Py_XSETREF(outer, self);
			}
			Py_XDECREF(locals);
			PyErr_Clear();
		}
		Py_DECREF(co);
		back = PyFrame_GetBack(f);
		Py_DECREF(f);
		f = back;
	}
	Py_XDECREF(f);
	return outer;
}

int torch_names_lookup(PyObject *module, PyObject *root, int32_t parent,
		       struct torch_module *out)
{
	char name[TORCH_NAME_LEN];
	struct entry *e;

	if (ensure_tables()) {
		out->name = TORCH_NAME_OTHER;
		out->index = 0;
		return -ENOMEM;
	}
	e = find(module);
	if (valid(e, module)) {
		*out = e->m;
		return 0;
	}
	if (!root && !cpython.finalizing()) {
		PyObject *outer = enclosing_module(module);

		if (outer) {
			walk(outer);
			Py_DECREF(outer);
			e = find(module);
			if (valid(e, module)) {
				*out = e->m;
				return 0;
			}
		}
	}
	if (!cpython.finalizing()) {
		walk(root ? root : module);
		e = find(module);
		if (valid(e, module)) {
			*out = e->m;
			return 0;
		}
	}
	if (root)
		snprintf(name, sizeof(name), "%s.%s", torch_names_text(parent),
			 class_name(module));
	else
		display_name(module, "", name, sizeof(name));
	add(module, name, root == NULL, out);
	return 0;
}

void torch_names_clear(void)
{
	if (!table)
		return;
	for (int i = 0; i < SLOTS; i++)
		Py_CLEAR(table[i].wr);
	memset(table, 0, SLOTS * sizeof(*table));
	nentries = 0;
	next_index = 0;
}

int torch_names_modules(void)
{
	return nentries;
}
