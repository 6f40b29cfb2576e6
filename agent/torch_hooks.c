/*
 * torch_hooks: module, autograd and optimizer hooks in C.  See
 * torch_hooks.h.
 *
 * Everything in `T` is guarded by the GIL: the hooks run with it, and so
 * do install and remove (on a GIL thread).  The per-call work is a cache
 * lookup, a clock read and, for traced modules, a fixed-size record
 * pushed into a ring; nothing allocates on an untraced call.
 */
#include "torch_hooks.h"

#include <Python.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "torch_names.h"
#include "torch_ring.h"

#define WATCH_DEPTH_MAX 256 /* frames searched for watched functions */
#define GRAD_ITEMS_MAX 8    /* tensors of a tuple output/input looked at */

enum bwd_state { BWD_ARMED = 1, BWD_STARTED, BWD_DONE };
enum { HOOK_START = 0, HOOK_END = 1 };

/* A module call in progress.  Calls of several threads share the stack
 * (the GIL orders them); each thread sees only its own frames. */
struct frame {
	PyObject *module; /* borrowed: alive while its forward runs */
	PyThreadState *ts;
	int32_t name;
	int traced;
	int64_t seq;
	double t0;
};

struct bwd {
	int32_t name;
	int state;
	int64_t seq;
	double t0;
};

static struct torch_ring trace_ring, var_ring;

/* For torch_hooks_info on other threads. */
static _Atomic int pub_installed, pub_traced;
static _Atomic int64_t pub_step;
static const char *_Atomic pub_step_hook;

static struct {
	int installed;
	int fwd_on; /* forward hooks registered now */
	struct torch_opts o;
	uint32_t gen; /* changes at every step and (un)install */

	/* torch's functions and types, owned while installed */
	PyObject *reg_pre, *reg_post, *pre_handle, *post_handle;
	PyTypeObject *tensor_type;
	PyObject *engine;
	PyObject *cuda_is_init, *cuda_stats, *cuda_device;
	PyObject *step_handle, *step_pre_handle;  /* torch 2.x */
	PyObject *optimizer_cls, *orig_step_code; /* torch 1.x */
	PyObject *function_cls, *orig_register, *odict_type;
	int register_own; /* _register_hook was Function's own attribute */
	const char *step_hook;

	int64_t rank;
	int cuda; /* CUDA initialised: memory figures per row */

	int64_t step, k; /* k: ordinal of the traced step */
	int traced;
	int64_t seq;
	double t0, last_end, bwd_end, step_pre;

	struct frame stack[TORCH_DEPTH_MAX];
	int depth;
	struct bwd bwd[TORCH_BWD_MAX];
	int nbwd;
	int end_queued;
} T;

/* Our callables: made once, never freed (a hook tuple captured by a call
 * in flight may still call one after removal; they then do nothing). */
static PyObject *pre_fn, *post_fn, *step_fn, *step_method, *step_pre_fn,
	*register_fn;
static PyObject *s_grad_fn, *s_register_prehook, *s_queue_callback, *s_remove,
	*s_step_code, *s_register_hook;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int torch_hooks_init(void)
{
	int rc;

	if (trace_ring.buf)
		return 0;
	rc = torch_ring_init(&trace_ring, TORCH_TRACE_RING,
			     sizeof(struct torch_trace_rec));
	if (!rc)
		rc = torch_ring_init(&var_ring, TORCH_VAR_RING,
				     sizeof(struct torch_var_rec));
	if (rc)
		torch_ring_release(&trace_ring);
	return rc;
}

int torch_hooks_pop_trace(struct torch_trace_rec *rec)
{
	return torch_ring_pop(&trace_ring, rec);
}

int torch_hooks_pop_var(struct torch_var_rec *rec)
{
	return torch_ring_pop(&var_ring, rec);
}

/* ---- memory figures ------------------------------------------------ */

static double stat_mb(PyObject *stats, const char *key, const char *which)
{
	PyObject *d =
		PyDict_Check(stats) ? PyDict_GetItemString(stats, key) : NULL;
	PyObject *all =
		d && PyDict_Check(d) ? PyDict_GetItemString(d, "all") : NULL;
	PyObject *v = all && PyDict_Check(all)
			      ? PyDict_GetItemString(all, which)
			      : NULL;

	if (!v || !PyLong_Check(v))
		return 0;
	return PyLong_AsDouble(v) / (1024.0 * 1024.0);
}

