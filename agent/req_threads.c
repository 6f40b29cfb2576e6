/*
 * req_threads: the standard views of threads and stacks — threads and
 * stackTrace — answered from a snapshot, whether or not the thread is
 * paused.  DAP thread ids are kernel thread ids (native_id).
 */
#include <stdio.h>
#include <string.h>

#include "handler.h"
#include "snapshot.h"

/* Frame ids: stable for a thread's frame at a depth within a snapshot. */
#define FRAME_ID(native, depth) ((double)(native) * 1024.0 + (depth) + 1)

static int take(struct request *req, struct pystack *st)
{
	struct pystack_opts o = {0};
	struct snapshot_gil gil;
	char err[256];
	int rc;

	rc = snapshot_stacks(st, &o, 0, &req->cancel, &gil, err, sizeof(err));
	if (rc)
		request_fail(req, 1, "cannot read the stacks: %s", err);
	return rc;
}

static void run_threads(struct request *req)
{
	struct pystack st;
	cJSON *body, *arr, *t;

	if (take(req, &st))
		return;
	body = request_ok(req);
	arr = body ? cJSON_AddArrayToObject(body, "threads") : NULL;
	for (size_t i = 0; arr && i < st.nthreads; i++) {
		t = cJSON_CreateObject();
		if (!t)
			break;
		cJSON_AddNumberToObject(t, "id", (double)st.threads[i].native_id);
		cJSON_AddStringToObject(t, "name", st.threads[i].name
				       ? st.threads[i].name : "");
		cJSON_AddItemToArray(arr, t);
	}
	pystack_release(&st);
}

const struct handler handler_threads = {
	.command = "threads",
	.where = HANDLER_WORKER,
	.run = run_threads,
};

static void run_stack_trace(struct request *req)
{
	int64_t tid = -1, start = 0, levels = 0;
	struct pystack st;
	struct pystack_thread *th = NULL;
	cJSON *body, *frames, *f, *src;
	char err[128];
	const char *base;

	int rc = dap_arg_int(req->args, "threadId", &tid, err, sizeof(err));
	if (rc == 1) {
		request_fail(req, 1, "argument 'threadId' is required");
		return;
	}
	if (rc < 0 ||
	    dap_arg_int(req->args, "startFrame", &start, err, sizeof(err)) < 0 ||
	    dap_arg_int(req->args, "levels", &levels, err, sizeof(err)) < 0) {
		request_fail(req, 1, "%s", err);
		return;
	}
	if (start < 0 || levels < 0) {
		request_fail(req, 1, "startFrame and levels must be >= 0");
		return;
	}
	if (take(req, &st))
		return;
	for (size_t i = 0; i < st.nthreads; i++)
		if (st.threads[i].native_id == tid)
			th = &st.threads[i];
	if (!th) {
		request_fail(req, 1, "no Python thread with id %lld",
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
		f = cJSON_CreateObject();
		if (!f)
			break;
		cJSON_AddNumberToObject(f, "id", FRAME_ID(th->native_id, d));
		cJSON_AddStringToObject(f, "name", fr->func ? fr->func : "?");
		src = cJSON_AddObjectToObject(f, "source");
		if (src && fr->file) {
			base = strrchr(fr->file, '/');
			cJSON_AddStringToObject(src, "name",
						base ? base + 1 : fr->file);
			cJSON_AddStringToObject(src, "path", fr->file);
		}
		cJSON_AddNumberToObject(f, "line", fr->lineno);
		cJSON_AddNumberToObject(f, "column", 1);
		cJSON_AddItemToArray(frames, f);
	}
	if (body)
		cJSON_AddNumberToObject(body, "totalFrames", (double)th->nframes);
	pystack_release(&st);
}

const struct handler handler_stack_trace = {
	.command = "stackTrace",
	.where = HANDLER_WORKER,
	.run = run_stack_trace,
};
