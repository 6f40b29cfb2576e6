/*
 * memory: the recorder thread and process.memory.  See memory.h.
 */
#include "memory.h"
#include "memtrim.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/app.h"
#include "comm/comm.h"
#include "core/config.h"
#include "core/config_lease.h"
#include "core/log.h"
#include "core/thread.h"
#include "gpu/gpu.h"
#include "livetab.h"
#include "memory_objects.h"
#include "memory_proc.h"
#include "python/pygil.h"
#include "recorder.h"
#include "store.h"
#include "torch/torch.h"

#define GIL_WAIT_MS 100

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static pthread_t thread;
static int running, stop, woken;
static int listening; /* the config listeners stay across fork */
static int listening_gpu;
static struct recorder *rec;

void memory_wake(void)
{
	pthread_mutex_lock(&lock);
	woken = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

static void on_change(const char *name)
{
	(void)name;
	memory_wake();
}

/* ---- one row ---------------------------------------------------------- */

struct py_figures {
	long long blocks;
	int cuda;
	double cuda_allocated, cuda_reserved;
};

static double call_mb(PyObject *cuda, const char *fn)
{
	PyObject *r = PyObject_CallMethod(cuda, fn, NULL);
	double v = r && PyLong_Check(r) ? PyLong_AsDouble(r) / 1048576.0 : 0;

	Py_XDECREF(r);
	PyErr_Clear();
	return v;
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

static void py_fn(void *arg)
{
	struct py_figures *f = arg;
	PyObject *cuda, *init;

	f->blocks = (long long)probing_allocated_blocks();
	cuda = get_module("torch.cuda");
	init = cuda ? PyObject_CallMethod(cuda, "is_initialized", NULL) : NULL;
	if (init == Py_True) {
		f->cuda = 1;
		f->cuda_allocated = call_mb(cuda, "memory_allocated");
		f->cuda_reserved = call_mb(cuda, "memory_reserved");
	}
	Py_XDECREF(init);
	Py_XDECREF(cuda);
	PyErr_Clear();
}

static void sample(void)
{
	struct pygil_limits lim = {.start_ms = GIL_WAIT_MS, .run_ms = 1000};
	struct py_figures py = {0};
	struct memory_proc m;
	struct store_stmt *s = recorder_stmt(rec);
	struct timespec ts;
	char err[256];
	int gil;

	if (memory_proc_read(&m))
		return;
	gil = pygil_run(py_fn, &py, &lim, NULL) == 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	recorder_limits(rec, (size_t)config_int("memory.max_rows"), 0);
	if (recorder_begin(rec, err, sizeof(err)))
		return;
	store_stmt_real(s, 1, (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9);
	store_stmt_real(s, 2, m.rss);
	store_stmt_real(s, 3, m.vms);
	store_stmt_real(s, 4, m.shared);
	store_stmt_real(s, 5, m.peak);
	store_stmt_real(s, 6, m.swap);
	store_stmt_int(s, 7, m.threads);
	if (gil)
		store_stmt_int(s, 8, py.blocks);
	if (gil && py.cuda) {
		store_stmt_real(s, 9, py.cuda_allocated);
		store_stmt_real(s, 10, py.cuda_reserved);
	}
	if (recorder_add(rec, 80, err, sizeof(err)))
		recorder_rollback(rec);
	else if (recorder_commit(rec, err, sizeof(err)))
		log_warn("process.memory: %s", err);
}

/* ---- python.tensors ---------------------------------------------------- */

struct tensors_job {
	_Atomic int refs; /* the querying thread and the GIL thread */
	int budget_ms, rc, complete;
	struct memory_tensor *rows;
	size_t n;
	char err[256];
};

static void tensors_put(struct tensors_job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) == 1) {
		free(j->rows);
		free(j);
	}
}

static void tensors_fn(void *arg)
{
	struct tensors_job *j = arg;

	j->rc = memory_objects_tensors(j->budget_ms, &j->rows, &j->n,
				       &j->complete, j->err, sizeof(j->err));
	tensors_put(j);
}

static int tensors_rows(struct livetab_rows *rows, const struct tensors_job *j)
{
	int rc = 0;

	for (size_t i = 0; i < j->n && !rc; i++) {
		const struct memory_tensor *t = &j->rows[i];
		if ((rc = livetab_rows_begin(rows)) ||
		    (rc = livetab_rows_int(rows, (int64_t)t->id)) ||
		    (rc = livetab_rows_text(rows, t->shape)) ||
		    (rc = livetab_rows_text(rows, t->dtype)) ||
		    (rc = livetab_rows_text(rows, t->device)) ||
		    (rc = livetab_rows_int(rows, (int64_t)t->bytes)) ||
		    (rc = livetab_rows_int(rows, t->requires_grad)) ||
		    (rc = livetab_rows_text(rows, t->grad_fn[0] ? t->grad_fn
								: NULL)) ||
		    (rc = livetab_rows_text(rows,
					    t->holder[0] ? t->holder : NULL)))
			break;
	}
	return rc;
}

static int tensors_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			    size_t errlen)
{
	struct pygil_limits lim = {0};
	struct tensors_job *j = calloc(1, sizeof(*j));
	int rc;

	(void)ctx;
	if (!j) {
		snprintf(err, errlen, "python.tensors: out of memory");
		return -ENOMEM;
	}
	atomic_init(&j->refs, 2);
	j->budget_ms = (int)config_int("memory.budget_ms");
	lim.start_ms = (int)config_int("python.gil_timeout_ms");
	lim.run_ms = j->budget_ms + 2000;
	rc = pygil_run(tensors_fn, j, &lim, NULL);
	if (rc) {
		if (rc != -EINPROGRESS)
			atomic_fetch_sub(&j->refs, 1); /* never ran */
		snprintf(err, errlen, "python.tensors: %s",
			 rc == -ETIMEDOUT ? "the GIL did not come in time"
					  : "the walk did not end in time");
		tensors_put(j);
		return rc;
	}
	rc = j->rc;
	if (rc)
		snprintf(err, errlen, "python.tensors: %s", j->err);
	else if ((rc = tensors_rows(rows, j)))
		snprintf(err, errlen, "python.tensors: too many rows");
	tensors_put(j);
	return rc;
}

