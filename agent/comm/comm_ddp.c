/*
 * comm_ddp: Probing's communication hook on DDP models.  See comm_ddp.h.
 */
#include "comm_ddp.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "comm_wrap.h"
#include "python/pymods.h"

#define DEFAULT_HOOKS                                                          \
	"torch.distributed.algorithms.ddp_comm_hooks.default_hooks"

/* The hook of one model: the program's own hook once it registers one. */
struct ddp_hook {
	PyObject_HEAD PyObject *pg;
	PyObject *state; /* the program's hook and its state, or NULL */
	PyObject *hook;
};

static int on;
static PyObject *ddp_cls; /* DistributedDataParallel */
static PyObject *dist;	  /* torch.distributed (kept: hooks use it) */
static PyObject *hooks;	  /* WeakKeyDictionary: model -> its hook (kept;
			     nothing is added to the model itself, which
			     the program may pickle) */
static _Atomic int hooked;

enum { M_INIT, M_REGISTER, M_BUILTIN, NMETHODS };
static const char *const method_names[NMETHODS] = {
	"__init__", "register_comm_hook", "_register_builtin_comm_hook"};
static PyObject *originals[NMETHODS], *ours[NMETHODS];

int comm_ddp_count(void)
{
	return atomic_load(&hooked);
}

/* ---- the hook ---------------------------------------------------------- */

/* The all-reduced bucket, once the all-reduce's future completed: its
 * record (self: its id, NULL when not recorded) ends here. */
static PyObject *first_result(PyObject *self, PyObject *fut)
{
	PyObject *v = PyObject_CallMethod(fut, "value", NULL), *t;

	if (self)
		comm_wrap_end(PyLong_AsUnsignedLongLong(self), v != NULL);
	if (!v)
		return NULL;
	t = PySequence_GetItem(v, 0);
	Py_DECREF(v);
	return t;
}

static PyMethodDef first_def = {"probing_allreduce_result", first_result,
				METH_O, "the all-reduced bucket"};

/* PyTorch's allreduce_hook: bucket / size, all_reduce, its future. */
static PyObject *default_reduce(struct ddp_hook *h, PyObject *bucket)
{
	PyObject *buf = NULL, *size = NULL, *r = NULL, *work = NULL;
	PyObject *fut = NULL, *key = NULL, *then = NULL, *res = NULL;
	uint64_t id = 0;

	buf = PyObject_CallMethod(bucket, "buffer", NULL);
	size = buf ? PyObject_CallMethod(h->pg, "size", NULL) : NULL;
	r = size ? PyObject_CallMethod(buf, "div_", "O", size) : NULL;
	work = r ? comm_wrap_all_reduce_async(buf, h->pg, &id) : NULL;
	fut = work ? PyObject_CallMethod(work, "get_future", NULL) : NULL;
	key = fut && id ? PyLong_FromUnsignedLongLong(id) : NULL;
	then = fut && (key || !id) ? PyCFunction_New(&first_def, key) : NULL;
	res = then ? PyObject_CallMethod(fut, "then", "O", then) : NULL;
	if (!res && id) /* no callback to end it */
		comm_wrap_end(id, 0);
	Py_XDECREF(then);
	Py_XDECREF(key);
	Py_XDECREF(fut);
	Py_XDECREF(work);
	Py_XDECREF(r);
	Py_XDECREF(size);
	Py_XDECREF(buf);
	return res;
}

static PyObject *hook_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
	struct ddp_hook *h = (struct ddp_hook *)self;
	PyObject *state, *bucket;

	if (kwargs && PyDict_GET_SIZE(kwargs)) {
		PyErr_SetString(PyExc_TypeError, "no keyword arguments");
		return NULL;
	}
	if (!PyArg_ParseTuple(args, "OO", &state, &bucket))
		return NULL;
	if (h->hook)
		return PyObject_CallFunctionObjArgs(h->hook, h->state, bucket,
						    NULL);
	return default_reduce(h, bucket);
}

static void hook_dealloc(PyObject *self)
{
	struct ddp_hook *h = (struct ddp_hook *)self;

	Py_XDECREF(h->pg);
	Py_XDECREF(h->state);
	Py_XDECREF(h->hook);
	Py_TYPE(self)->tp_free(self);
}