/* CUDA allocator figures in MB, zeros without CUDA. */
static void memory(double mem[4])
{
	PyObject *dev, *stats;

	mem[0] = mem[1] = mem[2] = mem[3] = 0;
	if (!T.cuda || !T.cuda_stats || !T.cuda_device)
		return;
	dev = PyObject_CallNoArgs(T.cuda_device);
	stats = dev ? PyObject_CallOneArg(T.cuda_stats, dev) : NULL;
	if (stats) {
		mem[0] = stat_mb(stats, "allocated_bytes", "current");
		mem[1] = stat_mb(stats, "allocated_bytes", "peak");
		mem[2] = stat_mb(stats, "reserved_bytes", "current");
		mem[3] = stat_mb(stats, "reserved_bytes", "peak");
	}
	Py_XDECREF(stats);
	Py_XDECREF(dev);
	PyErr_Clear();
}

static void emit(int stage, int64_t seq, int32_t name, double start, double end)
{
	struct torch_trace_rec r = {
		.step = T.step,
		.seq = seq,
		.rank = T.rank,
		.module = name,
		.stage = stage,
		.duration = end - start,
		.offset = start - T.t0,
	};

	memory(r.mem);
	torch_ring_push(&trace_ring, &r);
}

/* ---- forward hooks ----------------------------------------------------- */

static int module_traced(int32_t index)
{
	return T.o.module_rate <= 1 || (index + T.k) % T.o.module_rate == 0;
}

static PyObject *pre_hook(PyObject *self, PyObject *const *args,
			  Py_ssize_t nargs)
{
	PyThreadState *ts = PyThreadState_Get();
	struct frame *f, *root = NULL, *parent = NULL;
	struct torch_module m;

	(void)self;
	if (!T.installed || !T.traced || nargs < 1 ||
	    T.depth >= TORCH_DEPTH_MAX)
		Py_RETURN_NONE;
	for (int i = 0; i < T.depth; i++)
		if (T.stack[i].ts == ts) {
			root = root ? root : &T.stack[i];
			parent = &T.stack[i];
		}
	torch_names_lookup(args[0], root ? root->module : NULL,
			   parent ? parent->name : 0, &m);
	f = &T.stack[T.depth++];
	f->module = args[0];
	f->ts = ts;
	f->name = m.name;
	f->traced = module_traced(m.index);
	f->seq = f->traced ? T.seq++ : -1;
	f->t0 = f->traced ? now() : 0;
	Py_RETURN_NONE;
}

/* The autograd node that made tensor o (new reference), or NULL. */
static PyObject *grad_fn_of(PyObject *o)
{
	PyObject *g;

	if (!T.tensor_type || !PyObject_TypeCheck(o, T.tensor_type))
		return NULL;
	g = PyObject_GetAttr(o, s_grad_fn);
	if (!g) {
		PyErr_Clear();
		return NULL;
	}
	if (g == Py_None) {
		Py_DECREF(g);
		return NULL;
	}
	return g;
}

/* The node of the first tensor of o that has one (a tensor, or the first
 * items of a tuple, list or dict). */
static PyObject *first_grad_fn(PyObject *o)
{
	PyObject *g = NULL, *key, *v;
	Py_ssize_t pos = 0;

	if (PyTuple_Check(o) || PyList_Check(o)) {
		Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
		for (Py_ssize_t i = 0; !g && i < n && i < GRAD_ITEMS_MAX; i++)
			g = grad_fn_of(PySequence_Fast_GET_ITEM(o, i));
		return g;
	}
	if (PyDict_Check(o)) {
		for (int i = 0;
		     !g && i < GRAD_ITEMS_MAX && PyDict_Next(o, &pos, &key, &v);
		     i++)
			g = grad_fn_of(v);
		return g;
	}
	return grad_fn_of(o);
}

/*
 * A backward hook: what to do when the gradient reaches an autograd node
 * (start or end the backward of some modules), for the step of gen.  With
 * the fast registration below, hooks on one node merge into one, so the
 * engine calls us once per node however many modules meet there.
 */
#define HOOK_ACTIONS 8