static const struct livetab tensors_tab = {
	.schema = "python",
	.name = "tensors",
	.doc = "live torch tensors, taken when queried: shape, dtype, device, "
	       "bytes, requires_grad, grad_fn, and who holds it where known",
	.columns = "id INTEGER, shape TEXT, dtype TEXT, device TEXT, "
		   "bytes INTEGER, requires_grad INTEGER, grad_fn TEXT, "
		   "holder TEXT",
	.snapshot = tensors_snapshot,
};

/* ---- the thread ------------------------------------------------------ */

static void *rec_main(void *arg)
{
	int64_t next_mem = 0, next_torch = 0, next_comm = 0, next_gpu = 0,
		next_app = 0, t, until;
	struct timespec dl;

	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stop) {
		int64_t interval = config_int("memory.interval_ms");

		t = agent_now_ms();
		if (woken)
			next_gpu = 0; /* gpu.* may have changed: a look now */
		woken = 0;
		if (interval > 0 && t >= next_mem) {
			pthread_mutex_unlock(&lock);
			sample();
			pthread_mutex_lock(&lock);
			next_mem = t + interval;
		} else if (interval > 0 && next_mem > t + interval) {
			next_mem = t + interval; /* the interval got shorter */
		}
		if ((next_torch >= 0 && t >= next_torch) || torch_pending()) {
			pthread_mutex_unlock(&lock);
			int d = torch_tick();
			pthread_mutex_lock(&lock);
			next_torch = d < 0 ? -1 : agent_now_ms() + d;
		}
		if ((next_comm >= 0 && t >= next_comm) || comm_pending()) {
			pthread_mutex_unlock(&lock);
			int d = comm_tick();
			pthread_mutex_lock(&lock);
			next_comm = d < 0 ? -1 : agent_now_ms() + d;
		}
		if ((next_app >= 0 && t >= next_app) || app_pending()) {
			pthread_mutex_unlock(&lock);
			int d = app_tick();
			pthread_mutex_lock(&lock);
			next_app = d < 0 ? -1 : agent_now_ms() + d;
		}
		/* NVML, without the GIL (gpu.h). */
		if (t >= next_gpu) {
			pthread_mutex_unlock(&lock);
			int d = gpu_tick();
			pthread_mutex_lock(&lock);
			next_gpu = agent_now_ms() + d;
		}
		/* A trim a request asked for within memtrim's interval. */
		long trim = memtrim_tick();
		/* Settings a client changed for a while and did not put
		 * back (config_lease.h). */
		pthread_mutex_unlock(&lock);
		int64_t lease = config_lease_tick();
		pthread_mutex_lock(&lock);

		until = t + 3600 * 1000;
		if (trim >= 0 && t + trim < until)
			until = t + trim;
		if (lease >= 0 && t + lease < until)
			until = t + lease;
		if (interval > 0 && next_mem < until)
			until = next_mem;
		if (next_torch >= 0 && next_torch < until)
			until = next_torch;
		if (next_comm >= 0 && next_comm < until)
			until = next_comm;
		if (next_app >= 0 && next_app < until)
			until = next_app;
		if (next_gpu < until)
			until = next_gpu;
		if (stop || woken)
			continue;
		int64_t wait = until - agent_now_ms();
		if (wait < 1)
			wait = 1;
		agent_deadline(&dl, CLOCK_REALTIME, wait);
		while (!stop && !woken &&
		       pthread_cond_timedwait(&cond, &lock, &dl) == 0)
			;
	}
	pthread_mutex_unlock(&lock);
	/* NVML was used on this thread only: shut down here too. */
	gpu_thread_end();
	return NULL;
}

