/*
 * req_memory: probing/memory — the process's memory now: /proc figures,
 * Python objects by type, tensors by device and dtype, torch's CUDA
 * allocator, and each GPU as NVML last saw it (gpu.h).  See
 * docs/protocol.md.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/config.h"
#include "gpu/gpu.h"
#include "memory/memory_objects.h"
#include "memory/memory_proc.h"
#include "python/gilcall.h"
#include "python/pygil.h"
#include "server/handler.h"

#define TOP_DEFAULT 20

/* Shared by the worker and the GIL thread: a walk that overruns pygil's
 * hard limit goes on after the request gave up on it, so the last of the
 * two to let go frees it. */
struct job {
	_Atomic int refs;
	size_t top;
	int budget_ms;
	int rc;
	struct memory_report rep;
	char err[256];
};

static void job_put(struct job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) == 1) {
		memory_report_release(&j->rep);
		free(j);
	}
}

static void report_fn(void *arg)
{
	struct job *j = arg;

	j->rc = memory_objects_report(j->top, j->budget_ms, &j->rep, j->err,
				      sizeof(j->err));
	job_put(j);
}

static void add_types(cJSON *to, const char *key,
		      const struct memory_type_stat *s, size_t n)
{
	cJSON *arr = cJSON_AddArrayToObject(to, key), *o;

	for (size_t i = 0; arr && i < n; i++) {
		o = cJSON_CreateObject();
		if (!o)
			return;
		cJSON_AddStringToObject(o, "type", s[i].name);
		cJSON_AddNumberToObject(o, "count", (double)s[i].count);
		cJSON_AddNumberToObject(o, "bytes", (double)s[i].bytes);
		cJSON_AddItemToArray(arr, o);
	}
}

static void add_process(cJSON *body)
{
	struct memory_proc m;
	cJSON *p;

	if (memory_proc_read(&m)) {
		cJSON_AddNullToObject(body, "process");
		return;
	}
	p = cJSON_AddObjectToObject(body, "process");
	if (!p)
		return;
	cJSON_AddNumberToObject(p, "rss", m.rss);
	cJSON_AddNumberToObject(p, "vms", m.vms);
	cJSON_AddNumberToObject(p, "shared", m.shared);
	cJSON_AddNumberToObject(p, "peak", m.peak);
	cJSON_AddNumberToObject(p, "swap", m.swap);
	cJSON_AddNumberToObject(p, "threads", (double)m.threads);
}

/* key: v, or null when the device has no such figure; 0, or -1 when
 * memory ran out. */
static int add_num(cJSON *o, const char *key, int has, double v)
{
	return (has ? cJSON_AddNumberToObject(o, key, v)
		    : cJSON_AddNullToObject(o, key))
		       ? 0
		       : -1;
}

/* The recorder thread's last NVML sample: read here without calling NVML
 * (it is used on that thread only). */
static void add_gpu(cJSON *body)
{
	struct gpu_last *g = malloc(sizeof(*g));
	cJSON *o = cJSON_AddObjectToObject(body, "gpu"), *arr, *d;

	if (!o) {
		free(g);
		return;
	}
	if (!g) {
		cJSON_AddStringToObject(o, "message", "GPU: out of memory");
		return;
	}
	gpu_last(g);
	if (g->n)
		cJSON_AddNumberToObject(o, "ts", g->ts);
	else
		cJSON_AddStringToObject(o, "message", g->why);
	arr = cJSON_AddArrayToObject(o, "devices");
	for (int i = 0; arr && i < g->n; i++) {
		const struct nvml_sample *s = &g->dev[i];
		int bad;

		/* Every figure or none: a device without some of them
		 * would read as one that lacks them. */
		d = cJSON_CreateObject();
		bad = !d || add_num(d, "index", 1, s->index) ||
		      !cJSON_AddStringToObject(d, "name", s->name) ||
		      !cJSON_AddStringToObject(d, "uuid", s->uuid) ||
		      add_num(d, "gpuUtil", s->has_util, s->util_gpu) ||
		      add_num(d, "memUtil", s->has_util, s->util_mem) ||
		      add_num(d, "memoryUsed", s->has_mem, s->mem_used) ||
		      add_num(d, "memoryTotal", s->has_mem, s->mem_total) ||
		      add_num(d, "power", s->has_power, s->power) ||
		      add_num(d, "temperature", s->has_temp, s->temp) ||
		      add_num(d, "smClock", s->has_sm_clock, s->sm_clock) ||
		      add_num(d, "memClock", s->has_mem_clock, s->mem_clock) ||
		      !(s->has_throttle
				? cJSON_AddStringToObject(d, "throttle",
							  s->throttle)
				: cJSON_AddNullToObject(d, "throttle")) ||
		      add_num(d, "xidCount", s->has_xid,
			      (double)s->xid_count) ||
		      add_num(d, "lastXid", s->has_xid && s->xid_count,
			      (double)s->last_xid) ||
		      add_num(d, "processMemory", s->has_proc, s->proc_mem) ||
		      !cJSON_AddItemToArray(arr, d);
		if (bad) {
			cJSON_Delete(d);
			cJSON_DeleteItemFromObject(o, "devices");
			if (!cJSON_GetObjectItemCaseSensitive(o, "message"))
				cJSON_AddStringToObject(
					o, "message",
					"GPU: out of memory in the target");
			break;
		}
	}
	free(g);
}

