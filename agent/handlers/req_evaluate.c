/*
 * req_evaluate: evaluate — run Python in the target: in __main__, or with
 * a frameId in that frame of a paused thread (its locals and globals;
 * assignments are written back into the frame), or with probingFrame
 * (a number: #N of the thread's backtrace) or probingFunction (the
 * innermost frame of that function) in a frame of a running thread
 * (probingThread: its kernel id; the main thread by default), reading
 * its globals and a copy of its locals (nothing is written back: the
 * frame runs on).  Contexts "hover",
 * "watch" and "variables" take an expression only; "repl" (the default)
 * and "clipboard" statements too.  While the debugger has the target
 * stopped, a result with children comes with a variablesReference.
 * Interrupted after timeoutMs or by a `cancel`; never waits for the GIL
 * longer than python.gil_timeout_ms.
 */
#include "cpython/pycompat.h"
#include <errno.h>
#include <frameobject.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "errbuf.h"
#include "cpython/cpython.h"
#include "debugger/debugger.h"
#include "python/gilcall.h"
#include "python/pyeval.h"
#include "python/pygil.h"
#include "python/variables.h"
#include "server/handler.h"

/* Shared by the worker and the GIL thread; the last to let go frees it. */
struct eval_call {
	int refs;
	char *code;
	int64_t frame_id; /* 0: __main__ */
	/* A running thread's frame: its number (-1: none) or function. */
	int64_t run_frame, run_thread;
	char *run_function;
	int expression;	  /* hover, watch, variables */
	struct pyeval_result res;
	struct variable var; /* the value's description, with a reference */
	int described;
	int rc;
	char err[256];
};

static void eval_unref(struct eval_call *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		pyeval_result_release(&c->res);
		variable_release(&c->var);
		free(c->run_function);
		free(c->code);
		free(c);
	}
}

/* Is f a frame of function name (its name, or its qualified name)? */
static int frame_is(PyFrameObject *f, const char *name)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	PyObject *q = cpython.frame.qualname(co);
	PyObject *n = PyObject_GetAttrString((PyObject *)co, "co_name");
	int is = (q && PyUnicode_Check(q) &&
		  PyUnicode_CompareWithASCIIString(q, name) == 0) ||
		 (n && PyUnicode_Check(n) &&
		  PyUnicode_CompareWithASCIIString(n, name) == 0);

	PyErr_Clear();
	Py_XDECREF(n);
	Py_DECREF(co);
	return is;
}

/* GIL held: a new reference to frame c->run_frame (0 the innermost, as
 * backtrace numbers them) or to the innermost frame of
 * c->run_function, of the thread whose kernel id is c->run_thread (0:
 * the main thread); NULL with c->err. */
static PyFrameObject *running_frame(struct eval_call *c)
{
	long want = c->run_thread ? (long)c->run_thread : (long)getpid();
	PyThreadState *ts;
	PyFrameObject *f, *back;
	int64_t i = 0;

	for (ts = PyInterpreterState_ThreadHead(PyInterpreterState_Main()); ts;
	     ts = PyThreadState_Next(ts))
		if (cpython.frame.thread_complete(ts) &&
		    (long)cpython.frame.native_id(ts) == want)
			break;
	if (!ts) {
		snprintf(c->err, sizeof(c->err),
			 "no Python thread %ld (probing backtrace lists them)",
			 want);
		return NULL;
	}
	for (f = cpython.frame.thread_frame(ts); f; f = back, i++) {
		if (c->run_function ? frame_is(f, c->run_function)
				    : i == c->run_frame)
			return f;
		back = PyFrame_GetBack(f);
		Py_DECREF(f);
	}
	if (c->run_function)
		snprintf(c->err, sizeof(c->err),
			 "no frame of %s on thread %ld's stack now",
			 c->run_function, want);
	else
		snprintf(c->err, sizeof(c->err),
			 "thread %ld has %lld frames now: #0 to #%lld", want,
			 (long long)i, (long long)i - 1);
	return NULL;
}