struct bwd_hook {
	PyObject ob_base; /* PyObject_HEAD */
	uint32_t gen;
	int n;
	struct {
		int16_t slot;
		int8_t kind;
	} act[HOOK_ACTIONS];
};

static PyObject *bwd_hook_call(PyObject *self, PyObject *args,
			       PyObject *kwargs);

static void bwd_hook_dealloc(PyObject *self)
{
	Py_TYPE(self)->tp_free(self);
}

static PyTypeObject bwd_hook_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "probing.BackwardHook",
	.tp_basicsize = sizeof(struct bwd_hook),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Probing's backward timing hook (does nothing once its "
		  "step is over)",
	.tp_call = bwd_hook_call,
	.tp_dealloc = bwd_hook_dealloc,
};

static void attach(PyObject *node, int slot, int kind)
{
	struct bwd_hook *h = PyObject_New(struct bwd_hook, &bwd_hook_type);
	PyObject *r;

	if (!h) {
		PyErr_Clear();
		return;
	}
	h->gen = T.gen;
	h->n = 1;
	h->act[0].slot = (int16_t)slot;
	h->act[0].kind = (int8_t)kind;
	r = PyObject_CallMethodOneArg(node, s_register_prehook, (PyObject *)h);
	if (!r)
		PyErr_Clear();
	Py_XDECREF(r);
	Py_DECREF(h);
}

/*
 * Registering a hook on an autograd node makes torch call
 * torch.autograd.Function._register_hook(hooks, hook), a Python function
 * that builds a RemovableHandle each time: most of the cost of timing the
 * backward pass.  While tracing, Function._register_hook is this C
 * function: for our hooks it adds them to the node's hook dict directly
 * (merging with our hook already there), for any other hook it calls the
 * original.  Put back on removal.
 */
static PyObject *fast_register(PyObject *self, PyObject *const *args,
			       Py_ssize_t nargs)
{
	static long long next_key;
	struct bwd_hook *h, *o;
	PyObject *hooks, *key, *v, *res;
	Py_ssize_t pos = 0;

	(void)self;
	if (nargs != 2 || Py_TYPE(args[1]) != &bwd_hook_type || !T.odict_type ||
	    !T.orig_register || (args[0] != Py_None && !PyDict_Check(args[0])))
		return T.orig_register
			       ? PyObject_Vectorcall(T.orig_register, args,
						     (size_t)nargs, NULL)
			       : PyErr_Format(PyExc_RuntimeError,
					      "torch hook registration "
					      "unavailable");
	h = (struct bwd_hook *)args[1];
	if (args[0] == Py_None) {
		hooks = PyObject_CallNoArgs(T.odict_type);
		if (!hooks)
			return NULL;
	} else {
		hooks = args[0];
		Py_INCREF(hooks);
		while (PyDict_Next(hooks, &pos, &key, &v)) {
			if (Py_TYPE(v) != &bwd_hook_type)
				continue;
			o = (struct bwd_hook *)v;
			if (o->gen != h->gen || o->n + h->n > HOOK_ACTIONS)
				continue;
			for (int i = 0; i < h->n; i++)
				o->act[o->n++] = h->act[i];
			return Py_BuildValue("(NO)", hooks, Py_None);
		}
	}
	/* Negative keys: torch's handles count up from 0. */
	key = PyLong_FromLongLong(--next_key);
	if (!key || PyObject_SetItem(hooks, key, args[1])) {
		Py_XDECREF(key);
		Py_DECREF(hooks);
		return NULL;
	}
	Py_DECREF(key);
	res = Py_BuildValue("(NO)", hooks, Py_None);
	return res;
}

static PyMethodDef fast_register_def = {
	"probing_register_hook", (PyCFunction)(void (*)(void))fast_register,
	METH_FASTCALL, NULL};

static void attach_backward(int32_t name, PyObject *input, PyObject *output)
{
	PyObject *g = first_grad_fn(output), *prev = NULL;
	int slot;

	if (!g)
		return;
	if (T.nbwd >= TORCH_BWD_MAX) {
		Py_DECREF(g);
		return;
	}
	slot = T.nbwd++;
	T.bwd[slot].name = name;
	T.bwd[slot].state = BWD_ARMED;
	attach(g, slot, HOOK_START);
	Py_DECREF(g);
	if (!PyTuple_Check(input))
		return;
	for (Py_ssize_t i = 0;
	     i < PyTuple_GET_SIZE(input) && i < GRAD_ITEMS_MAX; i++) {
		g = grad_fn_of(PyTuple_GET_ITEM(input, i));
		if (g && g != prev)
			attach(g, slot, HOOK_END);
		Py_XDECREF(prev);
		prev = g;
	}
	Py_XDECREF(prev);
}

