/*
 * req_debug: the debug session — attach, configurationDone, the three
 * kinds of breakpoints, pause, continue, next, stepIn, stepOut and
 * exceptionInfo.  The work is the debugger's (debugger.h); this file
 * turns JSON into typed values and back.
 *
 * Only the attached session may change breakpoints or run and stop the
 * target; any session may look (threads, stackTrace, exceptionInfo,
 * variables, evaluate), so CLI queries keep working during a debug
 * session.
 */
#include "cpython/pycompat.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/agent.h"
#include "debugger/dbgcleanup.h"
#include "debugger/dbgcontrol.h"
#include "debugger/dbgevents.h"
#include "debugger/dbgoutput.h"
#include "debugger/dbgsession.h"
#include "debugger/dbgtasks.h"
#include "debugger/debugger.h"
#include "python/gilcall.h"
#include "python/pyviews.h"
#include "server/handler.h"
#include "server/server.h"

/* ---- attach / configurationDone ---------------------------------------- */

static void run_attach(struct request *req)
{
	struct dap_message *ev;
	char err[256];
	int rc, redirect = 0, tasks = 0;

	/* debugpy's name: the target's stdout/stderr as output events.
	 * asyncioTasks: each asyncio task an entry of a stop (dbgtasks.h). */
	if (dap_arg_bool(req->args, "redirectOutput", &redirect, err,
			 sizeof(err)) < 0 ||
	    dap_arg_bool(req->args, "asyncioTasks", &tasks, err,
			 sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	/* Whatever a previous session left is removed before this one
	 * sets anything. */
	if (!dbgsession_is_attached(req->session) &&
	    dbgcleanup_run(err, sizeof(err))) {
		request_fail(req, DAP_ERROR_FAILED,
			     "cannot attach yet: the previous debug "
			     "session is still being cleaned up (%s)",
			     err);
		return;
	}
	rc = dbgsession_attach(req->session, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	dbgtasks_enable(tasks);
	if (redirect && dbgoutput_start(err, sizeof(err))) {
		/* Debugging works without it: say so, do not refuse. */
		char note[320];

		snprintf(note, sizeof(note),
			 "probing: the target's output is not redirected: "
			 "%s\n",
			 err);
		dbgevents_stream("console", note);
	}
	request_ok(req);
	ev = dap_event_new("initialized");
	if (ev)
		server_post_event(server_current(), req->session, ev);
}

const struct handler handler_attach = {
	.command = "attach",
	.flags = HANDLER_OPENS | HANDLER_STOPS | HANDLER_GIL,
	.run = run_attach,
};

static void run_configuration_done(struct request *req)
{
	request_ok(req);
	/* A stop held for this debugger (probing debug --pause). */
	dbgsession_announce(req->session);
}

const struct handler handler_configuration_done = {
	.command = "configurationDone",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER,
	.run = run_configuration_done,
};

/* ---- breakpoints --------------------------------------------------------- */

/* Reads an optional string member of an object; -1 with the reply set
 * when it is not a string. */
static int opt_string(struct request *req, const cJSON *o, const char *key,
		      const char **out)
{
	char err[128];

	*out = NULL;
	if (dap_arg_string(o, key, out, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return -1;
	}
	return 0;
}

static cJSON *result_json(const struct bp_result *r, const char *path)
{
	cJSON *b = cJSON_CreateObject(), *src;

	if (!b)
		return NULL;
	cJSON_AddNumberToObject(b, "id", r->id);
	cJSON_AddBoolToObject(b, "verified", r->verified);
	if (r->line)
		cJSON_AddNumberToObject(b, "line", r->line);
	if (r->message[0])
		cJSON_AddStringToObject(b, "message", r->message);
	if (path && (src = cJSON_AddObjectToObject(b, "source")))
		cJSON_AddStringToObject(src, "path", path);
	return b;
}

/* Parses the breakpoints array (lines or names) into specs. */
static int parse_specs(struct request *req, const cJSON *arr, int functions,
		       struct bp_spec **out, size_t *n)
{
	size_t max = functions ? BP_FUNCTIONS_MAX : BP_PER_FILE_MAX, k = 0;
	struct bp_spec *specs;
	const cJSON *it;
	char err[128];

	*out = NULL;
	*n = 0;
	if (!arr)
		return 0;
	if ((size_t)cJSON_GetArraySize(arr) > max) {
		request_fail(req, DAP_ERROR_FAILED, "too many breakpoints (max %zu)", max);
		return -1;
	}
	specs = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*specs));
	if (!specs) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return -1;
	}
	cJSON_ArrayForEach(it, arr)
	{
		struct bp_spec *s = &specs[k];
		int64_t line = 0;
		int rc;

		if (!cJSON_IsObject(it)) {
			request_fail(req, DAP_ERROR_FAILED,
				     "each breakpoint must be an "
				     "object");
			goto fail;
		}
		if (functions) {
			rc = dap_arg_string(it, "name", &s->name, err,
					    sizeof(err));
			if (rc) {
				request_fail(req, DAP_ERROR_FAILED, "%s",
					     rc == 1 ? "a function breakpoint "
						       "needs a "
						       "'name'"
						     : err);
				goto fail;
			}
		} else {
			rc = dap_arg_int(it, "line", &line, err, sizeof(err));
			if (rc) {
				request_fail(
					req, DAP_ERROR_FAILED, "%s",
					rc == 1 ? "a breakpoint needs a 'line'"
						: err);
				goto fail;
			}
			s->line = line > 0x7fffffff ? 0x7fffffff
				  : line < -1	    ? -1
						    : (int)line;
		}
		if (opt_string(req, it, "condition", &s->condition) ||
		    opt_string(req, it, "hitCondition", &s->hit_condition) ||
		    opt_string(req, it, "logMessage", &s->log_message))
			goto fail;
		k++;
	}
	*out = specs;
	*n = k;
	return 0;
fail:
	free(specs);
	return -1;
}

/* Sets the breakpoints of arr — on lines of the file path, or (path
 * NULL) on function names — and answers with what became of each. */
static void set_and_reply(struct request *req, const char *path,
			  const cJSON *arr)
{
	struct bp_spec *specs = NULL;
	struct bp_result *res = NULL;
	cJSON *body, *out;
	char err[256];
	size_t n = 0;
	int rc;

	if (parse_specs(req, arr, !path, &specs, &n))
		return;
	res = calloc(n + 1, sizeof(*res));
	if (!res) {
		free(specs);
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	rc = path ? dbgcontrol_set_breakpoints(path, specs, n, res, err,
					       sizeof(err))
		  : dbgcontrol_set_function_breakpoints(specs, n, res, err,
							sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "cannot set breakpoints: %s",
			     err);
		goto out;
	}
	body = request_ok(req);
	out = body ? cJSON_AddArrayToObject(body, "breakpoints") : NULL;
	for (size_t i = 0; out && i < n; i++)
		cJSON_AddItemToArray(out, result_json(&res[i], path));
out:
	free(specs);
	free(res);
}

static void run_set_breakpoints(struct request *req)
{
	const cJSON *source = NULL, *arr = NULL, *ref;
	const char *path = NULL;
	char err[256];
	int rc;

	rc = dap_arg_object(req->args, "source", &source, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "argument 'source' is "
				       "required"
				     : err);
		return;
	}
	rc = dap_arg_string(source, "path", &path, err, sizeof(err));
	if (rc) {
		ref = cJSON_GetObjectItemCaseSensitive(source,
						       "sourceReference");
		request_fail(
			req, DAP_ERROR_FAILED, "%s",
			rc < 0 ? err
			: ref ? "breakpoints in sources without a path are not "
				"supported"
			      : "argument 'source.path' is required");
		return;
	}
	if (path[0] != '/') {
		request_fail(req, DAP_ERROR_FAILED, "source.path must be absolute: %s", path);
		return;
	}
	if (dap_arg_array(req->args, "breakpoints", &arr, err, sizeof(err)) <
	    0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	set_and_reply(req, path, arr);
}

const struct handler handler_set_breakpoints = {
	.command = "setBreakpoints",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER | HANDLER_GIL,
	.run = run_set_breakpoints,
};

static void run_set_function_breakpoints(struct request *req)
{
	const cJSON *arr = NULL;
	char err[256];
	int rc;

	rc = dap_arg_array(req->args, "breakpoints", &arr, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "argument 'breakpoints' "
				       "is required"
				     : err);
		return;
	}
	set_and_reply(req, NULL, arr);
}