static PyTypeObject hook_type = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "probing.DDPCommHook",
	.tp_basicsize = sizeof(struct ddp_hook),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Probing's DDP communication hook: PyTorch's allreduce_hook "
		  "through the recorded torch.distributed.all_reduce, or the "
		  "program's own hook",
	.tp_call = hook_call,
	.tp_dealloc = hook_dealloc,
};

/* The model's hook when it is Probing's (borrowed), else NULL. */
static struct ddp_hook *hook_of(PyObject *model)
{
	PyObject *h = hooks ? PyObject_CallMethod(hooks, "get", "O", model)
			    : NULL;

	if (!h) {
		PyErr_Clear();
		return NULL;
	}
	Py_DECREF(h); /* the dictionary keeps it */
	return Py_TYPE(h) == &hook_type ? (struct ddp_hook *)h : NULL;
}

/* A new model: Probing's hook on its reducer.  Never fails the model. */
static void attach(PyObject *model)
{
	PyObject *reducer = PyObject_GetAttrString(model, "reducer");
	PyObject *pg =
		reducer ? PyObject_GetAttrString(model, "process_group") : NULL;
	PyObject *reg =
		pg ? PyObject_GetAttrString(dist, "_register_comm_hook") : NULL;
	struct ddp_hook *h =
		reg ? PyObject_New(struct ddp_hook, &hook_type) : NULL;
	PyObject *r = NULL;

	if (h) {
		h->pg = Py_NewRef(pg);
		h->state = h->hook = NULL;
		/* Known first: a hook in the reducer that we did not know of
		 * would refuse the program's own. */
		if (PyObject_SetItem(hooks, model, (PyObject *)h) == 0)
			r = PyObject_CallFunctionObjArgs(reg, reducer, Py_None,
							 (PyObject *)h, NULL);
		if (r)
			atomic_fetch_add(&hooked, 1);
		else if (PyObject_DelItem(hooks, model))
			PyErr_Clear();
	}
	PyErr_Clear();
	Py_XDECREF(r);
	Py_XDECREF((PyObject *)h);
	Py_XDECREF(reg);
	Py_XDECREF(pg);
	Py_XDECREF(reducer);
}

/* ---- DistributedDataParallel's methods, wrapped ------------------------- */

static PyObject *call_original(int m, PyObject *args, PyObject *kwargs)
{
	return PyObject_Call(originals[m], args, kwargs);
}

static PyObject *ddp_init(PyObject *unused, PyObject *args, PyObject *kwargs)
{
	PyObject *r = call_original(M_INIT, args, kwargs);

	(void)unused;
	if (r && on && PyTuple_GET_SIZE(args) > 0)
		attach(PyTuple_GET_ITEM(args, 0));
	return r;
}

/* The program's hook in Probing's place: as DDP would take it. */
static PyObject *take_hook(PyObject *model, struct ddp_hook *h, PyObject *state,
			   PyObject *hook, PyObject *name)
{
	PyObject *logger, *r;

	r = PyObject_CallMethod(model, "_check_comm_hook", "O", hook);
	if (!r && PyErr_ExceptionMatches(PyExc_AttributeError))
		PyErr_Clear(); /* a torch without the check */
	else if (!r)
		return NULL;
	Py_XDECREF(r);
	logger = PyObject_GetAttrString(model, "logger");
	r = logger && name ? PyObject_CallMethod(logger, "_set_comm_hook_name",
						 "O", name)
			   : NULL;
	Py_XDECREF(r);
	Py_XDECREF(logger);
	PyErr_Clear();
	Py_XSETREF(h->state, Py_NewRef(state));
	Py_XSETREF(h->hook, Py_NewRef(hook));
	Py_RETURN_NONE;
}

static PyObject *ddp_register(PyObject *unused, PyObject *args,
			      PyObject *kwargs)
{
	static char *kwlist[] = {"self", "state", "hook", NULL};
	PyObject *model, *state, *hook, *name, *r;
	struct ddp_hook *h;

	(void)unused;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO", kwlist, &model,
					 &state, &hook) ||
	    !(h = hook_of(model)) || h->hook) {
		PyErr_Clear();
		return call_original(M_REGISTER, args, kwargs);
	}
	name = PyObject_GetAttrString(hook, "__qualname__");
	if (!name)
		PyErr_Clear();
	r = take_hook(model, h, state, hook, name);
	Py_XDECREF(name);
	return r;
}

