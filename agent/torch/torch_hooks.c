/*
 * torch_hooks: install and remove, the options and torch's objects the
 * hooks borrow, the rings and the records.  See torch_hooks.h; the hooks
 * themselves are in torch_forward.c, torch_backward.c and torch_step.c
 * (torch_vars.c for the watched variables): torch_intern.h.
 */
#include "torch_hooks.h"
#include "core/env.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "python/pymods.h"
#include "torch_backward.h"
#include "torch_forward.h"
#include "torch_intern.h"
#include "torch_names.h"
#include "torch_ring.h"
#include "torch_step.h"

static struct torch_ring trace_ring, var_ring;

/* For torch_hooks_info on other threads. */
static _Atomic int pub_installed, pub_traced, pub_rate_auto;
static _Atomic int64_t pub_step, pub_rate;
static const char *_Atomic pub_step_hook;

/* The installation (GIL). */
static int installed;
static struct torch_opts opts;
static PyTypeObject *tensor_type;
static PyObject *engine;
static PyObject *cuda_is_init, *cuda_stats, *cuda_device;
static int cuda; /* CUDA initialised: memory figures per row */
static int64_t rank;

double torch_hooks_now(void)
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

void torch_hooks_emit_var(const struct torch_var_rec *r)
{
	torch_ring_push(&var_ring, r);
}

void torch_hooks_publish_step(int64_t step, int traced, int64_t rate)
{
	atomic_store_explicit(&pub_step, step, memory_order_relaxed);
	atomic_store_explicit(&pub_rate, rate, memory_order_relaxed);
	atomic_store_explicit(&pub_rate_auto, opts.step_rate == 0,
			      memory_order_relaxed);
	atomic_store_explicit(&pub_traced, traced, memory_order_relaxed);
}

int torch_hooks_installed(void)
{
	return installed;
}

const struct torch_opts *torch_hooks_opts(void)
{
	return &opts;
}

PyTypeObject *torch_hooks_tensor_type(void)
{
	return tensor_type;
}

PyObject *torch_hooks_engine(void)
{
	return engine;
}

void torch_hooks_cuda_check(void)
{
	PyObject *r;

	if (cuda || !cuda_is_init)
		return;
	r = PyObject_CallNoArgs(cuda_is_init);
	cuda = r == Py_True;
	Py_XDECREF(r);
	PyErr_Clear();
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
	if (!cuda || !cuda_stats || !cuda_device)
		return;
	dev = PyObject_CallNoArgs(cuda_device);
	stats = dev ? PyObject_CallOneArg(cuda_stats, dev) : NULL;
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

void torch_hooks_emit(int stage, int64_t seq, int32_t name, double start,
		      double end)
{
	struct torch_trace_rec r = {
		.step = torch_step_number(),
		.seq = seq,
		.rank = rank,
		.module = name,
		.stage = stage,
		.duration = end - start,
		.offset = start - torch_step_t0(),
		.start = start,
	};

	memory(r.mem);
	torch_ring_push(&trace_ring, &r);
}

/* ---- install and remove ------------------------------------------------ */

static int make_statics(void)
{
	static int made;

	if (made)
		return 0;
	if (torch_forward_init() || torch_backward_init() || torch_step_init())
		return -ENOMEM;
	made = 1;
	return 0;
}

int torch_hooks_ready(void)
{
	return pymods_ready("torch") &&
			       pymods_ready("torch.nn.modules.module") &&
			       pymods_ready("torch.optim.optimizer")
		       ? 0
		       : -EAGAIN;
}

static void drop_refs(void)
{
	torch_forward_remove();
	Py_CLEAR(tensor_type);
	Py_CLEAR(engine);
	Py_CLEAR(cuda_is_init);
	Py_CLEAR(cuda_stats);
	Py_CLEAR(cuda_device);
}

int torch_hooks_install(const struct torch_opts *o, char *err, size_t errlen)
{
	PyObject *tensor;
	const char *env_rank;
	int rc;

	if (installed) {
		int rate_changed = o->step_rate != opts.step_rate;

		opts = *o;
		if (rate_changed)
			torch_step_rate_changed();
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
	opts = *o;
	tensor = pymods_attr("torch", "Tensor");
	if (torch_forward_install() || !tensor || !PyType_Check(tensor)) {
		Py_XDECREF(tensor);
		drop_refs();
		snprintf(err, errlen,
			 "torch.nn.Module.__call__ is not a function "
			 "(replaced by something else?)");
		return -ENOTSUP;
	}
	tensor_type = (PyTypeObject *)tensor;
	engine = pymods_attr("torch.autograd.variable",
			     "Variable._execution_engine");
	cuda_is_init = pymods_attr("torch", "cuda.is_initialized");
	cuda_stats = pymods_attr("torch", "_C._cuda_memoryStats");
	cuda_device = pymods_attr("torch", "_C._cuda_getDevice");
	rc = torch_step_install(err, errlen);
	if (rc) {
		drop_refs();
		return rc;
	}
	torch_backward_install();
	env_rank = env_get("RANK");
	rank = env_rank ? strtoll(env_rank, NULL, 10) : 0;
	cuda = 0;
	installed = 1;
	atomic_store(&pub_step_hook, torch_step_hook());
	atomic_store(&pub_installed, 1);
	if (!torch_step_begin(torch_hooks_now())) {
		torch_backward_remove();
		torch_step_remove();
		drop_refs();
		installed = 0;
		atomic_store(&pub_installed, 0);
		snprintf(err, errlen, "cannot register the module hooks");
		return -EIO;
	}
	return 0;
}

void torch_hooks_remove(void)
{
	if (!installed)
		return;
	torch_step_remove();
	torch_backward_remove();
	drop_refs();
	torch_names_clear();
	installed = 0;
	atomic_store(&pub_installed, 0);
}

void torch_hooks_info(struct torch_hooks_info *out)
{
	const char *how = atomic_load(&pub_step_hook);

	out->installed = atomic_load(&pub_installed);
	out->step = atomic_load_explicit(&pub_step, memory_order_relaxed);
	out->traced = atomic_load_explicit(&pub_traced, memory_order_relaxed);
	out->rate = atomic_load_explicit(&pub_rate, memory_order_relaxed);
	out->rate_auto =
		atomic_load_explicit(&pub_rate_auto, memory_order_relaxed);
	out->modules = torch_names_modules();
	out->step_hook = how ? how : "none";
	out->dropped = atomic_load(&trace_ring.dropped) +
		       atomic_load(&var_ring.dropped);
}
