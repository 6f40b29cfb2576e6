/*
 * req_threads: the standard views of threads and stacks — threads and
 * stackTrace.  A thread the debugger paused is answered from what it
 * captured when it stopped (no GIL needed), a thread a stop holds in C
 * from what the stop captured of it (dbgtasks.h), both with frame ids
 * that scopes, variables and evaluate accept until the program is
 * resumed; a running thread from a snapshot.  DAP thread ids are kernel
 * thread ids (native_id).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "debugger/dbgevents.h"
#include "debugger/dbgtasks.h"
#include "debugger/debugger.h"
#include "python/snapshot.h"
#include "server/handler.h"

/* Frame ids of running threads: stable for a thread's frame at a depth
 * within a snapshot, always below DEBUGGER_FRAME_BASE (native ids are
 * below 2^22, depths below 1024). */
#define FRAME_ID(native, depth) ((double)(native)*1024.0 + (depth) + 1)

static int take(struct request *req, struct pystack *st)
{
	struct pystack_opts o = {0};
	struct snapshot_gil gil;
	char err[256];
	int rc;

	rc = snapshot_stacks(st, &o, 0, &req->cancel, &gil, err, sizeof(err));
	if (rc)
		request_fail(req, DAP_ERROR_FAILED, "cannot read the stacks: %s", err);
	return rc;
}

/* At a stop, for an editor that asked (dbgtasks.h): the asyncio tasks
 * of the loop thread ident runs, as entries after it. */
static void add_tasks(cJSON *arr, const struct dbgtask_entry *tasks,
		      size_t n, uint64_t ident)
{
	for (size_t k = 0; k < n; k++) {
		cJSON *t;

		if (tasks[k].ident != ident || !(t = cJSON_CreateObject()))
			continue;
		cJSON_AddNumberToObject(t, "id", (double)tasks[k].id);
		cJSON_AddStringToObject(t, "name", tasks[k].label);
		cJSON_AddItemToArray(arr, t);
	}
}

/* At a stop: its held threads and (for an editor that asked) asyncio
 * tasks captured, once per epoch; a console line when that failed (once
 * a stop).  Returns whether the capture is epoch's. */
static int capture(struct request *req, unsigned epoch)
{
	long paused[DEBUGGER_PAUSED_MAX];
	char note[256], line[400];
	size_t n;
	int rc;

	debugger_paused_list(paused, DEBUGGER_PAUSED_MAX, &n);
	rc = dbgtasks_capture(epoch, paused, n, &req->cancel, note,
			      sizeof(note));
	if (rc && note[0])
		snprintf(line, sizeof(line),
			 "probing: the threads in C cannot be shown (each "
			 "with a snapshot of its stack instead): %s\n",
			 note);
	else if (note[0])
		snprintf(line, sizeof(line), "probing: %s\n", note);
	if (note[0])
		dbgevents_stream("console", line);
	return rc == 0;
}

static void run_threads(struct request *req)
{
	struct dbgtask_entry *tasks = NULL;
	struct pystack st;
	cJSON *body, *arr, *t;
	/* The epoch first: a resume between the two reads bumps it, and a
	 * stop keeps it, so a capture made now is this stop's. */
	unsigned epoch = debugger_epoch();
	int stopped = debugger_stopped();
	size_t ntasks = 0;

	if (take(req, &st))
		return;
	if (stopped && capture(req, epoch) && dbgtasks_enabled() &&
	    (tasks = calloc(DBGTASKS_MAX, sizeof(*tasks))))
		ntasks = dbgtasks_list(epoch, tasks, DBGTASKS_MAX);
	body = request_ok(req);
	arr = body ? cJSON_AddArrayToObject(body, "threads") : NULL;
	for (size_t i = 0; arr && i < st.nthreads; i++) {
		long tid = st.threads[i].native_id;
		const char *name = st.threads[i].name ? st.threads[i].name : "";
		char *label = NULL;

		if (!(t = cJSON_CreateObject()))
			break;
		cJSON_AddNumberToObject(t, "id", (double)tid);
		/* All-stop, but this one is in C: held where it is (or, when
		 * it could not be read, running) until it comes back to
		 * Python.  The whole name, however long, then the state. */
		if (stopped && !debugger_is_paused(tid) &&
		    asprintf(&label, "%s (%s)", name,
			     dbgtasks_held(epoch, tid) ? "in C" : "running") <
			    0)
			label = NULL;
		cJSON_AddStringToObject(t, "name", label ? label : name);
		free(label);
		cJSON_AddItemToArray(arr, t);
		add_tasks(arr, tasks, ntasks, st.threads[i].thread_id);
	}
	free(tasks);
	pystack_release(&st);
}

const struct handler handler_threads = {
	.command = "threads",
	.flags = HANDLER_GIL,
	.run = run_threads,
};