const struct handler handler_set_function_breakpoints = {
	.command = "setFunctionBreakpoints",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER | HANDLER_GIL,
	.run = run_set_function_breakpoints,
};

static void run_set_exception_breakpoints(struct request *req)
{
	const cJSON *filters = NULL, *f;
	int raised = 0, uncaught = 0, rc;
	cJSON *body, *out;
	char err[256];

	rc = dap_arg_array(req->args, "filters", &filters, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "argument 'filters' is "
				       "required"
				     : err);
		return;
	}
	cJSON_ArrayForEach(f, filters)
	{
		if (!cJSON_IsString(f)) {
			request_fail(req, DAP_ERROR_FAILED, "filters must be strings");
			return;
		}
		if (!strcmp(f->valuestring, "raised")) {
			raised = 1;
		} else if (!strcmp(f->valuestring, "uncaught")) {
			uncaught = 1;
		} else {
			request_fail(req, DAP_ERROR_FAILED,
				     "unknown exception filter '%.64s' "
				     "(known: raised, uncaught)",
				     f->valuestring);
			return;
		}
	}
	if (dbgcontrol_set_exception_filters(raised, uncaught, err,
					     sizeof(err))) {
		request_fail(req, DAP_ERROR_FAILED, "cannot set exception breakpoints: %s",
			     err);
		return;
	}
	body = request_ok(req);
	out = body ? cJSON_AddArrayToObject(body, "breakpoints") : NULL;
	cJSON_ArrayForEach(f, filters)
	{
		cJSON *b = out ? cJSON_CreateObject() : NULL;
		if (!b)
			break;
		cJSON_AddBoolToObject(b, "verified", 1);
		cJSON_AddItemToArray(out, b);
	}
}