static PyObject *post_hook(PyObject *self, PyObject *const *args,
			   Py_ssize_t nargs)
{
	PyThreadState *ts = PyThreadState_Get();
	struct frame f;
	double end;
	int i, k;

	(void)self;
	if (!T.installed || nargs < 3)
		Py_RETURN_NONE;
	for (i = T.depth - 1; i >= 0; i--)
		if (T.stack[i].module == args[0] && T.stack[i].ts == ts)
			break;
	if (i < 0)
		Py_RETURN_NONE;
	f = T.stack[i];
	/* Pop it, and this thread's frames above it (calls that raised);
	 * other threads' frames stay. */
	for (k = i; i < T.depth; i++)
		if (T.stack[i].ts != ts)
			T.stack[k++] = T.stack[i];
	T.depth = k;
	if (!f.traced || !T.traced)
		Py_RETURN_NONE;
	end = now();
	emit(TORCH_FORWARD, f.seq, f.name, f.t0, end);
	T.last_end = end;
	if (T.o.backward)
		attach_backward(f.name, args[1], args[2]);
	Py_RETURN_NONE;
}

static PyMethodDef pre_def = {"probing_forward_pre_hook",
			      (PyCFunction)(void (*)(void))pre_hook,
			      METH_FASTCALL, NULL};
static PyMethodDef post_def = {"probing_forward_hook",
			       (PyCFunction)(void (*)(void))post_hook,
			       METH_FASTCALL, NULL};

/* ---- backward -------------------------------------------------------- */

/* The end of the backward pass: closes what no input hook closed. */
static PyObject *end_hook(PyObject *self, PyObject *unused)
{
	long long gen = PyLong_AsLongLong(self);
	double t = now();

	(void)unused;
	PyErr_Clear();
	if (!T.installed || gen != (long long)T.gen)
		Py_RETURN_NONE;
	T.end_queued = 0;
	for (int i = 0; i < T.nbwd; i++)
		if (T.bwd[i].state == BWD_STARTED) {
			emit(TORCH_BACKWARD, T.bwd[i].seq, T.bwd[i].name,
			     T.bwd[i].t0, t);
			T.bwd[i].state = BWD_DONE;
		}
	T.bwd_end = T.last_end = t;
	Py_RETURN_NONE;
}

static PyMethodDef end_def = {"probing_backward_end", end_hook, METH_NOARGS,
			      NULL};

static void queue_end(void)
{
	PyObject *t, *fn, *r;

	if (T.end_queued || !T.engine)
		return;
	t = PyLong_FromLongLong((long long)T.gen);
	fn = t ? PyCFunction_New(&end_def, t) : NULL;
	r = fn ? PyObject_CallMethodOneArg(T.engine, s_queue_callback, fn)
	       : NULL;
	if (r)
		T.end_queued = 1;
	else
		PyErr_Clear();
	Py_XDECREF(r);
	Py_XDECREF(fn);
	Py_XDECREF(t);
}

static PyObject *bwd_hook_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
	struct bwd_hook *h = (struct bwd_hook *)self;
	double t = 0;

	(void)args, (void)kwargs;
	if (!T.installed || h->gen != T.gen)
		Py_RETURN_NONE;
	for (int i = 0; i < h->n; i++) {
		int slot = h->act[i].slot;
		struct bwd *b = slot < T.nbwd ? &T.bwd[slot] : NULL;

		if (!b)
			continue;
		if (!t)
			t = now();
		if (h->act[i].kind == HOOK_START && b->state == BWD_ARMED) {
			b->state = BWD_STARTED;
			b->t0 = t;
			b->seq = T.seq++;
			queue_end();
		} else if (h->act[i].kind == HOOK_END &&
			   b->state == BWD_STARTED) {
			emit(TORCH_BACKWARD, b->seq, b->name, b->t0, t);
			b->state = BWD_DONE;
			T.last_end = t;
		}
	}
	Py_RETURN_NONE;
}

