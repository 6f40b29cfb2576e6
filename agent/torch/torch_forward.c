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

/* Our callables: made once, never freed (a hook tuple captured by a call
 * in flight may still call one after removal; they then do nothing). */
static PyObject *pre_fn, *post_fn, *s_remove;

static int module_traced(int32_t index)
{
	return torch_st.o.module_rate <= 1 ||
	       (index + torch_st.k) % torch_st.o.module_rate == 0;
}

static PyObject *pre_hook(PyObject *self, PyObject *const *args,
			  Py_ssize_t nargs)
{
	PyThreadState *ts = PyThreadState_Get();
	struct torch_frame *f, *root = NULL, *parent = NULL;
	struct torch_module m;

	(void)self;
	if (!torch_st.installed || !torch_st.traced || nargs < 1 ||
	    torch_st.depth >= TORCH_DEPTH_MAX)
		Py_RETURN_NONE;
	for (int i = 0; i < torch_st.depth; i++)
		if (torch_st.stack[i].ts == ts) {
			root = root ? root : &torch_st.stack[i];
			parent = &torch_st.stack[i];
		}
	torch_names_lookup(args[0], root ? root->module : NULL,
			   parent ? parent->name : 0, &m);
	f = &torch_st.stack[torch_st.depth++];
	f->module = args[0];
	f->ts = ts;
	f->name = m.name;
	f->traced = module_traced(m.index);
	f->seq = f->traced ? torch_st.seq++ : -1;
	f->t0 = f->traced ? torch_hooks_now() : 0;
	Py_RETURN_NONE;
}

static PyObject *post_hook(PyObject *self, PyObject *const *args,
			   Py_ssize_t nargs)
{
	PyThreadState *ts = PyThreadState_Get();
	struct torch_frame f;
	double end;
	int i, k;

	(void)self;
	if (!torch_st.installed || nargs < 3)
		Py_RETURN_NONE;
	for (i = torch_st.depth - 1; i >= 0; i--)
		if (torch_st.stack[i].module == args[0] &&
		    torch_st.stack[i].ts == ts)
			break;
	if (i < 0)
		Py_RETURN_NONE;
	f = torch_st.stack[i];
	/* Pop it, and this thread's frames above it (calls that raised);
	 * other threads' frames stay. */
	for (k = i; i < torch_st.depth; i++)
		if (torch_st.stack[i].ts != ts)
			torch_st.stack[k++] = torch_st.stack[i];
	torch_st.depth = k;
	if (!f.traced || !torch_st.traced)
		Py_RETURN_NONE;
	end = torch_hooks_now();
	torch_hooks_emit(TORCH_FORWARD, f.seq, f.name, f.t0, end);
	torch_st.last_end = end;
	if (torch_st.o.backward)
		torch_backward_attach(f.name, args[1], args[2]);
	Py_RETURN_NONE;
}

static PyMethodDef pre_def = {"probing_forward_pre_hook",
			      (PyCFunction)(void (*)(void))pre_hook,
			      METH_FASTCALL, NULL};
static PyMethodDef post_def = {"probing_forward_hook",
			       (PyCFunction)(void (*)(void))post_hook,
			       METH_FASTCALL, NULL};

void torch_forward_enable(int on)
{
	PyObject *r;

	if (on == torch_st.fwd_on)
		return;
	if (on) {
		torch_st.pre_handle =
			PyObject_CallOneArg(torch_st.reg_pre, pre_fn);
		torch_st.post_handle =
			torch_st.pre_handle
				? PyObject_CallOneArg(torch_st.reg_post,
						      post_fn)
				: NULL;
		if (!torch_st.post_handle) {
			PyErr_Clear();
			on = 0; /* undo below */
		} else {
			torch_st.fwd_on = 1;
			return;
		}
	}
	if (torch_st.pre_handle) {
		r = PyObject_CallMethodNoArgs(torch_st.pre_handle, s_remove);
		Py_XDECREF(r);
	}
	if (torch_st.post_handle) {
		r = PyObject_CallMethodNoArgs(torch_st.post_handle, s_remove);
		Py_XDECREF(r);
	}
	PyErr_Clear();
	Py_CLEAR(torch_st.pre_handle);
	Py_CLEAR(torch_st.post_handle);
	torch_st.fwd_on = 0;
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
