/*
 * req_backtrace: probing/backtrace — every thread's stack now, without
 * pausing anything; with locals, and native frames, on request.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/thread.h"
#include "forensics/crash_sym.h"
#include "cpython/cpython.h"
#include "forensics/mixed_stack.h"
#include "memtrim.h"
#include "profiler/native_sym.h"
#include "python/pygil.h"
#include "python/pytasks.h"
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
	int tasks;  /* asyncio's tasks too */
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
	a->tasks = 0;
	if (dap_arg_bool(req->args, "locals", &a->locals, err, sizeof(err)) <
		    0 ||
	    dap_arg_bool(req->args, "tasks", &a->tasks, err, sizeof(err)) <
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

/* What native frames need: symbols, and the Python reader's. */
/* The native pass's time, all threads together (a thread that blocks
 * the signal costs HANG_NATIVE_WAIT_MS). */
#define NATIVE_BUDGET_MS 5000

struct native_ctx {
	struct crash_sym_cache sym;
	struct cpython_scratch *scratch;
	struct mixed_threads list;
	struct mixed_stack m;
	volatile int *cancel; /* the request's */
	int64_t t0;	      /* when the pass began (mono_ms) */
};

static int req_cancelled(const struct native_ctx *c)
{
	return c->cancel && *c->cancel;
}

static cJSON *native_frame(struct native_ctx *c, uintptr_t ip)
{
	struct crash_sym s;
	char name[4096]; /* demangled: longer than the raw name */
	const char *obj;
	cJSON *f = cJSON_CreateObject();

	if (!f)
		return NULL;
	crash_sym_lookup(&c->sym, ip, 1, &s);
	native_sym_demangle(s.func, name, sizeof(name));
	obj = strrchr(s.object, '/');
	cJSON_AddStringToObject(f, "kind", "native");
	cJSON_AddStringToObject(f, "func", name);
	cJSON_AddStringToObject(f, "object", obj ? obj + 1 : s.object);
	cJSON_AddNumberToObject(f, "offset", (double)s.obj_off);
	return f;
}

static cJSON *python_frame(const struct cpython_raw *r)
{
	char func[CPYTHON_NAME_MAX], file[CPYTHON_FILE_MAX];
	unsigned char table[8192];
	size_t len = 0;
	int line;
	cJSON *f = cJSON_CreateObject();

	if (!f)
		return NULL;
	if (cpython.read.code_names(r, func, sizeof(func), file,
				    sizeof(file))) {
		snprintf(func, sizeof(func), "?");
		snprintf(file, sizeof(file), "?");
	}
	if (cpython.read.linetable_copy(r, table, sizeof(table), &len) == 0)
		line = cpython.read.line_decode(table, len, r->firstlineno,
						r->lasti);
	else
		line = cpython.read.line_remote(r);
	cJSON_AddStringToObject(f, "kind", "python");
	cJSON_AddStringToObject(f, "func", func);
	cJSON_AddStringToObject(f, "file", file);
	cJSON_AddNumberToObject(f, "line", line);
	return f;
}

/* The thread's native stack now (mixed_stack.h: a signal to it, then
 * its Python frames), as nativeFrames [{func, object, offset}] and
 * mixedFrames (the native frames with the Python ones where the
 * evaluation loop runs them, innermost first; mixedExact), or
 * nativeError. */
static void add_native(cJSON *t, long tid, struct native_ctx *c)
{
	struct mixed_stack *m = &c->m;
	cJSON *arr, *mixed, *f;
	int rc;

	/* Bounded: a thread that blocks the signal costs a wait; past the
	 * budget, or cancelled, the rest say so. */
	if (req_cancelled(c) || agent_now_ms() - c->t0 > NATIVE_BUDGET_MS) {
		cJSON_AddStringToObject(t, "nativeError",
					"not taken: the request's time for "
					"native frames (5 s) ran out");
		return;
	}
	if (!c->scratch) {
		/* The GIL-free reader is off: the native frames alone. */
		m->n = 0;
		rc = hang_native_capture(tid, m->ips, HANG_NATIVE_DEPTH_MAX,
					 &m->nips);
	} else {
		rc = mixed_stack_take(tid, c->scratch, &c->list, m);
	}

	if (rc) {
		cJSON_AddStringToObject(t, "nativeError",
					rc == -ETIMEDOUT
						? "the thread did not answer "
						  "(it blocks signals)"
						: strerror(-rc));
		return;
	}
	arr = cJSON_AddArrayToObject(t, "nativeFrames");
	for (size_t i = 0; arr && i < m->nips; i++) {
		if (!(f = native_frame(c, m->ips[i])))
			break;
		cJSON_DeleteItemFromObjectCaseSensitive(f, "kind");
		cJSON_AddItemToArray(arr, f);
	}
	if (!c->scratch) {
		cJSON_AddStringToObject(t, "mixedError",
					"the Python frames cannot be read "
					"without the GIL here (agent."
					"stack_reader): native frames alone");
		return;
	}
	mixed = cJSON_AddArrayToObject(t, "mixedFrames");
	for (size_t i = 0; mixed && i < m->n; i++) {
		const struct mixed_frame *o = &m->order[i];

		f = o->python ? python_frame(&m->raw[o->index])
			      : native_frame(c, m->ips[o->index]);
		if (!f)
			break;
		cJSON_AddItemToArray(mixed, f);
	}
	cJSON_AddBoolToObject(t, "mixedExact", m->exact);
}

/* reader: the GIL-free reader is on (the Python frames can be spliced
 * in); without it, native frames alone. */
static struct native_ctx *native_begin(int reader)
{
	struct native_ctx *c = malloc(sizeof(*c));

	if (!c)
		return NULL;
	c->list.n = 0;
	c->list.cap = PYSTACK_THREADS_MAX;
	c->list.t = malloc(c->list.cap * sizeof(*c->list.t));
	c->scratch = reader ? cpython.read.scratch_new() : NULL;
	if (!c->list.t || (reader && !c->scratch)) {
		free(c->list.t);
		if (c->scratch)
			cpython.read.scratch_free(c->scratch);
		free(c);
		return NULL;
	}
	crash_sym_begin(&c->sym);
	return c;
}

static void native_end(struct native_ctx *c)
{
	if (!c)
		return;
	crash_sym_end(&c->sym);
	if (c->scratch)
		cpython.read.scratch_free(c->scratch);
	free(c->list.t);
	free(c);
}

/* Whether the thread (Python ident id, kernel id tid) is one asked for
 * native frames. */
static int native_wanted(const struct backtrace_args *a, uint64_t id,
			 long tid, uint64_t main_id)
{
	int listed = !a->nthreads;

	for (size_t i = 0; i < a->nthreads && !listed; i++)
		listed = a->threads[i] == id;
	if (!listed || pygil_is_own_thread(tid))
		return 0;
	return a->native == NATIVE_ALL || (main_id && id == main_id);
}

/*
 * Every wanted thread's native frames, before the stacks are read with
 * the GIL: a thread the snapshot makes wait for the GIL would show that
 * wait (take_gil) rather than what it was doing.  An object whose keys
 * are kernel ids, each an object of the members add_native() gives.
 */
static cJSON *native_pass(struct native_ctx *c, const struct backtrace_args *a)
{
	cJSON *all = cJSON_CreateObject();
	uint64_t main_id = cpython.read.main_thread();
	struct {
		long tid;
		uint64_t id;
	} *want;
	size_t n = 0, nwant = 0;

	if (!all)
		return NULL;
	cpython.read.threads(c->list.t, c->list.cap, &n, NULL, 0);
	c->list.n = n;
	want = malloc((n ? n : 1) * sizeof(*want));
	for (size_t i = 0; want && i < n; i++)
		if (native_wanted(a, c->list.t[i].thread_id,
				  c->list.t[i].native_id, main_id)) {
			want[nwant].tid = c->list.t[i].native_id;
			want[nwant++].id = c->list.t[i].thread_id;
		}
	for (size_t i = 0; i < nwant; i++) {
		char key[24];
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		add_native(o, want[i].tid, c);
		snprintf(key, sizeof(key), "%ld", want[i].tid);
		cJSON_AddItemToObject(all, key, o);
	}
	free(want);
	return all;
}

/* Moves the native members taken for thread tid into t. */
static void attach_native(cJSON *t, cJSON *all, long tid)
{
	char key[24];
	cJSON *o, *m;

	snprintf(key, sizeof(key), "%ld", tid);
	o = cJSON_DetachItemFromObjectCaseSensitive(all, key);
	if (!o)
		return;
	while ((m = o->child)) {
		cJSON_DetachItemViaPointer(o, m);
		if (!cJSON_AddItemToObject(t, m->string, m))
			cJSON_Delete(m);
	}
	cJSON_Delete(o);
}

/* "tasks" (pytasks_json), "tasksLeftOut" (those not in it), and
 * "tasksNote" when there are none (why) or they could not be listed. */
static void add_tasks(cJSON *body, volatile int *cancel)
{
	struct pytasks ts;
	char err[256];
	size_t left;

	if (pytasks_take(&ts, (size_t)config_int("python.max_depth"), cancel,
			 err, sizeof(err))) {
		cJSON_AddArrayToObject(body, "tasks");
		cJSON_AddStringToObject(body, "tasksNote", err);
		return;
	}
	cJSON_AddItemToObject(body, "tasks", pytasks_json(&ts, &left));
	if (left)
		cJSON_AddNumberToObject(body, "tasksLeftOut", (double)left);
	if (ts.note[0])
		cJSON_AddStringToObject(body, "tasksNote", ts.note);
	pytasks_release(&ts);
}

static void run_backtrace(struct request *req)
{
	struct backtrace_args a;
	struct pystack_opts o = {0};
	struct snapshot_gil gil;
	struct native_ctx *nat = NULL;
	struct pystack st;
	cJSON *body, *threads, *g, *t, *natives = NULL;
	int reader;
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
	reader = cpython.read.ready() == 0;
	if (a.native && (nat = native_begin(reader))) {
		nat->cancel = &req->cancel;
		nat->t0 = agent_now_ms();
	}
	if (nat && reader)
		natives = native_pass(nat, &a);
	rc = snapshot_stacks(&st, &o, 0, &req->cancel, &gil, err, sizeof(err));
	free(a.threads);
	if (rc) {
		cJSON_Delete(natives);
		native_end(nat);
		request_fail(req, DAP_ERROR_FAILED, "cannot read the stacks: %s", err);
		return;
	}
	body = request_ok(req);
	threads = body ? cJSON_AddArrayToObject(body, "threads") : NULL;
	for (size_t i = 0; threads && i < st.nthreads; i++) {
		t = thread_json(&st.threads[i]);
		if (!t)
			break;
		if (natives)
			attach_native(t, natives, st.threads[i].native_id);
		else if (nat && (a.native == NATIVE_ALL ||
				 st.threads[i].is_main) &&
			 !pygil_is_own_thread(st.threads[i].native_id))
			/* Without the reader (no native pass): the native
			 * frames now, as before. */
			add_native(t, st.threads[i].native_id, nat);
		cJSON_AddItemToArray(threads, t);
	}
	cJSON_Delete(natives);
	native_end(nat);
	if (body && gil.locals_note[0])
		cJSON_AddStringToObject(body, "localsError", gil.locals_note);
	if (body && a.tasks)
		add_tasks(body, &req->cancel);
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