/* ---- watched variables ------------------------------------------------ */

static int code_matches(PyCodeObject *co, const struct watch_item *it)
{
	PyObject *n = it->qualified ? co->co_qualname : co->co_name;

	return n && PyUnicode_Check(n) &&
	       PyUnicode_CompareWithASCIIString(n, it->func) == 0;
}

static void value_text(PyObject *v, struct torch_var_rec *r)
{
	PyObject *item = NULL, *repr;
	const char *s;

	if (T.tensor_type && PyObject_TypeCheck(v, T.tensor_type)) {
		PyObject *n = PyObject_CallMethod(v, "numel", NULL);
		if (n && PyLong_Check(n) && PyLong_AsLong(n) == 1)
			item = PyObject_CallMethod(v, "item", NULL);
		Py_XDECREF(n);
		PyErr_Clear();
		if (item)
			v = item;
	}
	if ((PyFloat_Check(v) || PyLong_Check(v)) && !PyBool_Check(v)) {
		r->num = PyFloat_Check(v) ? PyFloat_AS_DOUBLE(v)
					  : PyLong_AsDouble(v);
		if (!PyErr_Occurred()) {
			r->is_num = 1;
			Py_XDECREF(item);
			return;
		}
		PyErr_Clear();
	}
	repr = PyObject_Repr(v);
	s = repr ? PyUnicode_AsUTF8(repr) : NULL;
	if (s)
		snprintf(r->value, sizeof(r->value), "%.*s",
			 T.o.repr_max > 0 && T.o.repr_max < TORCH_VALUE_MAX
				 ? T.o.repr_max
				 : TORCH_VALUE_MAX - 1,
			 s);
	else
		snprintf(r->value, sizeof(r->value), "<repr failed>");
	PyErr_Clear();
	Py_XDECREF(repr);
	Py_XDECREF(item);
}

/* Records each watched variable from the innermost frame of its function
 * on this thread's stack. */
static void record_watches(void)
{
	int done[WATCH_MAX] = {0};
	size_t left = T.o.watch.n;
	PyFrameObject *f = PyEval_GetFrame(), *back;
	PyObject *exc_type, *exc_value, *exc_tb;

	if (!left || !f)
		return;
	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	Py_INCREF(f);
	for (int depth = 0; f && left && depth < WATCH_DEPTH_MAX; depth++) {
		PyCodeObject *co = PyFrame_GetCode(f);
		PyObject *locals = NULL;

		for (size_t i = 0; i < T.o.watch.n; i++) {
			const struct watch_item *it = &T.o.watch.items[i];
			PyObject *v;

			if (done[i] || !code_matches(co, it))
				continue;
			if (!locals && !(locals = PyFrame_GetLocals(f))) {
				PyErr_Clear();
				break;
			}
			v = PyMapping_GetItemString(locals, it->name);
			if (!v) {
				PyErr_Clear();
				continue;
			}
			struct torch_var_rec r = {.step = T.step};
			snprintf(r.func, sizeof(r.func), "%s", it->func);
			snprintf(r.name, sizeof(r.name), "%s", it->name);
			value_text(v, &r);
			Py_DECREF(v);
			torch_ring_push(&var_ring, &r);
			done[i] = 1;
			left--;
		}
		Py_XDECREF(locals);
		Py_DECREF(co);
		back = PyFrame_GetBack(f);
		Py_DECREF(f);
		f = back;
	}
	Py_XDECREF(f);
	PyErr_Restore(exc_type, exc_value, exc_tb);
}

/* ---- steps ------------------------------------------------------------ */

static void forward_hooks(int on)
{
	PyObject *r;

	if (on == T.fwd_on)
		return;
	if (on) {
		T.pre_handle = PyObject_CallOneArg(T.reg_pre, pre_fn);
		T.post_handle =
			T.pre_handle ? PyObject_CallOneArg(T.reg_post, post_fn)
				     : NULL;
		if (!T.post_handle) {
			PyErr_Clear();
			on = 0; /* undo below */
		} else {
			T.fwd_on = 1;
			return;
		}
	}
	if (T.pre_handle) {
		r = PyObject_CallMethodNoArgs(T.pre_handle, s_remove);
		Py_XDECREF(r);
	}
	if (T.post_handle) {
		r = PyObject_CallMethodNoArgs(T.post_handle, s_remove);
		Py_XDECREF(r);
	}
	PyErr_Clear();
	Py_CLEAR(T.pre_handle);
	Py_CLEAR(T.post_handle);
	T.fwd_on = 0;
}

