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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
static int fake_looked; /* torch_hooks_compile_time's types looked up */
static PyObject *cuda_mod;     /* torch.cuda, owned while installed */
static PyObject *s_initialized; /* "_initialized" */
static int cuda_asked; /* is_initialized() said no this step */

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

	fake_looked = 0;
	cuda_asked = 0;
	if (cuda || !cuda_is_init)
		return;
	r = PyObject_CallNoArgs(cuda_is_init);
	cuda = r == Py_True;
	Py_XDECREF(r);
	PyErr_Clear();
}

/* CUDA initialised since the step began (the program moved its model to
 * the GPU after tracing started: step 0 of a program traced from its
 * start)?  torch.cuda._initialized is a dictionary lookup, cheap enough
 * for every traced call; only when it turns true is torch's
 * is_initialized() called (which also says no in a forked child), once
 * a step. */
static void cuda_recheck(void)
{
	PyObject *v;

	if (cuda || cuda_asked || !cuda_mod)
		return;
	v = PyObject_GetAttr(cuda_mod, s_initialized);
	if (v == Py_True) {
		cuda_asked = 1;
		torch_hooks_cuda_check();
		cuda_asked = !cuda;
	}
	Py_XDECREF(v);
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

/* CUDA allocator figures in MB of device index (-1: the current device),
 * zeros without CUDA.  The raw dicts of torch._C._cuda_memoryStats are
 * what torch.cuda.memory_stats() flattens: allocated_bytes.all.current
 * is torch.cuda.memory_allocated(), .peak max_memory_allocated(),
 * reserved_bytes.all.current / .peak memory_reserved() /
 * max_memory_reserved() (torch 1.x and 2.x). */
static void memory(double mem[4], int index)
{
	PyObject *dev, *stats;

	mem[0] = mem[1] = mem[2] = mem[3] = 0;
	cuda_recheck();
	if (!cuda || !cuda_stats || !cuda_device)
		return;
	dev = index >= 0 ? PyLong_FromLong(index)
			 : PyObject_CallNoArgs(cuda_device);
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

static void record_of(struct torch_trace_rec *r, int stage, int64_t seq,
		      int32_t name, double start, double end, int dev)
{
	memset(r, 0, sizeof(*r));
	r->step = torch_step_number();
	r->seq = seq;
	r->rank = rank;
	r->module = name;
	r->stage = stage;
	r->clock = TORCH_CLOCK_CPU;
	r->duration = r->cpu_duration = end - start;
	r->offset = start - torch_step_t0();
	r->start = start;
	/* The thread the stage ran on (the end's hook runs there): a
	 * timeline's track.  A system call, a traced stage's cost beside
	 * the hooks' own (microseconds). */
	r->tid = (int32_t)syscall(SYS_gettid);
	memory(r->mem, dev);
}

void torch_hooks_emit(int stage, int64_t seq, int32_t name, double start,
		      double end)
{
	struct torch_trace_rec r;

	record_of(&r, stage, seq, name, start, end, -1);
	torch_ring_push(&trace_ring, &r);
}

/* ---- GPU time ---------------------------------------------------------- */

/*
 * torch's CUDA events, borrowed while installed (event_cls NULL: no GPU
 * timing).  The events are torch.cuda.Event objects, but record, query
 * and elapsed_time are called through torch._C._CudaEventBase's own
 * methods (C, no Python frame; torch.cuda.Event's overrides only default
 * the stream).  record takes a torch.cuda.Stream: the device's current
 * stream, cached under the raw id torch._C._cuda_getCurrentStream gives
 * (a C call), made again with torch.cuda.current_stream() when it changes.
 */
static PyObject *event_cls, *event_kwargs, *empty_args;
static PyObject *ev_record, *ev_query, *ev_elapsed;
static PyObject *stream_raw, *stream_fn, *capturing_fn;
static PyObject *fake_types[2]; /* FakeTensor, FunctionalTensor */
static PyObject *s_is_cuda, *s_get_device, *s_parameters, *s_buffers;

static struct {
	PyObject *raw, *stream;
} streams[TORCH_GPU_DEVICES];

/* Free events of each device (an event belongs to the device it was
 * first recorded on), and how many events are alive in all.  A device's
 * pool, made when it is first used, has room for every event alive, so
 * that giving one back never frees it: freeing an event releases the GIL
 * (torch's destructor), which the hooks' callers must not see. */
static PyObject **pool[TORCH_GPU_DEVICES];
static int npool[TORCH_GPU_DEVICES];
static int nevents;
static int polling; /* torch_hooks_gpu_poll runs (it may release the GIL) */

/* Rows waiting for their GPU time: a FIFO of TORCH_GPU_PENDING (made at
 * install), head - tail of them. */
struct pending {
	struct torch_trace_rec r;
	PyObject *start, *end; /* owned */
	int dev;
};
static struct pending *pend;
static size_t pend_head, pend_tail;
static _Atomic uint64_t gpu_lost;

static PyObject *event_take(int dev)
{
	PyObject *ev;

	if (npool[dev])
		return pool[dev][--npool[dev]];
	if (nevents >= TORCH_GPU_EVENTS)
		return NULL;
	if (!pool[dev] && !(pool[dev] = calloc(TORCH_GPU_EVENTS, sizeof(ev))))
		return NULL;
	ev = PyObject_Call(event_cls, empty_args, event_kwargs);
	if (!ev) {
		PyErr_Clear();
		return NULL;
	}
	nevents++;
	return ev;
}

/* Takes ev (may be NULL) back into dev's pool, or frees it (cudaEventDestroy
 * of an event not yet reached is safe: CUDA frees it once reached). */
static void event_give(PyObject *ev, int dev)
{
	if (!ev)
		return;
	if (event_cls && dev >= 0 && dev < TORCH_GPU_DEVICES && pool[dev] &&
	    npool[dev] < TORCH_GPU_EVENTS) {
		pool[dev][npool[dev]++] = ev;
		return;
	}
	nevents--;
	Py_DECREF(ev);
}

/* Is the current stream being captured into a CUDA graph (then nothing
 * may be recorded or queried)?  Errors count as yes. */
static int capturing(void)
{
	PyObject *r;
	int yes;

	if (!capturing_fn)
		return 0;
	r = PyObject_CallNoArgs(capturing_fn);
	yes = r != Py_False;
	Py_XDECREF(r);
	PyErr_Clear();
	return yes;
}

/* The current stream of device dev (borrowed, cached), or NULL. */
static PyObject *stream_of(int dev)
{
	PyObject *idx = PyLong_FromLong(dev), *raw, *st;

	raw = idx ? PyObject_CallOneArg(stream_raw, idx) : NULL;
	if (!raw)
		goto fail;
	if (streams[dev].raw &&
	    PyObject_RichCompareBool(raw, streams[dev].raw, Py_EQ) == 1) {
		Py_DECREF(raw);
		Py_DECREF(idx);
		return streams[dev].stream;
	}
	st = PyObject_CallOneArg(stream_fn, idx);
	if (!st)
		goto fail;
	Py_XSETREF(streams[dev].raw, raw);
	Py_XSETREF(streams[dev].stream, st);
	Py_DECREF(idx);
	return st;
fail:
	Py_XDECREF(raw);
	Py_XDECREF(idx);
	PyErr_Clear();
	return NULL;
}

/* Records ev on dev's current stream.  0 or -EIO. */
static int event_record(PyObject *ev, int dev)
{
	PyObject *st = stream_of(dev), *r, *a[2];

	if (!st)
		return -EIO;
	a[0] = ev;
	a[1] = st;
	r = PyObject_Vectorcall(ev_record, a, 2, NULL);
	if (!r) {
		PyErr_Clear();
		return -EIO;
	}
	Py_DECREF(r);
	return 0;
}

/* 1 when ev's work is done, 0 not yet, -1 error. */
static int event_done(PyObject *ev)
{
	PyObject *r = PyObject_CallOneArg(ev_query, ev);
	int done = r == Py_True ? 1 : r ? 0 : -1;

	Py_XDECREF(r);
	PyErr_Clear();
	return done;
}

/* The CUDA device of tensor t, -1 for a tensor elsewhere, -2 when t is
 * not a tensor. */
static int tensor_device(PyObject *t)
{
	PyObject *v;
	long d;

	if (!t || !tensor_type || !PyObject_TypeCheck(t, tensor_type))
		return -2;
	v = PyObject_GetAttr(t, s_is_cuda);
	if (v != Py_True) {
		Py_XDECREF(v);
		PyErr_Clear();
		return -1;
	}
	Py_DECREF(v);
	v = PyObject_CallMethodNoArgs(t, s_get_device);
	d = v && PyLong_Check(v) ? PyLong_AsLong(v) : -1;
	Py_XDECREF(v);
	PyErr_Clear();
	return d >= 0 ? (int)d : -1;
}

/* The first tensor of module's own dict `which` (_parameters, _buffers):
 * its device as tensor_device. */
static int own_tensor_device(PyObject *module, PyObject *which)
{
	PyObject *d = PyObject_GetAttr(module, which), *k, *v;
	Py_ssize_t pos = 0;
	int dev = -2;

	if (d && PyDict_Check(d))
		while (dev == -2 && PyDict_Next(d, &pos, &k, &v))
			dev = tensor_device(v);
	Py_XDECREF(d);
	PyErr_Clear();
	return dev;
}

/* Where module's call with inputs in runs: the device of its first
 * tensor input (of the first four), else of its first own parameter,
 * else buffer; -1 when that is not CUDA or there is none. */
static int call_device(PyObject *module, PyObject *const *in, Py_ssize_t n)
{
	int dev;

	for (Py_ssize_t i = 0; i < n && i < 4; i++)
		if ((dev = tensor_device(in[i])) != -2)
			return dev;
	dev = own_tensor_device(module, s_parameters);
	if (dev == -2)
		dev = own_tensor_device(module, s_buffers);
	return dev < 0 ? -1 : dev;
}

void torch_hooks_gpu_begin(PyObject *module, PyObject *const *in,
			   Py_ssize_t n, struct torch_gpu_mark *m)
{
	PyObject *ev;

	m->start = NULL;
	m->dev = -1;
	cuda_recheck();
	if (!cuda || !event_cls)
		return;
	m->dev = call_device(module, in, n);
	if (m->dev < 0 || m->dev >= TORCH_GPU_DEVICES || capturing())
		return;
	ev = event_take(m->dev);
	if (!ev)
		return;
	if (event_record(ev, m->dev)) {
		nevents--;
		Py_DECREF(ev); /* maybe made on no device: not for the pool */
		return;
	}
	m->start = ev;
}

void torch_hooks_gpu_forget(struct torch_gpu_mark *m)
{
	PyObject *ev = m->start;

	m->start = NULL;
	event_give(ev, m->dev);
}

void torch_hooks_emit_call(int stage, int64_t seq, int32_t name,
			   double start, double end, struct torch_gpu_mark *m)
{
	struct torch_trace_rec r;
	struct pending *p;
	PyObject *ev = NULL;

	record_of(&r, stage, seq, name, start, end, m->dev);
	if (!m->start)
		goto cpu;
	if (pend_head - pend_tail >= TORCH_GPU_PENDING || capturing() ||
	    !(ev = event_take(m->dev)))
		goto lost;
	if (event_record(ev, m->dev)) {
		nevents--;
		Py_DECREF(ev);
		goto lost;
	}
	/* Again: recording let other threads run, which may have filled
	 * it. */
	if (pend_head - pend_tail >= TORCH_GPU_PENDING) {
		event_give(ev, m->dev);
		goto lost;
	}
	p = &pend[pend_head & (TORCH_GPU_PENDING - 1)];
	p->r = r;
	p->start = m->start;
	p->end = ev;
	p->dev = m->dev;
	m->start = NULL;
	pend_head++;
	return;
lost:
	atomic_fetch_add(&gpu_lost, 1);
	torch_hooks_gpu_forget(m);
cpu:
	torch_ring_push(&trace_ring, &r);
}

/* The oldest pending row goes into the ring, with the GPU's time when
 * ms >= 0. */
static void pending_out(double ms)
{
	struct pending *p = &pend[pend_tail & (TORCH_GPU_PENDING - 1)];

	if (ms >= 0) {
		p->r.duration = ms / 1e3;
		p->r.clock = TORCH_CLOCK_CUDA;
	} else {
		atomic_fetch_add(&gpu_lost, 1);
	}
	torch_ring_push(&trace_ring, &p->r);
	event_give(p->start, p->dev);
	event_give(p->end, p->dev);
	p->start = p->end = NULL;
	pend_tail++;
}

void torch_hooks_gpu_poll(int max)
{
	PyObject *exc_type, *exc_value, *exc_tb, *r, *a[2];
	double ms;
	int n = 0, done;

	if (pend_head == pend_tail || !event_cls || polling)
		return;
	polling = 1;
	PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
	if (capturing())
		goto out;
	while (pend_head != pend_tail && n++ < max) {
		struct pending *p = &pend[pend_tail & (TORCH_GPU_PENDING - 1)];

		/* Both, in case the call changed streams in between. */
		done = event_done(p->end);
		if (done == 1)
			done = event_done(p->start);
		if (done == 0)
			break;
		ms = -1;
		if (done == 1) {
			a[0] = p->start;
			a[1] = p->end;
			r = PyObject_Vectorcall(ev_elapsed, a, 2, NULL);
			if (r && PyFloat_Check(r))
				ms = PyFloat_AsDouble(r);
			Py_XDECREF(r);
			PyErr_Clear();
		}
		pending_out(ms);
	}
out:
	PyErr_Restore(exc_type, exc_value, exc_tb);
	polling = 0;
}

int torch_hooks_compile_time(PyObject *o)
{
	if (!tensor_type || Py_TYPE(o) == tensor_type ||
	    !PyObject_TypeCheck(o, tensor_type))
		return 0;
	/* Looked up when first needed in a step: the program's import of
	 * torch._dynamo brings them, the agent never imports them. */
	if (!fake_looked) {
		fake_looked = 1;
		if (!fake_types[0])
			fake_types[0] = pymods_attr("torch._subclasses.fake_tensor",
						    "FakeTensor");
		if (!fake_types[1])
			fake_types[1] = pymods_attr(
				"torch._subclasses.functional_tensor",
				"FunctionalTensor");
	}
	for (int i = 0; i < 2; i++)
		if (fake_types[i] && PyType_Check(fake_types[i]) &&
		    PyObject_TypeCheck(o, (PyTypeObject *)fake_types[i]))
			return 1;
	return 0;
}

/* Borrows torch's CUDA event machinery (none: no GPU timing). */
static void gpu_install(void)
{
	PyObject *base = pymods_attr("torch", "_C._CudaEventBase");

	if (!pend)
		pend = calloc(TORCH_GPU_PENDING, sizeof(*pend));
	event_cls = pymods_attr("torch", "cuda.Event");
	ev_record = base ? PyObject_GetAttrString(base, "record") : NULL;
	ev_query = base ? PyObject_GetAttrString(base, "query") : NULL;
	ev_elapsed = base ? PyObject_GetAttrString(base, "elapsed_time") : NULL;
	stream_raw = pymods_attr("torch", "_C._cuda_getCurrentStream");
	stream_fn = pymods_attr("torch", "cuda.current_stream");
	capturing_fn = pymods_attr("torch", "_C._cuda_isCurrentStreamCapturing");
	event_kwargs = Py_BuildValue("{s:O}", "enable_timing", Py_True);
	empty_args = PyTuple_New(0);
	Py_XDECREF(base);
	PyErr_Clear();
	if (!pend || !event_cls || !ev_record || !ev_query || !ev_elapsed ||
	    !stream_raw || !stream_fn || !capturing_fn || !event_kwargs ||
	    !empty_args || !PyType_Check(event_cls))
		Py_CLEAR(event_cls); /* the rest goes in gpu_remove */
}

/*
 * Writes the rows still pending with the CPU's time and lets go of
 * torch's objects.  Removal runs on an agent thread, not the program's:
 * it asks the GPU nothing (a CUDA call there while the program captures a
 * CUDA graph in global mode would break the capture) and frees no event
 * (the same): the events stay in the pools, for the next installation.
 */
static void gpu_remove(void)
{
	while (pend_head != pend_tail)
		pending_out(-1);
	Py_CLEAR(event_cls);
	for (int d = 0; d < TORCH_GPU_DEVICES; d++) {
		Py_CLEAR(streams[d].raw);
		Py_CLEAR(streams[d].stream);
	}
	Py_CLEAR(ev_record);
	Py_CLEAR(ev_query);
	Py_CLEAR(ev_elapsed);
	Py_CLEAR(stream_raw);
	Py_CLEAR(stream_fn);
	Py_CLEAR(capturing_fn);
	Py_CLEAR(event_kwargs);
	Py_CLEAR(empty_args);
	Py_CLEAR(fake_types[0]);
	Py_CLEAR(fake_types[1]);
}

/* ---- install and remove ------------------------------------------------ */

static int make_statics(void)
{
	static int made;

	if (made)
		return 0;
	if (torch_forward_init() || torch_backward_init() || torch_step_init())
		return -ENOMEM;
	s_is_cuda = PyUnicode_InternFromString("is_cuda");
	s_get_device = PyUnicode_InternFromString("get_device");
	s_parameters = PyUnicode_InternFromString("_parameters");
	s_buffers = PyUnicode_InternFromString("_buffers");
	if (!s_is_cuda || !s_get_device || !s_parameters || !s_buffers)
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
	gpu_remove();
	Py_CLEAR(tensor_type);
	Py_CLEAR(engine);
	Py_CLEAR(cuda_is_init);
	Py_CLEAR(cuda_stats);
	Py_CLEAR(cuda_device);
	Py_CLEAR(cuda_mod);
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
	cuda_mod = pymods_attr("torch", "cuda");
	if (!s_initialized)
		s_initialized = PyUnicode_InternFromString("_initialized");
	cuda_stats = pymods_attr("torch", "_C._cuda_memoryStats");
	cuda_device = pymods_attr("torch", "_C._cuda_getDevice");
	gpu_install();
	rc = torch_step_install(err, errlen);
	if (rc) {
		drop_refs();
		return rc;
	}
	torch_backward_install();
	env_rank = env_get("RANK");
	rank = env_rank ? strtoll(env_rank, NULL, 10) : 0;
	cuda = 0;
	cuda_asked = 0;
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
	out->gpu_lost = atomic_load(&gpu_lost);
}