/* GIL held: runs the code where the request asked. */
static void evaluate(struct eval_call *c)
{
	struct pyeval_scope scope = {0};
	PyFrameObject *f = NULL;
	int running = c->run_frame >= 0 || c->run_function;

	unsigned epoch = debugger_epoch();

	scope.expression = c->expression;
	scope.keep = debugger_stopped();
	if (c->frame_id || running) {
		f = running ? running_frame(c)
			    : debugger_frame_object(c->frame_id, c->err,
						    sizeof(c->err));
		if (!f) {
			c->rc = -ESRCH;
			return;
		}
		scope.globals = cpython.frame.globals(f);
		scope.locals = running ? cpython.frame.locals_copy(f)
				       : cpython.frame.locals(f);
		if (!scope.globals || !scope.locals) {
			PyErr_Clear();
			snprintf(c->err, sizeof(c->err),
				 "cannot read the "
				 "frame's namespaces");
			c->rc = -EIO;
			goto out;
		}
	}
	c->rc = pyeval_run_in(c->code, &scope, &c->res, c->err, sizeof(c->err));
	if (f && !running && c->rc == 0 && !c->expression &&
	    debugger_epoch() == epoch) {
		/* Assignments in the console change the frame's locals — only
		 * while it is still paused (the code may have let a resume in:
		 * a running frame's locals must not be overwritten). */
		(void)cpython.frame.locals_write(f, scope.locals);
		PyErr_Clear();
	}
	if (c->res.obj) {
		if (c->res.ok &&
		    variables_describe(c->res.obj, "", NULL, f, &c->var) == 0)
			c->described = 1;
		Py_CLEAR(c->res.obj);
		PyErr_Clear();
	}
out:
	Py_XDECREF(scope.globals);
	Py_XDECREF(scope.locals);
	Py_XDECREF(f);
}

static void eval_with_gil(void *arg)
{
	struct eval_call *c = arg;

	if (cpython.finalizing()) {
		c->rc = -ESHUTDOWN;
		snprintf(c->err, sizeof(c->err), "the interpreter is exiting");
	} else {
		evaluate(c);
	}
	eval_unref(c);
}

/* "evaluate 'expr'" in buf: the expression's first line, cut, control
 * characters as '?' (it is shown to other sessions' messages). */
static const char *describe(char *buf, size_t len, const char *expr)
{
	char text[64];
	int cut = errbuf_line(text, sizeof(text), expr);

	snprintf(buf, len, "evaluate '%s%s'", text, cut ? "..." : "");
	return buf;
}

/* why: what stopped the code when we did (the timeout, a cancel), said
 * before its KeyboardInterrupt traceback; NULL when we did not. */
static void reply(struct request *req, struct eval_call *c, const char *why)
{
	const struct pyeval_result *r = &c->res;
	cJSON *body;

	if (!r->ok) {
		req->resp = dap_error_new(
			req->msg->seq, req->msg->command, DAP_ERROR_RAISED,
			"%s%s%s",
			why ? why : "", why ? "\n" : "",
			r->error ? r->error : "the code raised an exception");
		if (req->resp && req->resp->body) {
			cJSON_AddStringToObject(req->resp->body, "output",
						r->output ? r->output : "");
			cJSON_AddBoolToObject(req->resp->body, "interrupted",
					      r->interrupted);
		}
		return;
	}
	body = request_ok(req);
	if (!body)
		return;
	/* A tensor, module or array reads better as pyviews shows it. */
	cJSON_AddStringToObject(body, "result",
				c->described && c->var.ref ? c->var.value
				: r->value		   ? r->value
							   : "");
	if (r->type)
		cJSON_AddStringToObject(body, "type", r->type);
	cJSON_AddNumberToObject(body, "variablesReference",
				c->described ? (double)c->var.ref : 0);
	if (c->described && c->var.named)
		cJSON_AddNumberToObject(body, "namedVariables",
					(double)c->var.named);
	if (c->described && c->var.indexed)
		cJSON_AddNumberToObject(body, "indexedVariables",
					(double)c->var.indexed);
	cJSON_AddStringToObject(body, "output", r->output ? r->output : "");
}

