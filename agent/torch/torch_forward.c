/*
 * torch_forward: the module forward hooks.  See torch_forward.h.
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
};

/* Our callables: made once, never freed (a hook tuple captured by a call
 * in flight may still call one after removal; they then do nothing). */
static PyObject *pre_fn, *post_fn, *s_remove;

/* torch's registrations and our handles, owned while installed. */
static PyObject *reg_pre, *reg_post, *pre_handle, *post_handle;
static int on_now; /* the hooks are registered */

static struct frame stack[TORCH_DEPTH_MAX];
static int depth;

static int module_traced(int32_t index)
{
	int64_t rate = torch_hooks_opts()->module_rate;

	return rate <= 1 || (index + torch_step_k()) % rate == 0;
}

static PyObject *pre_hook(PyObject *self, PyObject *const *args,
			  Py_ssize_t nargs)
{
	PyThreadState *ts = PyThreadState_Get();
	struct frame *f, *root = NULL, *parent = NULL;
	struct torch_module m;

	(void)self;
	if (!torch_hooks_installed() || !torch_step_traced() || nargs < 1 ||
	    depth >= TORCH_DEPTH_MAX)
		Py_RETURN_NONE;
	for (int i = 0; i < depth; i++)
		if (stack[i].ts == ts) {
			root = root ? root : &stack[i];
			parent = &stack[i];
		}
	torch_names_lookup(args[0], root ? root->module : NULL,
			   parent ? parent->name : 0, &m);
	f = &stack[depth++];
	f->module = args[0];
	f->ts = ts;
	f->name = m.name;
	f->traced = module_traced(m.index);
	f->seq = f->traced ? torch_step_seq() : -1;
	f->t0 = f->traced ? torch_hooks_now() : 0;
	Py_RETURN_NONE;
}

static PyObject *post_hook(PyObject *self, PyObject *const *args,
			   Py_ssize_t nargs)
{
	PyThreadState *ts = PyThreadState_Get();
	struct frame f;
	double end;
	int i, k;

	(void)self;
	if (!torch_hooks_installed() || nargs < 3)
		Py_RETURN_NONE;
	for (i = depth - 1; i >= 0; i--)
		if (stack[i].module == args[0] && stack[i].ts == ts)
			break;
	if (i < 0)
		Py_RETURN_NONE;
	f = stack[i];
	/* Pop it, and this thread's frames above it (calls that raised);
	 * other threads' frames stay. */
	for (k = i; i < depth; i++)
		if (stack[i].ts != ts)
			stack[k++] = stack[i];
	depth = k;
	if (!f.traced || !torch_step_traced())
		Py_RETURN_NONE;
	end = torch_hooks_now();
	torch_hooks_emit(TORCH_FORWARD, f.seq, f.name, f.t0, end);
	torch_step_ended(end);
	if (torch_hooks_opts()->backward)
		torch_backward_attach(f.name, args[1], args[2]);
	Py_RETURN_NONE;
}

static PyMethodDef pre_def = {"probing_forward_pre_hook",
			      (PyCFunction)(void (*)(void))pre_hook,
			      METH_FASTCALL, NULL};
static PyMethodDef post_def = {"probing_forward_hook",
			       (PyCFunction)(void (*)(void))post_hook,
			       METH_FASTCALL, NULL};

int torch_forward_install(void)
{
	reg_pre = pymods_attr("torch.nn.modules.module",
			      "register_module_forward_pre_hook");
	reg_post = pymods_attr("torch.nn.modules.module",
			       "register_module_forward_hook");
	if (reg_pre && reg_post)
		return 0;
	Py_CLEAR(reg_pre);
	Py_CLEAR(reg_post);
	return -ENOTSUP;
}

void torch_forward_remove(void)
{
	torch_forward_enable(0);
	Py_CLEAR(reg_pre);
	Py_CLEAR(reg_post);
	depth = 0;
}

int torch_forward_enable(int on)
{
	PyObject *r;

	if (on == on_now)
		return on_now;
	if (on && !reg_pre)
		return on_now; /* not installed */
	if (on) {
		pre_handle = PyObject_CallOneArg(reg_pre, pre_fn);
		post_handle = pre_handle
				      ? PyObject_CallOneArg(reg_post, post_fn)
				      : NULL;
		if (post_handle)
			return on_now = 1;
		PyErr_Clear(); /* undo below */
	}
	if (pre_handle) {
		r = PyObject_CallMethodNoArgs(pre_handle, s_remove);
		Py_XDECREF(r);
	}
	if (post_handle) {
		r = PyObject_CallMethodNoArgs(post_handle, s_remove);
		Py_XDECREF(r);
	}
	PyErr_Clear();
	Py_CLEAR(pre_handle);
	Py_CLEAR(post_handle);
	return on_now = 0;
}

int torch_forward_init(void)
{
	if (!pre_fn)
		pre_fn = PyCFunction_New(&pre_def, NULL);
	if (!post_fn)
		post_fn = PyCFunction_New(&post_def, NULL);
	if (!s_remove)
		s_remove = PyUnicode_InternFromString("remove");
	return pre_fn && post_fn && s_remove ? 0 : -ENOMEM;
}