/* Starts step T.step at time t. */
static void begin_step(double t)
{
	PyObject *r;

	T.gen++;
	T.nbwd = 0;
	T.end_queued = 0;
	T.seq = 0;
	T.t0 = T.last_end = t;
	T.bwd_end = T.step_pre = 0;
	T.traced = T.step % T.o.step_rate == 0;
	T.k = T.step / T.o.step_rate;
	if (T.traced && T.cuda_is_init && !T.cuda) {
		r = PyObject_CallNoArgs(T.cuda_is_init);
		T.cuda = r == Py_True;
		Py_XDECREF(r);
		PyErr_Clear();
	}
	forward_hooks(T.traced);
	atomic_store_explicit(&pub_step, T.step, memory_order_relaxed);
	atomic_store_explicit(&pub_traced, T.traced, memory_order_relaxed);
}

static PyObject *step_hook(PyObject *self, PyObject *const *args,
			   Py_ssize_t nargs)
{
	double t = now(), start;
	PyObject *exc_type, *exc_value, *exc_tb;

	(void)self;
	if (!T.installed)
		Py_RETURN_NONE;
	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	if (T.traced) {
		const char *cls =
			nargs >= 1 ? Py_TYPE(args[0])->tp_name : "optimizer";
		const char *dot = strrchr(cls, '.');
		start = T.step_pre  ? T.step_pre
			: T.bwd_end ? T.bwd_end
				    : T.last_end;
		emit(TORCH_STEP, T.seq++,
		     torch_names_intern(dot ? dot + 1 : cls), start, t);
		record_watches();
	}
	T.step++;
	begin_step(now());
	PyErr_Clear();
	PyErr_Restore(exc_type, exc_value, exc_tb);
	Py_RETURN_NONE;
}

static PyObject *step_pre_hook(PyObject *self, PyObject *const *args,
			       Py_ssize_t nargs)
{
	(void)self, (void)args, (void)nargs;
	if (T.installed)
		T.step_pre = now();
	Py_RETURN_NONE;
}

static PyMethodDef step_def = {"probing_step_hook",
			       (PyCFunction)(void (*)(void))step_hook,
			       METH_FASTCALL, NULL};
static PyMethodDef step_pre_def = {"probing_step_pre_hook",
				   (PyCFunction)(void (*)(void))step_pre_hook,
				   METH_FASTCALL, NULL};

/* ---- install and remove ------------------------------------------------ */

static int make_statics(void)
{
	if (s_step_code)
		return 0;
	pre_fn = PyCFunction_New(&pre_def, NULL);
	post_fn = PyCFunction_New(&post_def, NULL);
	step_fn = PyCFunction_New(&step_def, NULL);
	step_pre_fn = PyCFunction_New(&step_pre_def, NULL);
	register_fn = PyCFunction_New(&fast_register_def, NULL);
	s_register_hook = PyUnicode_InternFromString("_register_hook");
	if (!register_fn || !s_register_hook || PyType_Ready(&bwd_hook_type))
		return -ENOMEM;
	/* Set on a class, an instancemethod binds like a function does:
	 * optimizer._optimizer_step_code() calls step_fn(optimizer). */
	step_method = step_fn ? PyInstanceMethod_New(step_fn) : NULL;
	s_grad_fn = PyUnicode_InternFromString("grad_fn");
	s_register_prehook = PyUnicode_InternFromString("register_prehook");
	s_queue_callback = PyUnicode_InternFromString("queue_callback");
	s_remove = PyUnicode_InternFromString("remove");
	if (!pre_fn || !post_fn || !step_fn || !step_pre_fn || !step_method ||
	    !s_grad_fn || !s_register_prehook || !s_queue_callback || !s_remove)
		return -ENOMEM;
	s_step_code = PyUnicode_InternFromString("_optimizer_step_code");
	return s_step_code ? 0 : -ENOMEM;
}

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