static void run_evaluate(struct request *req)
{
	const char *expr = NULL, *context = "repl";
	int64_t timeout = config_int("eval.timeout_ms"), frame_id = 0;
	int64_t run_frame = -1, run_thread = 0;
	const char *run_function = NULL;
	struct pygil_limits lim = {0};
	struct eval_call *c;
	char err[128], what[PYGIL_WHAT_MAX];
	int rc, interrupted = 0;

	rc = dap_arg_string(req->args, "expression", &expr, err, sizeof(err));
	if (rc == 1) {
		request_fail(req, DAP_ERROR_FAILED, "argument 'expression' is required");
		return;
	}
	if (rc < 0 ||
	    dap_arg_string(req->args, "context", &context, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "timeoutMs", &timeout, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "frameId", &frame_id, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "probingFrame", &run_frame, err,
			sizeof(err)) < 0 ||
	    dap_arg_int(req->args, "probingThread", &run_thread, err,
			sizeof(err)) < 0 ||
	    dap_arg_string(req->args, "probingFunction", &run_function, err,
			   sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (run_frame < -1 || (run_thread && run_frame < 0 && !run_function)) {
		request_fail(req, DAP_ERROR_FAILED,
			     "probingFrame is a frame's number from 0 "
			     "(probingThread needs it or probingFunction)");
		return;
	}
	if (frame_id && (run_frame >= 0 || run_function)) {
		request_fail(req, DAP_ERROR_FAILED,
			     "frameId or probingFrame/probingFunction, not "
			     "both");
		return;
	}
	if (frame_id && frame_id < DEBUGGER_FRAME_BASE) {
		request_fail(req, DAP_ERROR_FAILED,
			     "frame %lld belongs to a running thread: "
			     "pause it to evaluate there",
			     (long long)frame_id);
		return;
	}
	if (timeout < 0) {
		request_fail(req, DAP_ERROR_FAILED, "timeoutMs must be >= 0");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->code = strdup(expr))) {
		free(c);
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	c->refs = 2;
	c->frame_id = frame_id;
	c->run_frame = run_frame;
	c->run_thread = run_thread;
	if (run_function && !(c->run_function = strdup(run_function))) {
		free(c->code);
		free(c);
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	c->expression = !strcmp(context, "hover") ||
			!strcmp(context, "watch") ||
			!strcmp(context, "variables");
	lim.start_ms = (int)config_int("python.gil_timeout_ms");
	lim.run_ms = timeout > 0x7fffffff ? 0x7fffffff : (int)timeout;
	lim.cancel = &req->cancel;
	/* Named in the messages about calls that do not end (pygil.h). */
	lim.kind = PYGIL_CODE;
	lim.what = describe(what, sizeof(what), expr);
	rc = pygil_run(eval_with_gil, c, &lim, &interrupted);
	switch (rc) {
	case 0:
		if (c->rc) {
			request_fail(req, DAP_ERROR_FAILED, "evaluate failed: %s", c->err);
		} else if (interrupted && !c->res.ok) {
			char why[160];

			if (req->cancel)
				snprintf(why, sizeof(why),
					 "interrupted: the request was "
					 "cancelled (Ctrl-C)");
			else
				snprintf(why, sizeof(why),
					 "stopped after %lld ms: the eval "
					 "timeout (--timeout, timeoutMs) "
					 "passed",
					 (long long)timeout);
			reply(req, c, why);
		} else {
			reply(req, c, NULL);
		}
		eval_unref(c);
		return;
	case -EINPROGRESS:
		if (req->cancel || !timeout)
			request_fail(req, DAP_ERROR_FAILED,
				     "the code did not stop when cancelled "
				     "(blocked in C?); it goes on running in "
				     "the target");
		else
			request_fail(req, DAP_ERROR_FAILED,
				     "the code did not stop when interrupted "
				     "after %lld ms (blocked in C?); it goes "
				     "on running in the target",
				     (long long)timeout);
		eval_unref(c);
		return;
	default: {
		char why[512];

		gilcall_explain(rc, lim.start_ms, why, sizeof(why));
		request_fail(req, rc == -ETIMEDOUT ? DAP_ERROR_GIL : DAP_ERROR_FAILED,
			     "%s", why);
		break;
	}
	}
	free(c->code);
	free(c);
}

const struct handler handler_evaluate = {
	.command = "evaluate",
	.flags = HANDLER_RUNS_CODE | HANDLER_GIL,
	.run = run_evaluate,
};