static cJSON *frame_json(double id, const char *func, const char *file,
			 int line)
{
	cJSON *f = cJSON_CreateObject(), *src;
	const char *base;

	if (!f)
		return NULL;
	cJSON_AddNumberToObject(f, "id", id);
	cJSON_AddStringToObject(f, "name", func ? func : "?");
	src = cJSON_AddObjectToObject(f, "source");
	if (src && file) {
		base = strrchr(file, '/');
		cJSON_AddStringToObject(src, "name", base ? base + 1 : file);
		cJSON_AddStringToObject(src, "path", file);
	}
	cJSON_AddNumberToObject(f, "line", line);
	cJSON_AddNumberToObject(f, "column", 1);
	return f;
}

/* The reply of a stack captured at a stop (a paused thread's, a task's):
 * frames fr[0..n) of total. */
static void stop_frames_reply(struct request *req, struct debugger_frame *fr,
			      size_t n, size_t total)
{
	cJSON *body = request_ok(req), *frames;

	frames = body ? cJSON_AddArrayToObject(body, "stackFrames") : NULL;
	for (size_t i = 0; frames && i < n; i++)
		cJSON_AddItemToArray(frames,
				     frame_json((double)fr[i].id, fr[i].func,
						fr[i].file, fr[i].line));
	if (body)
		cJSON_AddNumberToObject(body, "totalFrames", (double)total);
	debugger_frames_release(fr, n);
}

/* A paused thread's stack as it stopped.  -ESRCH when it was resumed in
 * the meantime (the caller then takes a snapshot). */
static int paused_stack(struct request *req, long tid, size_t start,
			size_t levels)
{
	struct debugger_frame *fr;
	size_t n, total;
	int rc;

	rc = debugger_frames(tid, start, levels, &fr, &n, &total);
	if (rc == -ENOMEM) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return 0;
	}
	if (rc)
		return rc;
	stop_frames_reply(req, fr, n, total);
	return 0;
}

/* An entry of this stop (an asyncio task, a held thread): its frames.
 * -ESRCH when there is none (for a thread: the caller takes a snapshot). */
static int entry_stack(struct request *req, long id, size_t start,
		       size_t levels)
{
	struct debugger_frame *fr;
	size_t n, total;
	int rc = dbgtasks_frames(debugger_epoch(), id, start, levels, &fr, &n,
				 &total);

	if (rc == -ESRCH && id < DBGTASKS_ID_BASE)
		return rc;
	if (rc)
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == -ENOMEM ? "out of memory"
					   : "no such asyncio task in this stop "
					     "(the program was resumed)");
	else
		stop_frames_reply(req, fr, n, total);
	return 0;
}

static void run_stack_trace(struct request *req)
{
	int64_t tid = -1, start = 0, levels = 0;
	struct pystack st;
	struct pystack_thread *th = NULL;
	cJSON *body, *frames, *f;
	char err[128];

	int rc = dap_arg_int(req->args, "threadId", &tid, err, sizeof(err));
	if (rc == 1) {
		request_fail(req, DAP_ERROR_FAILED, "argument 'threadId' is required");
		return;
	}
	if (rc < 0 ||
	    dap_arg_int(req->args, "startFrame", &start, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "levels", &levels, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (start < 0 || levels < 0) {
		request_fail(req, DAP_ERROR_FAILED, "startFrame and levels must be >= 0");
		return;
	}
	if (tid >= DBGTASKS_ID_BASE) {
		entry_stack(req, (long)tid, (size_t)start, (size_t)levels);
		return;
	}
	if (debugger_is_paused((long)tid) &&
	    paused_stack(req, (long)tid, (size_t)start, (size_t)levels) == 0)
		return;
	/* At a stop, a thread in C: held, its frames as the stop read them
	 * (epoch before the check: a capture made now is this stop's). */
	unsigned epoch = debugger_epoch();
	if (debugger_stopped() && capture(req, epoch) &&
	    entry_stack(req, (long)tid, (size_t)start, (size_t)levels) == 0)
		return;
	if (take(req, &st))
		return;
	for (size_t i = 0; i < st.nthreads; i++)
		if (st.threads[i].native_id == tid)
			th = &st.threads[i];
	if (!th) {
		request_fail(req, DAP_ERROR_FAILED, "no Python thread with id %lld",
			     (long long)tid);
		pystack_release(&st);
		return;
	}
	body = request_ok(req);
	frames = body ? cJSON_AddArrayToObject(body, "stackFrames") : NULL;
	for (size_t d = (size_t)start; frames && d < th->nframes; d++) {
		if (levels > 0 && d >= (size_t)(start + levels))
			break;
		struct pystack_frame *fr = &th->frames[d];
		f = frame_json(FRAME_ID(th->native_id, d), fr->func, fr->file,
			       fr->lineno);
		if (!f)
			break;
		cJSON_AddItemToArray(frames, f);
	}
	if (body)
		cJSON_AddNumberToObject(body, "totalFrames",
					(double)th->nframes);
	pystack_release(&st);
}

const struct handler handler_stack_trace = {
	.command = "stackTrace",
	.flags = HANDLER_GIL,
	.run = run_stack_trace,
};