static PyObject *ddp_builtin(PyObject *unused, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = {"self", "comm_hook_type", NULL};
	PyObject *model, *type, *name, *hook = NULL, *r = NULL;
	const char *text;
	struct ddp_hook *h;

	(void)unused;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO", kwlist, &model,
					 &type) ||
	    !(h = hook_of(model)) || h->hook) {
		PyErr_Clear();
		return call_original(M_BUILTIN, args, kwargs);
	}
	name = PyObject_Str(type);
	text = name ? PyUnicode_AsUTF8(name) : NULL;
	if (text && strstr(text, "FP16_COMPRESS")) {
		PyObject *mod = PyImport_ImportModule(DEFAULT_HOOKS);

		hook = mod ? PyObject_GetAttrString(mod, "fp16_compress_hook")
			   : NULL;
		Py_XDECREF(mod);
		if (hook)
			r = take_hook(model, h, h->pg, hook, name);
	} else if (text && strstr(text, "ALLREDUCE")) {
		r = Py_NewRef(Py_None); /* what the hook does already */
	} else if (text) {
		PyErr_Format(PyExc_RuntimeError,
			     "probing: unknown built-in comm hook %s (turn "
			     "comm.ddp off to let DDP take it)",
			     text);
	}
	Py_XDECREF(hook);
	Py_XDECREF(name);
	return r;
}

static PyMethodDef method_defs[NMETHODS] = {
	{"__init__", (PyCFunction)(void (*)(void))ddp_init,
	 METH_VARARGS | METH_KEYWORDS, NULL},
	{"register_comm_hook", (PyCFunction)(void (*)(void))ddp_register,
	 METH_VARARGS | METH_KEYWORDS, NULL},
	{"_register_builtin_comm_hook",
	 (PyCFunction)(void (*)(void))ddp_builtin, METH_VARARGS | METH_KEYWORDS,
	 NULL},
};

/* ---- install and remove ------------------------------------------------ */

int comm_ddp_install(char *err, size_t errlen)
{
	if (ddp_cls) {
		on = 1;
		return 0;
	}
	if (!pymods_ready("torch.nn.parallel.distributed"))
		return -EAGAIN;
	if (PyType_Ready(&hook_type)) {
		PyErr_Clear();
		snprintf(err, errlen, "cannot make the DDP hook type");
		return -ENOMEM;
	}
	ddp_cls = pymods_attr("torch.nn.parallel.distributed",
			      "DistributedDataParallel");
	if (!dist)
		dist = pymods_get("torch.distributed");
	if (!hooks) {
		PyObject *wkd = pymods_attr("weakref", "WeakKeyDictionary");

		hooks = wkd ? PyObject_CallNoArgs(wkd) : NULL;
		Py_XDECREF(wkd);
		PyErr_Clear();
	}
	for (int m = 0; ddp_cls && dist && hooks && m < NMETHODS; m++) {
		PyObject *f = PyObject_GetAttrString(ddp_cls, method_names[m]);
		PyObject *fn =
			f ? PyCFunction_New(&method_defs[m], NULL) : NULL;
		PyObject *meth = fn ? PyInstanceMethod_New(fn) : NULL;

		Py_XDECREF(fn);
		if (!meth ||
		    PyObject_SetAttrString(ddp_cls, method_names[m], meth)) {
			PyErr_Clear();
			Py_XDECREF(meth);
			Py_XDECREF(f);
			comm_ddp_remove();
			snprintf(err, errlen,
				 "cannot wrap DistributedDataParallel.%s",
				 method_names[m]);
			return -ENOTSUP;
		}
		originals[m] = f;
		ours[m] = meth;
	}
	if (!ddp_cls || !dist || !hooks) {
		comm_ddp_remove();
		snprintf(err, errlen,
			 "no DistributedDataParallel in "
			 "torch.nn.parallel.distributed");
		return -ENOTSUP;
	}
	on = 1;
	return 0;
}

void comm_ddp_remove(void)
{
	on = 0;
	for (int m = 0; m < NMETHODS; m++) {
		PyObject *cur;

		if (!ours[m])
			continue;
		/* Through the class's own dict: getattr would bind. */
		cur = PyDict_GetItemString(((PyTypeObject *)ddp_cls)->tp_dict,
					   method_names[m]);
		if (cur == ours[m] &&
		    PyObject_SetAttrString(ddp_cls, method_names[m],
					   originals[m]))
			PyErr_Clear();
		Py_CLEAR(ours[m]);
		Py_CLEAR(originals[m]);
	}
	Py_CLEAR(ddp_cls);
}