static void add_python(cJSON *body, const struct job *j)
{
	const struct memory_report *r = &j->rep;
	cJSON *py = cJSON_AddObjectToObject(body, "python"), *arr, *o, *t;

	if (!py)
		return;
	cJSON_AddBoolToObject(py, "complete", r->complete);
	cJSON_AddNumberToObject(py, "objects", (double)r->objects);
	cJSON_AddNumberToObject(py, "untracked", (double)r->untracked);
	cJSON_AddNumberToObject(py, "bytes", (double)r->bytes);
	cJSON_AddNumberToObject(py, "blocks", (double)r->py_blocks);
	cJSON_AddNumberToObject(py, "elapsedMs", r->elapsed_ms);
	add_types(py, "byCount", r->by_count, r->ntop);
	add_types(py, "bySize", r->by_size, r->ntop);
	if (!r->torch) {
		cJSON_AddNullToObject(body, "torch");
		return;
	}
	t = cJSON_AddObjectToObject(body, "torch");
	arr = t ? cJSON_AddArrayToObject(t, "tensors") : NULL;
	for (size_t i = 0; arr && i < r->ntensors; i++) {
		o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddStringToObject(o, "device", r->tensors[i].device);
		cJSON_AddStringToObject(o, "dtype", r->tensors[i].dtype);
		cJSON_AddNumberToObject(o, "count",
					(double)r->tensors[i].count);
		cJSON_AddNumberToObject(o, "bytes",
					(double)r->tensors[i].bytes);
		cJSON_AddItemToArray(arr, o);
	}
	arr = t ? cJSON_AddArrayToObject(t, "cuda") : NULL;
	for (size_t i = 0; arr && i < r->ncuda; i++) {
		const struct memory_cuda *c = &r->cuda[i];
		o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddNumberToObject(o, "device", c->device);
		cJSON_AddNumberToObject(o, "allocated", c->allocated);
		cJSON_AddNumberToObject(o, "maxAllocated", c->max_allocated);
		cJSON_AddNumberToObject(o, "reserved", c->reserved);
		cJSON_AddNumberToObject(o, "maxReserved", c->max_reserved);
		cJSON_AddItemToArray(arr, o);
	}
}

static void run_memory(struct request *req)
{
	int64_t top = TOP_DEFAULT, budget = config_int("memory.budget_ms");
	struct pygil_limits lim = {0};
	struct job *j;
	char err[256];
	cJSON *body;
	int rc, interrupted = 0;

	if (dap_arg_int(req->args, "top", &top, err, sizeof(err)) < 0 ||
	    dap_arg_int(req->args, "budgetMs", &budget, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (top < 1 || top > MEMORY_TOP_MAX || budget < 10 || budget > 60000) {
		request_fail(req, DAP_ERROR_FAILED,
			     "top must be in [1, %d] and budgetMs in "
			     "[10, 60000]",
			     MEMORY_TOP_MAX);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	atomic_init(&j->refs, 2);
	j->top = (size_t)top;
	j->budget_ms = (int)budget;
	lim.start_ms = (int)config_int("python.gil_timeout_ms");
	/* The walk stops itself at the budget; the run deadline is the
	 * backstop for a __sizeof__ that does not return. */
	lim.run_ms = (int)budget + 2000;
	lim.cancel = &req->cancel;
	/* __sizeof__ is the program's code: a place of its own (pygil.h). */
	lim.kind = PYGIL_WALK;
	lim.what = "memory: a walk over the program's objects";
	rc = pygil_run(report_fn, j, &lim, &interrupted);
	if (rc != 0 && rc != -EINPROGRESS)
		atomic_fetch_sub(&j->refs, 1); /* report_fn never runs */
	body = request_ok(req);
	if (!body) {
		job_put(j);
		return;
	}
	add_process(body);
	add_gpu(body);
	cJSON_AddBoolToObject(body, "gil", rc == 0);
	if (rc == 0 && j->rc == 0) {
		add_python(body, j);
		if (interrupted)
			cJSON_AddBoolToObject(body, "interrupted", 1);
	} else {
		char why[512];

		char gil[400];

		if (rc == -EINPROGRESS)
			snprintf(gil, sizeof(gil), "the walk did not end in time");
		else if (rc)
			gilcall_explain(rc, lim.start_ms, gil, sizeof(gil));
		if (rc)
			snprintf(why, sizeof(why), "%s: Python figures are "
				 "missing", gil);
		cJSON_AddNullToObject(body, "python");
		cJSON_AddNullToObject(body, "torch");
		cJSON_AddStringToObject(body, "message", rc ? why : j->err);
	}
	job_put(j);
}

const struct handler handler_memory = {
	.command = "probing/memory",
	.flags = HANDLER_GIL,
	.run = run_memory,
};