int memory_start(struct store *st, char *err, size_t errlen)
{
	struct recorder_opts o = {
		.schema = "process",
		.name = "memory",
		.columns =
			"ts REAL, rss REAL, vms REAL, shared REAL, peak REAL, "
			"swap REAL, threads INTEGER, py_blocks INTEGER, "
			"cuda_allocated REAL, cuda_reserved REAL",
		.doc = "the process's memory every memory.interval_ms (MB; "
		       "ts in Unix seconds)",
		.max_rows = (size_t)config_int("memory.max_rows"),
	};
	pthread_condattr_t ca;
	int rc;

	if (running)
		return 0;
	if (!rec) {
		rc = recorder_new(st, &o, &rec, err, errlen);
		if (!rc)
			rc = store_add_livetab(st, &tensors_tab, NULL, err,
					       errlen);
		if (rc)
			return rc;
		/* The GPU's figures are extra: without them memory goes on. */
		if (gpu_init(st, err, errlen))
			log_warn("gpu.utilization: %s", err);
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_REALTIME);
	pthread_cond_init(&cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!listening && config_on_change("memory.", on_change) == 0)
		listening = 1;
	/* Without room for it a change of gpu.* still applies within
	 * GPU_RECHECK_MS. */
	if (!listening_gpu && config_on_change("gpu.", on_change) == 0)
		listening_gpu = 1;
	stop = 0;
	rc = agent_thread_start(&thread, "probing-rec", rec_main, NULL);
	if (rc) {
		snprintf(err, errlen, "recorder thread: %s", strerror(-rc));
		return rc;
	}
	running = 1;
	return 0;
}

void memory_stop(void)
{
	if (!running)
		return;
	pthread_mutex_lock(&lock);
	stop = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
	/* It may be waiting for the GIL (bounded): wait a while, then let it
	 * end on its own. */
	agent_thread_join(thread, 1000);
	running = 0;
}

void memory_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	running = 0;
	stop = 0;
	rec = NULL; /* the parent's store's; the child's agent makes its own */
	gpu_atfork_child();
}
