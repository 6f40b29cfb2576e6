/*
 * req_backtrace: probing/backtrace — every thread's stack now, without
 * pausing anything; with locals, and native frames, on request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "forensics/crash_sym.h"
#include "forensics/hang_native.h"
#include "memtrim.h"
#include "profiler/native_sym.h"
#include "python/pygil.h"
#include "python/snapshot.h"
#include "server/handler.h"

/* Threads walked with locals from which the memory the walk freed is
 * given back (memtrim.h: only after walks large enough to leave
 * megabytes behind, and seldom). */
#define BACKTRACE_TRIM_THREADS 64

struct backtrace_args {
	uint64_t *threads;
	size_t nthreads;
	int locals;
	int native; /* NATIVE_NONE, NATIVE_ALL, NATIVE_MAIN */
};

enum { NATIVE_NONE = 0, NATIVE_ALL, NATIVE_MAIN };

/* The edge: JSON arguments into typed ones. */
static int parse_args(struct request *req, struct backtrace_args *a)
{
	const cJSON *arr = NULL, *it;
	const cJSON *native = cJSON_GetObjectItemCaseSensitive(req->args,
							       "native");
	char err[128];
	size_t n = 0;

	a->locals = 0;
	a->native = NATIVE_NONE;
	a->threads = NULL;
	a->nthreads = 0;
	/* native: true (every thread) or "main" (the main thread only: one
	 * signal, not one to each of the program's threads). */
	if (cJSON_IsString(native) && !strcmp(native->valuestring, "main"))
		a->native = NATIVE_MAIN;
	else if (dap_arg_bool(req->args, "native", &a->native, err,
			      sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED,
			     "argument 'native' must be true, false or "
			     "\"main\"");
		return -EINVAL;
	}
	if (dap_arg_bool(req->args, "locals", &a->locals, err, sizeof(err)) <
		    0 ||
	    dap_arg_array(req->args, "threads", &arr, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return -EINVAL;
	}
	if (!arr)
		return 0;
	n = (size_t)cJSON_GetArraySize(arr);
	if (n > PYSTACK_THREADS_MAX) {
		request_fail(req, DAP_ERROR_FAILED, "too many threads asked for (max %d)",
			     PYSTACK_THREADS_MAX);
		return -EINVAL;
	}
	a->threads = calloc(n ? n : 1, sizeof(uint64_t));
	if (!a->threads) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return -ENOMEM;
	}
	cJSON_ArrayForEach(it, arr)
	{
		if (!cJSON_IsNumber(it) || it->valuedouble < 0) {
			request_fail(req, DAP_ERROR_FAILED, "argument 'threads' must be an "
				     "array of thread ids");
			free(a->threads);
			return -EINVAL;
		}
		a->threads[a->nthreads++] = (uint64_t)it->valuedouble;
	}
	return 0;
}

static cJSON *frame_json(const struct pystack_frame *fr)
{
	cJSON *f = cJSON_CreateObject(), *locals, *v;

	if (!f)
		return NULL;
	cJSON_AddStringToObject(f, "func", fr->func ? fr->func : "?");
	cJSON_AddStringToObject(f, "file", fr->file ? fr->file : "?");
	cJSON_AddNumberToObject(f, "line", fr->lineno);
	if (!fr->locals)
		return f;
	locals = cJSON_AddArrayToObject(f, "locals");
	for (size_t i = 0; locals && i < fr->nlocals; i++) {
		v = cJSON_CreateObject();
		if (!v)
			break;
		cJSON_AddStringToObject(v, "name", fr->locals[i].name);
		cJSON_AddStringToObject(v, "type", fr->locals[i].type
				       ? fr->locals[i].type : "");
		cJSON_AddStringToObject(v, "value", fr->locals[i].value
				       ? fr->locals[i].value : "");
		cJSON_AddItemToArray(locals, v);
	}
	return f;
}

static cJSON *thread_json(const struct pystack_thread *th)
{
	cJSON *t = cJSON_CreateObject(), *frames, *f;

	if (!t)
		return NULL;
	cJSON_AddNumberToObject(t, "threadId", (double)th->thread_id);
	cJSON_AddNumberToObject(t, "nativeId", (double)th->native_id);
	cJSON_AddStringToObject(t, "name", th->name ? th->name : "");
	if (th->daemon >= 0)
		cJSON_AddBoolToObject(t, "daemon", th->daemon);
	else
		cJSON_AddNullToObject(t, "daemon");
	cJSON_AddBoolToObject(t, "isMain", th->is_main);
	cJSON_AddBoolToObject(t, "holdsGil", th->holds_gil);
	cJSON_AddStringToObject(t, "state", th->state);
	cJSON_AddBoolToObject(t, "truncated", th->truncated);
	frames = cJSON_AddArrayToObject(t, "frames");
	for (size_t d = 0; frames && d < th->nframes; d++) {
		f = frame_json(&th->frames[d]);
		if (!f)
			break;
		cJSON_AddItemToArray(frames, f);
	}
	return t;
}

