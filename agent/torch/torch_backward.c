/*
 * torch_backward: autograd hooks timing the backward pass.  See
 * torch_backward.h.
 */
#include "torch_backward.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "torch_intern.h"
#include "torch_step.h"

#define GRAD_ITEMS_MAX 8 /* tensors of a tuple output/input looked at */

enum { HOOK_START = 0, HOOK_END = 1 };

enum slot_state { ARMED = 1, STARTED, DONE };

/* A traced module's backward in this step. */
struct slot {
	int32_t name;
	int state; /* enum slot_state */
	int64_t seq;
	double t0;
};

static struct slot slots[TORCH_BWD_MAX];
static int nslots;
static int end_queued; /* the end of this step's pass is queued */

/* The fast registration, while installed. */
static PyObject *function_cls, *orig_register, *odict_type;
static int register_own; /* _register_hook was Function's own attribute */

/* Made once, never freed (hooks on a graph may outlive an install). */
static PyObject *register_fn;
static PyObject *s_grad_fn, *s_register_prehook, *s_queue_callback,
	*s_register_hook;

/* The autograd node that made tensor o (new reference), or NULL. */
static PyObject *grad_fn_of(PyObject *o)
{
	PyTypeObject *tensor = torch_hooks_tensor_type();
	PyObject *g;

	if (!tensor || !PyObject_TypeCheck(o, tensor))
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

/*
 * The nodes hooked in the current outermost module call, each with the
 * hook holding its actions (strong references, until
 * torch_backward_forget()): a module's input is often the node of the
 * module before it, a container's output that of its last child, and a
 * second registration on a node costs torch as much as the first.
 * Holding the node also keeps its Python object, which the next read of
 * a tensor's grad_fn then returns instead of making a new one.
 */
#define NODES_MAX 16

static struct {
	PyObject *node;
	struct bwd_hook *hook;
} nodes[NODES_MAX];
static int nnodes;

/* Where fast_register put the actions of the hook it was given. */
static struct bwd_hook *registered_in;

void torch_backward_forget(void)
{
	int n = nnodes;

	nnodes = 0; /* first: a decref below may run code that attaches */
	for (int i = 0; i < n; i++) {
		Py_DECREF(nodes[i].node);
		Py_DECREF(nodes[i].hook);
	}
}

/* A hook kept for node that can take one more action, or NULL.  One
 * whose only reference is ours is no longer in the node's dict. */
static struct bwd_hook *kept_hook(PyObject *node)
{
	for (int i = 0; i < nnodes; i++) {
		struct bwd_hook *h = nodes[i].hook;

		if (nodes[i].node == node && h->gen == torch_step_gen() &&
		    h->n < HOOK_ACTIONS && Py_REFCNT(h) > 1)
			return h;
	}
	return NULL;
}

static void keep(PyObject *node, struct bwd_hook *h)
{
	if (nnodes >= NODES_MAX)
		return;
	nodes[nnodes].node = Py_NewRef(node);
	nodes[nnodes].hook = (struct bwd_hook *)Py_NewRef((PyObject *)h);
	nnodes++;
}

static void attach(PyObject *node, int slot, int kind)
{
	struct bwd_hook *h = kept_hook(node);
	PyObject *r;

	if (h) {
		h->act[h->n].slot = (int16_t)slot;
		h->act[h->n].kind = (int8_t)kind;
		h->n++;
		return;
	}
	h = PyObject_New(struct bwd_hook, &bwd_hook_type);
	if (!h) {
		PyErr_Clear();
		return;
	}
	h->gen = torch_step_gen();
	h->n = 1;
	h->act[0].slot = (int16_t)slot;
	h->act[0].kind = (int8_t)kind;
	registered_in = NULL;
	r = PyObject_CallMethodOneArg(node, s_register_prehook, (PyObject *)h);
	if (r)
		keep(node, registered_in ? registered_in : h);
	else
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
	if (nargs != 2 || Py_TYPE(args[1]) != &bwd_hook_type || !odict_type ||
	    !orig_register || (args[0] != Py_None && !PyDict_Check(args[0])))
		return orig_register ? PyObject_Vectorcall(orig_register, args,
							   (size_t)nargs, NULL)
				     : PyErr_Format(PyExc_RuntimeError,
						    "torch hook registration "
						    "unavailable");
	h = (struct bwd_hook *)args[1];
	if (args[0] == Py_None) {
		hooks = PyObject_CallNoArgs(odict_type);
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
			registered_in = o;
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

void torch_backward_attach(int32_t name, PyObject *const *in, Py_ssize_t n,
			   PyObject *output)
{
	PyObject *g = first_grad_fn(output), *prev = NULL;
	int slot;

	if (!g)
		return;
	if (nslots >= TORCH_BWD_MAX) {
		Py_DECREF(g);
		return;
	}
	slot = nslots++;
	slots[slot].name = name;
	slots[slot].state = ARMED;
	attach(g, slot, HOOK_START);
	Py_DECREF(g);
	for (Py_ssize_t i = 0; i < n && i < GRAD_ITEMS_MAX; i++) {
		g = grad_fn_of(in[i]);
		if (g && g != prev)
			attach(g, slot, HOOK_END);
		Py_XDECREF(prev);
		prev = g;
	}
	Py_XDECREF(prev);
}

/* ---- backward -------------------------------------------------------- */

/* The end of the backward pass: closes what no input hook closed. */
static PyObject *end_hook(PyObject *self, PyObject *unused)
{
	long long gen = PyLong_AsLongLong(self);
	double t = torch_hooks_now();

	(void)unused;
	PyErr_Clear();
	if (!torch_hooks_installed() || gen != (long long)torch_step_gen())
		Py_RETURN_NONE;
	end_queued = 0;
	for (int i = 0; i < nslots; i++)
		if (slots[i].state == STARTED) {
			torch_hooks_emit(TORCH_BACKWARD, slots[i].seq,
					 slots[i].name, slots[i].t0, t);
			slots[i].state = DONE;
		}
	torch_step_backward_ended(t);
	Py_RETURN_NONE;
}

static PyMethodDef end_def = {"probing_backward_end", end_hook, METH_NOARGS,
			      NULL};

static void queue_end(void)
{
	PyObject *engine = torch_hooks_engine(), *t, *fn, *r;

	if (end_queued || !engine)
		return;
	t = PyLong_FromLongLong((long long)torch_step_gen());
	fn = t ? PyCFunction_New(&end_def, t) : NULL;
	r = fn ? PyObject_CallMethodOneArg(engine, s_queue_callback, fn) : NULL;
	if (r)
		end_queued = 1;
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
	if (!torch_hooks_installed() || h->gen != torch_step_gen())
		Py_RETURN_NONE;
	for (int i = 0; i < h->n; i++) {
		int slot = h->act[i].slot;
		struct slot *b = slot < nslots ? &slots[slot] : NULL;

		if (!b)
			continue;
		if (!t)
			t = torch_hooks_now();
		if (h->act[i].kind == HOOK_START && b->state == ARMED) {
			b->state = STARTED;
			b->t0 = t;
			b->seq = torch_step_seq();
			queue_end();
		} else if (h->act[i].kind == HOOK_END && b->state == STARTED) {
			torch_hooks_emit(TORCH_BACKWARD, b->seq, b->name, b->t0,
					 t);
			b->state = DONE;
			torch_step_ended(t);
		}
	}
	Py_RETURN_NONE;
}

void torch_backward_step_begin(void)
{
	torch_backward_forget();
	nslots = 0;
	end_queued = 0;
}

/* The fast registration (see fast_register); without it, hooks are
 * registered the slow way. */
void torch_backward_install(void)
{
	PyObject *dict;

	function_cls = pymods_attr("torch.autograd.function", "Function");
	odict_type = pymods_attr("collections", "OrderedDict");
	if (!function_cls || !odict_type || !PyType_Check(function_cls))
		goto fail;
	orig_register = PyObject_GetAttr(function_cls, s_register_hook);
	dict = ((PyTypeObject *)function_cls)->tp_dict;
	if (!orig_register || !PyFunction_Check(orig_register) || !dict)
		goto fail;
	register_own = PyDict_Contains(dict, s_register_hook) == 1;
	if (PyObject_SetAttr(function_cls, s_register_hook, register_fn))
		goto fail;
	return;
fail:
	PyErr_Clear();
	Py_CLEAR(function_cls);
	Py_CLEAR(orig_register);
	Py_CLEAR(odict_type);
}

void torch_backward_remove(void)
{
	if (function_cls && orig_register) {
		if (register_own)
			PyObject_SetAttr(function_cls, s_register_hook,
					 orig_register);
		else
			PyObject_DelAttr(function_cls, s_register_hook);
		PyErr_Clear();
	}
	Py_CLEAR(function_cls);
	Py_CLEAR(orig_register);
	Py_CLEAR(odict_type);
	torch_backward_forget();
	nslots = 0;
}

int torch_backward_init(void)
{
	if (!register_fn)
		register_fn = PyCFunction_New(&fast_register_def, NULL);
	if (!s_register_hook)
		s_register_hook = PyUnicode_InternFromString("_register_hook");
	if (!register_fn || !s_register_hook || PyType_Ready(&bwd_hook_type))
		return -ENOMEM;
	if (!s_grad_fn)
		s_grad_fn = PyUnicode_InternFromString("grad_fn");
	if (!s_register_prehook)
		s_register_prehook =
			PyUnicode_InternFromString("register_prehook");
	if (!s_queue_callback)
		s_queue_callback = PyUnicode_InternFromString("queue_callback");
	return s_grad_fn && s_register_prehook && s_queue_callback ? 0
								   : -ENOMEM;
}