const struct handler handler_set_exception_breakpoints = {
	.command = "setExceptionBreakpoints",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER | HANDLER_GIL,
	.run = run_set_exception_breakpoints,
};

/* ---- running and stopping ----------------------------------------------- */

static void run_pause(struct request *req)
{
	char err[256];

	if (dbgcontrol_pause(err, sizeof(err))) {
		request_fail(req, DAP_ERROR_FAILED, "cannot pause: %s", err);
		return;
	}
	request_ok(req);
}

const struct handler handler_pause = {
	.command = "pause",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER | HANDLER_GIL,
	.run = run_pause,
};

static void resume(struct request *req, enum debugger_cmd cmd)
{
	int64_t tid = 0;
	char err[128];
	cJSON *body;
	int rc;

	rc = dap_arg_int(req->args, "threadId", &tid, err, sizeof(err));
	if (rc < 0 || (rc == 1 && cmd != DEBUGGER_CONTINUE)) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc < 0 ? err : "argument 'threadId' is required");
		return;
	}
	if (cmd != DEBUGGER_CONTINUE && tid >= DBGTASKS_ID_BASE) {
		request_fail(req, DAP_ERROR_FAILED,
			     "an asyncio task is no thread: step the thread "
			     "that runs its event loop");
		return;
	}
	if (cmd != DEBUGGER_CONTINUE && !debugger_is_paused((long)tid) &&
	    dbgtasks_held(debugger_epoch(), (long)tid)) {
		request_fail(req, DAP_ERROR_FAILED,
			     "thread %lld is in C, held where it waits: it can "
			     "step once it stops at a line (continue lets it "
			     "go on)",
			     (long long)tid);
		return;
	}
	if (debugger_resume((long)tid, cmd, err, sizeof(err))) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	body = request_ok(req);
	if (body && cmd == DEBUGGER_CONTINUE)
		cJSON_AddBoolToObject(body, "allThreadsContinued", 1);
}

static void run_continue(struct request *req)
{
	resume(req, DEBUGGER_CONTINUE);
}

static void run_next(struct request *req)
{
	resume(req, DEBUGGER_NEXT);
}

static void run_step_in(struct request *req)
{
	resume(req, DEBUGGER_STEP_IN);
}

