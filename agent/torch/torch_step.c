/*
 * torch_step: optimizer step hooks.  See torch_step.h.
 */
#include "torch_step.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "torch_forward.h"
#include "torch_intern.h"
#include "torch_names.h"
#include "torch_vars.h"

/* Made once, never freed (an optimizer may still call one after
 * removal; it then does nothing). */
static PyObject *step_fn, *step_method, *step_pre_fn;
static PyObject *s_step_code, *s_remove;

/* Starts step torch_st.step at time t. */
void torch_step_begin(double t)
{
	PyObject *r;

	torch_st.gen++;
	torch_st.nbwd = 0;
	torch_st.end_queued = 0;
	torch_st.seq = 0;
	torch_st.t0 = torch_st.last_end = t;
	torch_st.bwd_end = torch_st.step_pre = 0;
	torch_st.traced = torch_st.step % torch_st.o.step_rate == 0;
	torch_st.k = torch_st.step / torch_st.o.step_rate;
	if (torch_st.traced && torch_st.cuda_is_init && !torch_st.cuda) {
		r = PyObject_CallNoArgs(torch_st.cuda_is_init);
		torch_st.cuda = r == Py_True;
		Py_XDECREF(r);
		PyErr_Clear();
	}
	torch_forward_enable(torch_st.traced);
	torch_hooks_publish_step();
}

static PyObject *step_hook(PyObject *self, PyObject *const *args,
			   Py_ssize_t nargs)
{
	double t = torch_hooks_now(), start;
	PyObject *exc_type, *exc_value, *exc_tb;

	(void)self;
	if (!torch_st.installed)
		Py_RETURN_NONE;
	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	if (torch_st.traced) {
		const char *cls =
			nargs >= 1 ? Py_TYPE(args[0])->tp_name : "optimizer";
		const char *dot = strrchr(cls, '.');
		start = torch_st.step_pre  ? torch_st.step_pre
			: torch_st.bwd_end ? torch_st.bwd_end
					   : torch_st.last_end;
		torch_hooks_emit(TORCH_STEP, torch_st.seq++,
				 torch_names_intern(dot ? dot + 1 : cls), start,
				 t);
		torch_vars_record();
	}
	torch_st.step++;
	torch_step_begin(torch_hooks_now());
	PyErr_Clear();
	PyErr_Restore(exc_type, exc_value, exc_tb);
	Py_RETURN_NONE;
}

static PyObject *step_pre_hook(PyObject *self, PyObject *const *args,
			       Py_ssize_t nargs)
{
	(void)self, (void)args, (void)nargs;
	if (torch_st.installed)
		torch_st.step_pre = torch_hooks_now();
	Py_RETURN_NONE;
}

static PyMethodDef step_def = {"probing_step_hook",
			       (PyCFunction)(void (*)(void))step_hook,
			       METH_FASTCALL, NULL};
static PyMethodDef step_pre_def = {"probing_step_pre_hook",
				   (PyCFunction)(void (*)(void))step_pre_hook,
				   METH_FASTCALL, NULL};

int torch_step_install(char *err, size_t errlen)
{
	PyObject *reg = torch_hooks_attr("torch.optim.optimizer",
					 "register_optimizer_step_post_hook");
	PyObject *reg_pre = torch_hooks_attr(
		"torch.optim.optimizer", "register_optimizer_step_pre_hook");

	if (reg) {
		torch_st.step_handle = PyObject_CallOneArg(reg, step_fn);
		if (torch_st.step_handle && reg_pre)
			torch_st.step_pre_handle =
				PyObject_CallOneArg(reg_pre, step_pre_fn);
		PyErr_Clear();
		Py_DECREF(reg);
		Py_XDECREF(reg_pre);
		torch_st.step_hook = "register_optimizer_step_post_hook";
		return torch_st.step_handle ? 0 : -EIO;
	}
	Py_XDECREF(reg_pre);
	torch_st.optimizer_cls =
		torch_hooks_attr("torch.optim.optimizer", "Optimizer");
	torch_st.orig_step_code =
		torch_st.optimizer_cls
			? PyObject_GetAttr(torch_st.optimizer_cls, s_step_code)
			: NULL;
	if (!torch_st.orig_step_code ||
	    PyObject_SetAttr(torch_st.optimizer_cls, s_step_code,
			     step_method)) {
		PyErr_Clear();
		Py_CLEAR(torch_st.orig_step_code);
		Py_CLEAR(torch_st.optimizer_cls);
		torch_st.step_hook = "none";
		snprintf(err, errlen, "this torch has no optimizer step hook");
		return -ENOTSUP;
	}
	torch_st.step_hook = "Optimizer._optimizer_step_code";
	return 0;
}

void torch_step_remove(void)
{
	PyObject *r;

	if (torch_st.step_handle) {
		r = PyObject_CallMethodNoArgs(torch_st.step_handle, s_remove);
		Py_XDECREF(r);
	}
	if (torch_st.step_pre_handle) {
		r = PyObject_CallMethodNoArgs(torch_st.step_pre_handle,
					      s_remove);
		Py_XDECREF(r);
	}
	if (torch_st.optimizer_cls && torch_st.orig_step_code)
		PyObject_SetAttr(torch_st.optimizer_cls, s_step_code,
				 torch_st.orig_step_code);
	PyErr_Clear();
	Py_CLEAR(torch_st.step_handle);
	Py_CLEAR(torch_st.step_pre_handle);
	Py_CLEAR(torch_st.optimizer_cls);
	Py_CLEAR(torch_st.orig_step_code);
}

int torch_step_init(void)
{
	if (!step_fn)
		step_fn = PyCFunction_New(&step_def, NULL);
	if (!step_pre_fn)
		step_pre_fn = PyCFunction_New(&step_pre_def, NULL);
	/* Set on a class, an instancemethod binds like a function does:
	 * optimizer._optimizer_step_code() calls step_fn(optimizer). */
	if (!step_method && step_fn)
		step_method = PyInstanceMethod_New(step_fn);
	if (!s_remove)
		s_remove = PyUnicode_InternFromString("remove");
	if (!s_step_code)
		s_step_code =
			PyUnicode_InternFromString("_optimizer_step_code");
	return step_fn && step_pre_fn && step_method && s_remove && s_step_code
		       ? 0
		       : -ENOMEM;
}