/* Is module name imported and done initialising? */
static int imported(const char *name)
{
	PyObject *m = get_module(name), *spec, *init;
	int ok = 0;

	if (m) {
		spec = PyObject_GetAttrString(m, "__spec__");
		init = spec && spec != Py_None
			       ? PyObject_GetAttrString(spec, "_initializing")
			       : NULL;
		ok = !init || !PyObject_IsTrue(init);
		Py_XDECREF(init);
		Py_XDECREF(spec);
	}
	PyErr_Clear();
	Py_XDECREF(m);
	return ok;
}

int torch_hooks_ready(void)
{
	return imported("torch") && imported("torch.nn.modules.module") &&
			       imported("torch.optim.optimizer")
		       ? 0
		       : -EAGAIN;
}

static PyObject *attr_path(const char *module, const char *path)
{
	PyObject *o = get_module(module), *next;
	char part[64];

	while (o && *path) {
		size_t n = strcspn(path, ".");
		snprintf(part, sizeof(part), "%.*s", (int)n, path);
		next = PyObject_GetAttrString(o, part);
		Py_DECREF(o);
		o = next;
		path += n + (path[n] == '.');
	}
	if (!o)
		PyErr_Clear();
	return o;
}

static int install_step_hook(char *err, size_t errlen)
{
	PyObject *reg = attr_path("torch.optim.optimizer",
				  "register_optimizer_step_post_hook");
	PyObject *reg_pre = attr_path("torch.optim.optimizer",
				      "register_optimizer_step_pre_hook");

	if (reg) {
		T.step_handle = PyObject_CallOneArg(reg, step_fn);
		if (T.step_handle && reg_pre)
			T.step_pre_handle =
				PyObject_CallOneArg(reg_pre, step_pre_fn);
		PyErr_Clear();
		Py_DECREF(reg);
		Py_XDECREF(reg_pre);
		T.step_hook = "register_optimizer_step_post_hook";
		return T.step_handle ? 0 : -EIO;
	}
	Py_XDECREF(reg_pre);
	T.optimizer_cls = attr_path("torch.optim.optimizer", "Optimizer");
	T.orig_step_code =
		T.optimizer_cls ? PyObject_GetAttr(T.optimizer_cls, s_step_code)
				: NULL;
	if (!T.orig_step_code ||
	    PyObject_SetAttr(T.optimizer_cls, s_step_code, step_method)) {
		PyErr_Clear();
		Py_CLEAR(T.orig_step_code);
		Py_CLEAR(T.optimizer_cls);
		T.step_hook = "none";
		snprintf(err, errlen, "this torch has no optimizer step hook");
		return -ENOTSUP;
	}
	T.step_hook = "Optimizer._optimizer_step_code";
	return 0;
}

static void remove_step_hook(void)
{
	PyObject *r;

	if (T.step_handle) {
		r = PyObject_CallMethodNoArgs(T.step_handle, s_remove);
		Py_XDECREF(r);
	}
	if (T.step_pre_handle) {
		r = PyObject_CallMethodNoArgs(T.step_pre_handle, s_remove);
		Py_XDECREF(r);
	}
	if (T.optimizer_cls && T.orig_step_code)
		PyObject_SetAttr(T.optimizer_cls, s_step_code,
				 T.orig_step_code);
	PyErr_Clear();
	Py_CLEAR(T.step_handle);
	Py_CLEAR(T.step_pre_handle);
	Py_CLEAR(T.optimizer_cls);
	Py_CLEAR(T.orig_step_code);
}

/* The fast registration (see fast_register); without it, hooks are
 * registered the slow way. */
static void install_register(void)
{
	PyObject *dict;

	T.function_cls = attr_path("torch.autograd.function", "Function");
	T.odict_type = attr_path("collections", "OrderedDict");
	if (!T.function_cls || !T.odict_type || !PyType_Check(T.function_cls))
		goto fail;
	T.orig_register = PyObject_GetAttr(T.function_cls, s_register_hook);
	dict = ((PyTypeObject *)T.function_cls)->tp_dict;
	if (!T.orig_register || !PyFunction_Check(T.orig_register) || !dict)
		goto fail;
	T.register_own = PyDict_Contains(dict, s_register_hook) == 1;
	if (PyObject_SetAttr(T.function_cls, s_register_hook, register_fn))
		goto fail;
	return;
fail:
	PyErr_Clear();
	Py_CLEAR(T.function_cls);
	Py_CLEAR(T.orig_register);
	Py_CLEAR(T.odict_type);
}

