/*
 * torch_forward: timing module calls, around Module.__call__.  See
 * torch_forward.h.
 */
#include "torch_forward.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "torch_backward.h"
#include "torch_intern.h"
#include "torch_names.h"
#include "torch_step.h"

/* A module call in progress.  Calls of several threads share the stack
 * (the GIL orders them); each thread sees only its own frames. */
struct frame {
	PyObject *module; /* borrowed: alive while its forward runs */
	PyThreadState *ts;
	int32_t name;
	int traced;
	int64_t seq;
	double t0;
	struct torch_gpu_mark gpu; /* its start event on the GPU, if any */
};

/*
 * The wrapper of torch.nn.Module.__call__ while installed: the module
 * call timed around torch's own (which then takes its fast path: global
 * module hooks would send every call of every module through
 * Module._call_impl's slow path, most of what tracing the forward cost).
 * A method descriptor, so calling a module makes no bound method.
 * One may outlive its installation in a chain someone else built around
 * Module.__call__ (torch.fx patches it while tracing): only the active
 * wrapper times, the others pass the call on.
 *
 * To torch.compile it looks like the function it wraps.  torch 2.x's
 * OptimizedModule compiles self._orig_mod.__call__, a bound method of
 * ours, and requires its __code__ (a bound method forwards attributes to
 * its __func__): __code__, __defaults__, __kwdefaults__, __globals__,
 * __module__, __doc__ and __annotations__ are read-only views of torch's
 * function.  Dynamo then compiles the frame of torch's function, which
 * our C call runs (timed: the compiled module's real call).  Where dynamo
 * traces a module call inside a compiled frame it looks up
 * type(module).__call__ and, finding an object that is no function,
 * wraps it by its `_torchdynamo_inline` attribute (read with
 * inspect.getattr_static: the instance __dict__ below holds it), torch's
 * function: it inlines torch's own __call__, no graph break, and its
 * guard is on our object's identity.  The wrapper is kept across
 * removals and reused (spare below), so switching tracing on and off
 * again makes dynamo recompile at most once per state, not once per
 * switch.  Module calls that torch's compile-time machinery makes with
 * FakeTensors (AOTAutograd tracing a graph) pass straight through.
 */
struct module_call {
	PyObject ob_base; /* PyObject_HEAD */
	vectorcallfunc vectorcall;
	PyObject *orig; /* what Module.__call__ was: a function */
	PyObject *dict; /* instance __dict__: _torchdynamo_inline */
};

static PyObject *module_call_vectorcall(PyObject *self, PyObject *const *args,
					size_t nargsf, PyObject *kwnames);

static void module_call_dealloc(PyObject *self)
{
	Py_XDECREF(((struct module_call *)self)->orig);
	Py_XDECREF(((struct module_call *)self)->dict);
	Py_TYPE(self)->tp_free(self);
}

static PyObject *module_call_get(PyObject *self, PyObject *obj, PyObject *type)
{
	(void)type;
	if (!obj || obj == Py_None)
		return Py_NewRef(self);
	return PyMethod_New(self, obj);
}

static PyObject *module_call_wrapped(PyObject *self, void *closure)
{
	(void)closure;
	return Py_NewRef(((struct module_call *)self)->orig);
}

/* __name__, __qualname__ (a bound method's repr shows them), __code__
 * and the other attributes of a function: torch's function's. */
static PyObject *module_call_attr(PyObject *self, void *closure)
{
	return PyObject_GetAttrString(((struct module_call *)self)->orig,
				      (const char *)closure);
}

#define ORIG_ATTR(name) {name, module_call_attr, NULL, NULL, name}