static void run_step_out(struct request *req)
{
	resume(req, DEBUGGER_STEP_OUT);
}

const struct handler handler_continue = {
	.command = "continue",
	.flags = HANDLER_DEBUGGER,
	.run = run_continue,
};

const struct handler handler_next = {
	.command = "next",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER,
	.run = run_next,
};

const struct handler handler_step_in = {
	.command = "stepIn",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER,
	.run = run_step_in,
};

const struct handler handler_step_out = {
	.command = "stepOut",
	.flags = HANDLER_STOPS | HANDLER_DEBUGGER,
	.run = run_step_out,
};

/* ---- exceptionInfo ------------------------------------------------------- */

struct exc_call {
	struct gilcall c;
	long tid;
	int rc;
	const char *mode;
	char *id, *description, *full, *trace;
	char err[256];
};

static char *dup_item(PyObject *t, Py_ssize_t i)
{
	PyObject *s = PyTuple_GET_ITEM(t, i);
	const char *u = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;

	PyErr_Clear();
	return strdup(u ? u : "");
}

static void exc_run(struct gilcall *gc)
{
	struct exc_call *c = (struct exc_call *)gc;
	PyObject *exc, *fn, *t;

	exc = debugger_exception(c->tid, &c->mode, c->err, sizeof(c->err));
	if (!exc) {
		c->rc = -ESRCH;
		return;
	}
	fn = pyviews_get("exception_info");
	t = fn ? PyObject_CallOneArg(fn, exc) : NULL;
	if (t && PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 4) {
		c->id = dup_item(t, 0);
		c->description = dup_item(t, 1);
		c->full = dup_item(t, 2);
		c->trace = dup_item(t, 3);
	} else {
		c->rc = -EIO;
		snprintf(c->err, sizeof(c->err),
			 "cannot describe the "
			 "exception");
	}
	PyErr_Clear();
	Py_XDECREF(t);
	Py_XDECREF(fn);
	Py_DECREF(exc);
}

static void exc_release(struct gilcall *gc)
{
	struct exc_call *c = (struct exc_call *)gc;

	free(c->id);
	free(c->description);
	free(c->full);
	free(c->trace);
	free(c);
}

static void run_exception_info(struct request *req)
{
	struct exc_call *c;
	int64_t tid = 0;
	char err[256];
	cJSON *body, *details;
	int rc;

	rc = dap_arg_int(req->args, "threadId", &tid, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "argument 'threadId' is "
				       "required"
				     : err);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	c->c.run = exc_run;
	c->c.release = exc_release;
	c->tid = (long)tid;
	rc = gilcall_run(&c->c, 2000, &req->cancel, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "exceptionInfo: %s", err);
	} else if (c->rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", c->err);
	} else if ((body = request_ok(req))) {
		cJSON_AddStringToObject(body, "exceptionId", c->id);
		cJSON_AddStringToObject(body, "description", c->description);
		cJSON_AddStringToObject(body, "breakMode", c->mode);
		details = cJSON_AddObjectToObject(body, "details");
		if (details) {
			cJSON_AddStringToObject(details, "message",
						c->description);
			cJSON_AddStringToObject(details, "typeName", c->id);
			cJSON_AddStringToObject(details, "fullTypeName",
						c->full);
			cJSON_AddStringToObject(details, "stackTrace",
						c->trace);
		}
	}
	gilcall_done(&c->c);
}

const struct handler handler_exception_info = {
	.command = "exceptionInfo",
	.flags = HANDLER_GIL,
	.run = run_exception_info,
};

/* ---- probing/debug: the CLI's view of the debugger ----------------------- */

#define HOLD_DEFAULT_MS 300000
#define HOLD_MAX_MS (24 * 3600 * 1000)

