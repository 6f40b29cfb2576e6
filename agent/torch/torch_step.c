/*
 * torch_step: optimizer step hooks.  See torch_step.h.
 */
#include "torch_step.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "torch_backward.h"
#include "torch_forward.h"
#include "torch_intern.h"
#include "torch_names.h"
#include "torch_rate.h"
#include "torch_vars.h"

/* Made once, never freed (an optimizer may still call one after
 * removal; it then does nothing). */
static PyObject *step_fn, *step_method, *step_pre_fn;
static PyObject *s_step_code, *s_remove;

/* How steps are hooked: torch 2.x's handles, or torch 1.x's method. */
static PyObject *step_handle, *step_pre_handle;	 /* torch 2.x */
static PyObject *optimizer_cls, *orig_step_code; /* torch 1.x */
static const char *hook_name;

/* The current step. */
static int64_t step, k; /* k: ordinal of the traced step */
static int64_t auto_rate = 1; /* step_rate=auto's rate (torch_rate.h) */
static int whole;	      /* the step began at an optimizer step */
static int traced;
static uint32_t gen;
static int64_t seq;
static double t0, last_end, bwd_end, step_pre;

const char *torch_step_hook(void)
{
	return hook_name;
}

int64_t torch_step_number(void)
{
	return step;
}

int torch_step_traced(void)
{
	return traced;
}

int64_t torch_step_k(void)
{
	return k;
}

uint32_t torch_step_gen(void)
{
	return gen;
}

double torch_step_t0(void)
{
	return t0;
}

int64_t torch_step_seq(void)
{
	return seq++;
}

void torch_step_ended(double t)
{
	last_end = t;
}

void torch_step_backward_ended(double t)
{
	bwd_end = last_end = t;
}

static int64_t rate_now(void)
{
	int64_t r = torch_hooks_opts()->step_rate;

	return r > 0 ? r : auto_rate;
}

/* Is the current step traced, and which traced step is it. */
static void decide(void)
{
	int64_t rate = rate_now();

	traced = step % rate == 0;
	k = step / rate;
}

int torch_step_begin(double t)
{
	int ok;

	gen++;
	seq = 0;
	t0 = last_end = t;
	bwd_end = step_pre = 0;
	torch_backward_step_begin();
	/* Rows of earlier steps whose GPU work is done (bounded, never
	 * waits); also on untraced steps, so they do not wait for the next
	 * traced one. */
	torch_hooks_gpu_poll(TORCH_GPU_PENDING);
	decide();
	if (traced)
		torch_hooks_cuda_check();
	ok = torch_forward_enable(traced) == traced;
	torch_hooks_publish_step(step, traced, rate_now());
	return ok;
}

void torch_step_rate_changed(void)
{
	decide();
	torch_forward_enable(traced);
	torch_hooks_publish_step(step, traced, rate_now());
}

static PyObject *step_hook(PyObject *self, PyObject *const *args,
			   Py_ssize_t nargs)
{
	double t = torch_hooks_now(), start;
	PyObject *exc_type, *exc_value, *exc_tb;

	(void)self;
	if (!torch_hooks_installed())
		Py_RETURN_NONE;
	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	if (traced) {
		const char *cls =
			nargs >= 1 ? Py_TYPE(args[0])->tp_name : "optimizer";
		const char *dot = strrchr(cls, '.');
		start = step_pre ? step_pre : bwd_end ? bwd_end : last_end;
		torch_hooks_emit(TORCH_STEP, seq++,
				 torch_names_intern(dot ? dot + 1 : cls), start,
				 t);
		torch_vars_record();
		/* seq: the rows of this step; t - t0: its length (of a
		 * whole step: not the one tracing began in). */
		if (whole)
			auto_rate = torch_rate_auto(seq, t - t0, auto_rate);
	}
	step++;
	torch_step_begin(torch_hooks_now());
	whole = 1;
	PyErr_Clear();
	PyErr_Restore(exc_type, exc_value, exc_tb);
	Py_RETURN_NONE;
}

static PyObject *step_pre_hook(PyObject *self, PyObject *const *args,
			       Py_ssize_t nargs)
{
	(void)self, (void)args, (void)nargs;
	if (torch_hooks_installed())
		step_pre = torch_hooks_now();
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
	PyObject *reg = pymods_attr("torch.optim.optimizer",
				    "register_optimizer_step_post_hook");
	PyObject *reg_pre = pymods_attr("torch.optim.optimizer",
					"register_optimizer_step_pre_hook");

	if (reg) {
		step_handle = PyObject_CallOneArg(reg, step_fn);
		if (step_handle && reg_pre)
			step_pre_handle =
				PyObject_CallOneArg(reg_pre, step_pre_fn);
		PyErr_Clear();
		Py_DECREF(reg);
		Py_XDECREF(reg_pre);
		hook_name = "register_optimizer_step_post_hook";
		return step_handle ? 0 : -EIO;
	}
	Py_XDECREF(reg_pre);
	optimizer_cls = pymods_attr("torch.optim.optimizer", "Optimizer");
	orig_step_code = optimizer_cls
				 ? PyObject_GetAttr(optimizer_cls, s_step_code)
				 : NULL;
	if (!orig_step_code ||
	    PyObject_SetAttr(optimizer_cls, s_step_code, step_method)) {
		PyErr_Clear();
		Py_CLEAR(orig_step_code);
		Py_CLEAR(optimizer_cls);
		hook_name = "none";
		snprintf(err, errlen, "this torch has no optimizer step hook");
		return -ENOTSUP;
	}
	hook_name = "Optimizer._optimizer_step_code";
	return 0;
}

void torch_step_remove(void)
{
	PyObject *r;

	if (step_handle) {
		r = PyObject_CallMethodNoArgs(step_handle, s_remove);
		Py_XDECREF(r);
	}
	if (step_pre_handle) {
		r = PyObject_CallMethodNoArgs(step_pre_handle, s_remove);
		Py_XDECREF(r);
	}
	if (optimizer_cls && orig_step_code)
		PyObject_SetAttr(optimizer_cls, s_step_code, orig_step_code);
	PyErr_Clear();
	Py_CLEAR(step_handle);
	Py_CLEAR(step_pre_handle);
	Py_CLEAR(optimizer_cls);
	Py_CLEAR(orig_step_code);
	traced = 0;
	gen++;
	auto_rate = 1; /* a new installation measures again */
	whole = 0;
	torch_hooks_publish_step(step, traced, rate_now());
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