static void remove_register(void)
{
	if (T.function_cls && T.orig_register) {
		if (T.register_own)
			PyObject_SetAttr(T.function_cls, s_register_hook,
					 T.orig_register);
		else
			PyObject_DelAttr(T.function_cls, s_register_hook);
		PyErr_Clear();
	}
	Py_CLEAR(T.function_cls);
	Py_CLEAR(T.orig_register);
	Py_CLEAR(T.odict_type);
}

static void drop_refs(void)
{
	Py_CLEAR(T.reg_pre);
	Py_CLEAR(T.reg_post);
	Py_CLEAR(T.tensor_type);
	Py_CLEAR(T.engine);
	Py_CLEAR(T.cuda_is_init);
	Py_CLEAR(T.cuda_stats);
	Py_CLEAR(T.cuda_device);
}

int torch_hooks_install(const struct torch_opts *o, char *err, size_t errlen)
{
	PyObject *tensor;
	const char *rank;
	int rc;

	if (T.installed) {
		int rate_changed = o->step_rate != T.o.step_rate;
		T.o = *o;
		if (rate_changed) {
			T.traced = T.step % T.o.step_rate == 0;
			T.k = T.step / T.o.step_rate;
			forward_hooks(T.traced);
		}
		return 0;
	}
	if (torch_hooks_ready()) {
		snprintf(err, errlen, "torch is not imported");
		return -EAGAIN;
	}
	if (make_statics()) {
		PyErr_Clear();
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	T.o = *o;
	T.reg_pre = attr_path("torch.nn.modules.module",
			      "register_module_forward_pre_hook");
	T.reg_post = attr_path("torch.nn.modules.module",
			       "register_module_forward_hook");
	tensor = attr_path("torch", "Tensor");
	if (!T.reg_pre || !T.reg_post || !tensor || !PyType_Check(tensor)) {
		Py_XDECREF(tensor);
		drop_refs();
		snprintf(err, errlen, "this torch has no global module hooks");
		return -ENOTSUP;
	}
	T.tensor_type = (PyTypeObject *)tensor;
	T.engine = attr_path("torch.autograd.variable",
			     "Variable._execution_engine");
	T.cuda_is_init = attr_path("torch", "cuda.is_initialized");
	T.cuda_stats = attr_path("torch", "_C._cuda_memoryStats");
	T.cuda_device = attr_path("torch", "_C._cuda_getDevice");
	rc = install_step_hook(err, errlen);
	if (rc) {
		drop_refs();
		return rc;
	}
	install_register();
	rank = getenv("RANK");
	T.rank = rank ? strtoll(rank, NULL, 10) : 0;
	T.cuda = 0;
	T.depth = 0;
	T.installed = 1;
	atomic_store(&pub_step_hook, T.step_hook);
	atomic_store(&pub_installed, 1);
	begin_step(now());
	if (T.traced && !T.fwd_on) {
		remove_register();
		remove_step_hook();
		drop_refs();
		T.installed = 0;
		atomic_store(&pub_installed, 0);
		snprintf(err, errlen, "cannot register the module hooks");
		return -EIO;
	}
	return 0;
}

void torch_hooks_remove(void)
{
	if (!T.installed)
		return;
	forward_hooks(0);
	remove_step_hook();
	remove_register();
	drop_refs();
	torch_names_clear();
	T.installed = 0;
	atomic_store(&pub_installed, 0);
	T.traced = 0;
	T.gen++;
	T.depth = 0;
	T.nbwd = 0;
}

void torch_hooks_info(struct torch_hooks_info *out)
{
	const char *how = atomic_load(&pub_step_hook);

	out->installed = atomic_load(&pub_installed);
	out->step = atomic_load_explicit(&pub_step, memory_order_relaxed);
	out->traced = atomic_load_explicit(&pub_traced, memory_order_relaxed);
	out->modules = torch_names_modules();
	out->step_hook = how ? how : "none";
	out->dropped = atomic_load(&trace_ring.dropped) +
		       atomic_load(&var_ring.dropped);
}