static void debug_status(struct request *req)
{
	struct dbgsession_status st;
	long held[DBGTASKS_HELD_MAX];
	size_t nheld;
	cJSON *body, *arr;

	/* The epoch first: the held threads are the stop's, if any. */
	nheld = dbgtasks_held_list(debugger_epoch(), held, DBGTASKS_HELD_MAX);
	dbgsession_get_status(&st);
	body = request_ok(req);
	if (!body)
		return;
	cJSON_AddBoolToObject(body, "attached", st.session != 0);
	cJSON_AddBoolToObject(body, "held", st.held);
	cJSON_AddBoolToObject(body, "stopped", st.stopped);
	cJSON_AddBoolToObject(body, "hook", st.hook);
	arr = cJSON_AddArrayToObject(body, "pausedThreads");
	for (size_t i = 0; arr && i < st.npaused; i++)
		cJSON_AddItemToArray(arr,
				     cJSON_CreateNumber((double)st.paused[i]));
	/* Held in C by the stop, as `threads` or stackTrace last read them
	 * (a thread paused since is in pausedThreads too). */
	arr = cJSON_AddArrayToObject(body, "heldThreads");
	for (size_t i = 0; arr && st.stopped && i < nheld; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)held[i]));
	arr = cJSON_AddArrayToObject(body, "exceptionFilters");
	if (arr && st.exc_raised)
		cJSON_AddItemToArray(arr, cJSON_CreateString("raised"));
	if (arr && st.exc_uncaught)
		cJSON_AddItemToArray(arr, cJSON_CreateString("uncaught"));
}

/* Pause now and keep the stop for the next debugger (debug --pause). */
static void debug_pause(struct request *req)
{
	const char *address = NULL;
	int64_t wait = HOLD_DEFAULT_MS;
	char err[256], canon[256] = "";
	cJSON *body;
	int rc;

	if (dap_arg_string(req->args, "address", &address, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "waitMs", &wait, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (wait <= 0 || wait > HOLD_MAX_MS) {
		request_fail(req, DAP_ERROR_FAILED, "waitMs must be between 1 and %d",
			     HOLD_MAX_MS);
		return;
	}
	if (address &&
	    agent_listen(address, canon, sizeof(canon), err, sizeof(err))) {
		request_fail(req, DAP_ERROR_FAILED, "cannot listen on %s: %s", address, err);
		return;
	}
	if (!dbgsession_is_attached(req->session) &&
	    dbgcleanup_run(err, sizeof(err))) {
		request_fail(req, DAP_ERROR_FAILED,
			     "the previous debug session is still "
			     "being cleaned up (%s)",
			     err);
		return;
	}
	rc = dbgsession_attach(req->session, err, sizeof(err));
	if (!rc)
		rc = dbgcontrol_pause(err, sizeof(err));
	if (!rc)
		rc = dbgsession_hold(req->session, (int)wait, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "cannot pause: %s", err);
		return;
	}
	body = request_ok(req);
	if (!body)
		return;
	cJSON_AddNumberToObject(body, "pid", getpid());
	cJSON_AddNumberToObject(body, "waitMs", (double)wait);
	if (canon[0])
		cJSON_AddStringToObject(body, "address", canon);
}

static void run_probing_debug(struct request *req)
{
	const char *action = "status";
	char err[128];

	if (dap_arg_string(req->args, "action", &action, err, sizeof(err)) <
	    0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (!strcmp(action, "status")) {
		debug_status(req);
	} else if (!strcmp(action, "pause")) {
		debug_pause(req);
	} else if (!strcmp(action, "resume")) {
		dbgsession_release(req->session);
		/* A released hold leaves a cleanup; best effort here (the
		 * next traced line or attach does it otherwise). */
		dbgcleanup_run(err, sizeof(err));
		request_ok(req);
	} else {
		request_fail(req, DAP_ERROR_FAILED,
			     "unknown action '%.32s' (status, pause, "
			     "resume)",
			     action);
	}
}

/* pause stops the target; status and resume only look or let it run. */
static unsigned probing_debug_policy(const cJSON *args)
{
	const cJSON *action = cJSON_GetObjectItemCaseSensitive(args, "action");

	if (cJSON_IsString(action) && !strcmp(action->valuestring, "pause"))
		return HANDLER_STOPS | HANDLER_GIL;
	return HANDLER_GIL;
}

const struct handler handler_probing_debug = {
	.command = "probing/debug",
	.flags = HANDLER_STOPS | HANDLER_GIL,
	.policy = probing_debug_policy,
	.run = run_probing_debug,
};