/* The thread's native stack now (hang_native.h: a signal to it), as
 * nativeFrames [{func, object, offset}], or nativeError. */
static void add_native(cJSON *t, long tid, struct crash_sym_cache *c)
{
	uintptr_t ips[HANG_NATIVE_DEPTH_MAX];
	struct crash_sym s;
	char name[4096]; /* demangled: longer than the raw name */
	cJSON *arr, *f;
	size_t n = 0;
	int rc = hang_native_capture(tid, ips, HANG_NATIVE_DEPTH_MAX, &n);

	if (rc) {
		cJSON_AddStringToObject(t, "nativeError",
					rc == -ETIMEDOUT
						? "the thread did not answer "
						  "(it blocks signals)"
						: strerror(-rc));
		return;
	}
	arr = cJSON_AddArrayToObject(t, "nativeFrames");
	for (size_t i = 0; arr && i < n; i++) {
		const char *obj;

		crash_sym_lookup(c, ips[i], 1, &s);
		native_sym_demangle(s.func, name, sizeof(name));
		obj = strrchr(s.object, '/');
		f = cJSON_CreateObject();
		if (!f)
			break;
		cJSON_AddStringToObject(f, "func", name);
		cJSON_AddStringToObject(f, "object", obj ? obj + 1 : s.object);
		cJSON_AddNumberToObject(f, "offset", (double)s.obj_off);
		cJSON_AddItemToArray(arr, f);
	}
}

static void run_backtrace(struct request *req)
{
	struct backtrace_args a;
	struct pystack_opts o = {0};
	struct snapshot_gil gil;
	struct crash_sym_cache *sym = NULL;
	struct pystack st;
	cJSON *body, *threads, *g, *t;
	char err[256];
	size_t walked;
	int rc;

	if (parse_args(req, &a))
		return;
	o.locals = a.locals;
	o.threads = a.threads;
	o.nthreads = a.nthreads;
	o.max_depth = (size_t)config_int("python.max_depth");
	o.repr_max = (size_t)config_int("python.repr_max");
	rc = snapshot_stacks(&st, &o, 0, &req->cancel, &gil, err, sizeof(err));
	free(a.threads);
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "cannot read the stacks: %s", err);
		return;
	}
	body = request_ok(req);
	threads = body ? cJSON_AddArrayToObject(body, "threads") : NULL;
	if (a.native && !(sym = malloc(sizeof(*sym))))
		a.native = 0;
	if (a.native)
		crash_sym_begin(sym);
	for (size_t i = 0; threads && i < st.nthreads; i++) {
		t = thread_json(&st.threads[i]);
		if (!t)
			break;
		if ((a.native == NATIVE_ALL ||
		     (a.native == NATIVE_MAIN && st.threads[i].is_main)) &&
		    !pygil_is_own_thread(st.threads[i].native_id))
			add_native(t, st.threads[i].native_id, sym);
		cJSON_AddItemToArray(threads, t);
	}
	if (a.native)
		crash_sym_end(sym);
	free(sym);
	if (body && gil.locals_note[0])
		cJSON_AddStringToObject(body, "localsError", gil.locals_note);
	g = body ? cJSON_AddObjectToObject(body, "gil") : NULL;
	if (g) {
		cJSON_AddBoolToObject(g, "acquired", gil.acquired);
		/* Only a thread of the program is named as the holder; when
		 * the agent's own call holds the GIL, the reply says which. */
		cJSON_AddBoolToObject(g, "holderIsAgent",
				      gil.holder_agent[0] != 0);
		if (gil.holder_agent[0])
			cJSON_AddStringToObject(g, "holderCall",
						gil.holder_agent);
		if (gil.holder) {
			cJSON_AddNumberToObject(g, "holder", (double)gil.holder);
			cJSON_AddNumberToObject(g, "holderNativeId",
						(double)gil.holder_native);
		} else {
			cJSON_AddNullToObject(g, "holder");
			cJSON_AddNullToObject(g, "holderNativeId");
		}
		if (!gil.acquired && gil.holder_agent[0]) {
			char m[320];

			snprintf(m, sizeof(m),
				 "the GIL is held by the agent's own call (%s), "
				 "not by a thread of the program: stacks were "
				 "read without it (no locals, kernel thread "
				 "names)",
				 gil.holder_agent);
			cJSON_AddStringToObject(g, "message", m);
		} else if (!gil.acquired) {
			cJSON_AddStringToObject(g, "message",
				"the GIL did not come in time: stacks were "
				"read without it (no locals, kernel thread "
				"names)");
		}
	}
	/* A large walk with locals (reprs, frame dicts and their text, on
	 * the GIL threads and here) leaves its freed memory in our threads'
	 * malloc arenas: 2,000 threads' locals kept the program at 300 MB
	 * for good.  Given back to the system once such a walk is done. */
	walked = st.nthreads;
	pystack_release(&st);
	if (a.locals && walked >= BACKTRACE_TRIM_THREADS)
		memtrim_ask();
}

const struct handler handler_backtrace = {
	.command = "probing/backtrace",
	.flags = HANDLER_GIL,
	.run = run_backtrace,
};