static PyGetSetDef module_call_getset[] = {
	{"__wrapped__", module_call_wrapped, NULL,
	 "torch's Module.__call__, which this one calls", NULL},
	ORIG_ATTR("__name__"),
	ORIG_ATTR("__qualname__"),
	ORIG_ATTR("__code__"),
	ORIG_ATTR("__defaults__"),
	ORIG_ATTR("__kwdefaults__"),
	ORIG_ATTR("__globals__"),
	ORIG_ATTR("__module__"),
	ORIG_ATTR("__doc__"),
	ORIG_ATTR("__annotations__"),
	{"__dict__", PyObject_GenericGetDict, NULL, NULL, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject module_call_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "probing.ModuleCall",
	.tp_basicsize = sizeof(struct module_call),
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL |
		    Py_TPFLAGS_METHOD_DESCRIPTOR,
	.tp_vectorcall_offset = offsetof(struct module_call, vectorcall),
	.tp_dictoffset = offsetof(struct module_call, dict),
	.tp_call = PyVectorcall_Call,
	.tp_dealloc = module_call_dealloc,
	.tp_descr_get = module_call_get,
	.tp_getset = module_call_getset,
};

static PyObject *module_cls; /* torch.nn.Module, owned while installed */
static struct module_call *active; /* the wrapper installed, owned */
static struct module_call *spare;  /* the last one made, owned: reused */
static int on_now; /* a traced step runs: calls are timed */
static PyObject *s_call;

static struct frame stack[TORCH_DEPTH_MAX];
static int depth;

static int module_traced(int32_t index)
{
	int64_t rate = torch_hooks_opts()->module_rate;

	return rate <= 1 || (index + torch_step_k()) % rate == 0;
}

/* A traced call of module with the n positional inputs in begins:
 * pushes its frame. */
static void call_begin(PyObject *module, PyThreadState *ts,
		       PyObject *const *in, Py_ssize_t n)
{
	struct frame *f, *root = NULL, *parent = NULL;
	struct torch_gpu_mark gpu = {NULL, -1};
	struct torch_module m;
	int traced;

	for (int i = 0; i < depth; i++)
		if (stack[i].ts == ts) {
			root = root ? root : &stack[i];
			parent = &stack[i];
		}
	torch_names_lookup(module, root ? root->module : NULL,
			   parent ? parent->name : 0, &m);
	traced = module_traced(m.index);
	/* Before the frame is pushed (torch's event calls release the GIL:
	 * other threads' calls may move the stack meanwhile) and before the
	 * clock (the CPU time is the call's own). */
	if (traced) {
		torch_hooks_gpu_poll(2);
		torch_hooks_gpu_begin(module, in, n, &gpu);
	}
	if (depth >= TORCH_DEPTH_MAX) {
		torch_hooks_gpu_forget(&gpu);
		return;
	}
	f = &stack[depth++];
	f->module = module;
	f->ts = ts;
	f->name = m.name;
	f->traced = traced;
	f->seq = traced ? torch_step_seq() : -1;
	f->gpu = gpu;
	f->t0 = traced ? torch_hooks_now() : 0;
}

/* The call of module ends with output (NULL: it raised): pops its frame
 * (and this thread's frames above it), emits its row and arms its
 * backward hooks on the n positional inputs. */
static void call_end(PyObject *module, PyThreadState *ts, PyObject *const *in,
		     Py_ssize_t n, PyObject *output)
{
	struct frame f;
	double end;
	int i, j, k;

	for (i = depth - 1; i >= 0; i--)
		if (stack[i].module == module && stack[i].ts == ts)
			break;
	if (i < 0)
		return; /* switched off (and maybe on again) meanwhile */
	f = stack[i];
	/* This thread's frames above it: calls that never returned here. */
	for (k = i, j = i + 1; j < depth; j++)
		if (stack[j].ts != ts)
			stack[k++] = stack[j];
		else
			torch_hooks_gpu_forget(&stack[j].gpu);
	depth = k;
	if (!f.traced || !output || !on_now) {
		torch_hooks_gpu_forget(&f.gpu);
		goto out;
	}
	end = torch_hooks_now();
	torch_hooks_emit_call(TORCH_FORWARD, f.seq, f.name, f.t0, end, &f.gpu);
	torch_step_ended(end);
	if (torch_hooks_opts()->backward)
		torch_backward_attach(f.name, in, n, output);
out:
	if (depth == 0)
		torch_backward_forget();
}

static PyObject *module_call_vectorcall(PyObject *self, PyObject *const *args,
					size_t nargsf, PyObject *kwnames)
{
	struct module_call *c = (struct module_call *)self;
	Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
	PyThreadState *ts;
	PyObject *module, *out;

	if (c != active || !on_now || !torch_hooks_installed() ||
	    !torch_step_traced() || nargs < 1 || depth >= TORCH_DEPTH_MAX ||
	    !PyObject_TypeCheck(args[0], (PyTypeObject *)module_cls) ||
	    (nargs > 1 && torch_hooks_compile_time(args[1])))
		return PyObject_Vectorcall(c->orig, args, nargsf, kwnames);
	module = args[0];
	ts = PyThreadState_Get();
	call_begin(module, ts, args + 1, nargs - 1);
	out = PyObject_Vectorcall(c->orig, args, nargsf, kwnames);
	if (c == active)
		call_end(module, ts, args + 1, nargs - 1, out);
	return out;
}

/* The wrapper to install over cur (Module.__call__ now): cur itself when
 * it is one of ours left from before, a new one over a function, else
 * NULL (new reference). */
static struct module_call *wrapper_for(PyObject *cur)
{
	struct module_call *c;

	if (Py_TYPE(cur) == &module_call_type)
		return (struct module_call *)Py_NewRef(cur);
	if (!PyFunction_Check(cur))
		return NULL;
	if (spare && spare->orig == cur)
		return (struct module_call *)Py_NewRef(spare);
	c = PyObject_New(struct module_call, &module_call_type);
	if (!c)
		return NULL;
	c->vectorcall = module_call_vectorcall;
	c->orig = Py_NewRef(cur);
	c->dict = PyDict_New();
	if (!c->dict ||
	    PyDict_SetItemString(c->dict, "_torchdynamo_inline", cur)) {
		Py_DECREF(c);
		return NULL;
	}
	Py_XSETREF(spare, (struct module_call *)Py_NewRef(c));
	return c;
}

int torch_forward_install(void)
{
	PyObject *cls = pymods_attr("torch.nn.modules.module", "Module");
	PyObject *dict, *cur;
	struct module_call *c;

	if (!cls || !PyType_Check(cls))
		goto fail;
	dict = ((PyTypeObject *)cls)->tp_dict;
	cur = dict ? PyDict_GetItemWithError(dict, s_call) : NULL;
	c = cur ? wrapper_for(cur) : NULL;
	if (!c)
		goto fail;
	if (PyObject_SetAttr(cls, s_call, (PyObject *)c)) {
		Py_DECREF(c);
		goto fail;
	}
	module_cls = cls;
	active = c;
	return 0;
fail:
	PyErr_Clear();
	Py_XDECREF(cls);
	return -ENOTSUP;
}

void torch_forward_remove(void)
{
	PyObject *dict, *cur;

	on_now = 0;
	for (int i = 0; i < depth; i++)
		torch_hooks_gpu_forget(&stack[i].gpu);
	depth = 0;
	torch_backward_forget();
	if (!active)
		return;
	/* Put torch's back unless someone has replaced ours since (then
	 * ours stays in their chain, passing calls on). */
	dict = ((PyTypeObject *)module_cls)->tp_dict;
	cur = dict ? PyDict_GetItemWithError(dict, s_call) : NULL;
	if (cur == (PyObject *)active)
		PyObject_SetAttr(module_cls, s_call, active->orig);
	PyErr_Clear();
	Py_CLEAR(active); /* (a reference in someone's chain keeps it) */
	Py_CLEAR(module_cls);
}

int torch_forward_enable(int on)
{
	on_now = on && active;
	return on_now;
}

int torch_forward_init(void)
{
	if (PyType_Ready(&module_call_type))
		return -ENOMEM;
	if (!s_call)
		s_call = PyUnicode_InternFromString("__call__");
	return s_call ? 0 : -ENOMEM;
}
