/*
 * req_variables: what a paused frame holds — scopes, variables,
 * setVariable — and completions for the debug console.  Values are shown
 * by variables.c / pyviews; reprs and the client's expressions run on a
 * GIL thread with a run deadline (eval.timeout_ms) and a cancel.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "cpython/cpython.h"
#include "debugger/debugger.h"
#include "python/gilcall.h"
#include "python/pygil.h"
#include "python/pyviews.h"
#include "python/variables.h"
#include "server/handler.h"

#define COMPLETIONS_MAX 200
#define COMPLETION_TEXT_MAX 4096

static int run_ms(void)
{
	int64_t t = config_int("eval.timeout_ms");

	return t <= 0 || t > 0x7fffffff ? 0 : (int)t;
}

/* v as a DAP Variable; NULL when memory ran out on any of its fields (a
 * variable without its name is no answer). */
static cJSON *variable_json(const struct variable *v)
{
	cJSON *o = cJSON_CreateObject();
	int ok;

	if (!o)
		return NULL;
	ok = cJSON_AddStringToObject(o, "name", v->name) &&
	     cJSON_AddStringToObject(o, "value", v->value) &&
	     cJSON_AddStringToObject(o, "type", v->type) &&
	     cJSON_AddNumberToObject(o, "variablesReference",
				     (double)v->ref) &&
	     (!v->evaluate_name ||
	      cJSON_AddStringToObject(o, "evaluateName", v->evaluate_name)) &&
	     (!v->named || cJSON_AddNumberToObject(o, "namedVariables",
						   (double)v->named)) &&
	     (!v->indexed || cJSON_AddNumberToObject(o, "indexedVariables",
						     (double)v->indexed));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* ---- scopes ----------------------------------------------------------------
 */

struct scopes_call {
	struct gilcall c;
	int64_t frame_id;
	int64_t locals, globals;
	int rc;
	char err[256];
};

static void scopes_run(struct gilcall *gc)
{
	struct scopes_call *c = (struct scopes_call *)gc;
	PyFrameObject *f;

	f = debugger_frame_object(c->frame_id, c->err, sizeof(c->err));
	if (!f) {
		c->rc = -ESRCH;
		return;
	}
	c->locals = variables_scope_ref(f, 0);
	c->globals = variables_scope_ref(f, 1);
	Py_DECREF(f);
	if (!c->locals || !c->globals) {
		c->rc = -ENOSPC;
		snprintf(c->err, sizeof(c->err),
			 "too many variable references "
			 "(max %d)",
			 VARIABLES_HANDLES_MAX);
	}
}

static void plain_release(struct gilcall *gc)
{
	free(gc);
}

static void add_scope(cJSON *arr, const char *name, const char *hint,
		      int64_t ref)
{
	cJSON *s = cJSON_CreateObject();

	if (!s)
		return;
	cJSON_AddStringToObject(s, "name", name);
	if (hint)
		cJSON_AddStringToObject(s, "presentationHint", hint);
	cJSON_AddNumberToObject(s, "variablesReference", (double)ref);
	cJSON_AddBoolToObject(s, "expensive", 0);
	cJSON_AddItemToArray(arr, s);
}

static int frame_arg(struct request *req, int64_t *id)
{
	char err[128];
	int rc = dap_arg_int(req->args, "frameId", id, err, sizeof(err));

	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "argument 'frameId' is "
				       "required"
				     : err);
		return -1;
	}
	if (*id < DEBUGGER_FRAME_BASE) {
		request_fail(req, DAP_ERROR_FAILED,
			     "frame %lld belongs to a running thread: "
			     "pause it to see its variables",
			     (long long)*id);
		return -1;
	}
	return 0;
}

static void run_scopes(struct request *req)
{
	struct scopes_call *c;
	char err[256];
	cJSON *body, *arr;
	int64_t id;
	int rc;

	if (frame_arg(req, &id))
		return;
	c = calloc(1, sizeof(*c));
	if (!c) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	c->c.run = scopes_run;
	c->c.release = plain_release;
	c->frame_id = id;
	rc = gilcall_run(&c->c, 0, &req->cancel, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "scopes: %s", err);
	} else if (c->rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", c->err);
	} else if ((body = request_ok(req)) &&
		   (arr = cJSON_AddArrayToObject(body, "scopes"))) {
		add_scope(arr, "Locals", "locals", c->locals);
		add_scope(arr, "Globals", NULL, c->globals);
	}
	gilcall_done(&c->c);
}

const struct handler handler_scopes = {
	.command = "scopes",
	.flags = HANDLER_GIL,
	.run = run_scopes,
};

/* ---- variables -------------------------------------------------------------
 */

struct vars_call {
	struct gilcall c;
	int64_t ref, start, count;
	enum variables_filter filter;
	struct variable *v;
	size_t n;
	int rc;
	char err[256];
};

static void vars_run(struct gilcall *gc)
{
	struct vars_call *c = (struct vars_call *)gc;

	c->rc = variables_list(c->ref, c->filter, c->start, c->count, &c->v,
			       &c->n, c->err, sizeof(c->err));
}

static void vars_release(struct gilcall *gc)
{
	struct vars_call *c = (struct vars_call *)gc;

	variables_release(c->v, c->n);
	free(c);
}

static void run_variables(struct request *req)
{
	struct vars_call *c;
	const char *filter = NULL;
	int64_t ref = 0, start = 0, count = 0;
	char err[256];
	cJSON *body, *arr;
	int rc;

	rc = dap_arg_int(req->args, "variablesReference", &ref, err,
			 sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "argument "
				       "'variablesReference' is required"
				     : err);
		return;
	}
	if (dap_arg_string(req->args, "filter", &filter, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "start", &start, err, sizeof(err)) < 0 ||
	    dap_arg_int(req->args, "count", &count, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (filter && strcmp(filter, "named") && strcmp(filter, "indexed")) {
		request_fail(req, DAP_ERROR_FAILED, "filter must be 'named' or 'indexed'");
		return;
	}
	if (start < 0 || count < 0) {
		request_fail(req, DAP_ERROR_FAILED, "start and count must be >= 0");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	c->c.run = vars_run;
	c->c.release = vars_release;
	c->ref = ref;
	c->start = start;
	c->count = count;
	c->filter = !filter		       ? VARIABLES_ALL
		    : !strcmp(filter, "named") ? VARIABLES_NAMED
					       : VARIABLES_INDEXED;
	rc = gilcall_run(&c->c, run_ms(), &req->cancel, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "variables: %s", err);
	} else if (c->rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", c->err);
	} else if ((body = request_ok(req)) &&
		   (arr = cJSON_AddArrayToObject(body, "variables"))) {
		size_t i;

		for (i = 0; i < c->n; i++) {
			cJSON *o = variable_json(&c->v[i]);

			if (!o || !cJSON_AddItemToArray(arr, o)) {
				cJSON_Delete(o);
				break;
			}
		}
		if (i < c->n)
			request_fail(req, DAP_ERROR_FAILED,
				     "variables: out of memory in the target "
				     "(its address space limit?)");
	} else {
		request_fail(req, DAP_ERROR_FAILED,
			     "variables: out of memory in the target");
	}
	gilcall_done(&c->c);
}

const struct handler handler_variables = {
	.command = "variables",
	.flags = HANDLER_GIL,
	.run = run_variables,
};

/* ---- setVariable -----------------------------------------------------------
 */

struct setvar_call {
	struct gilcall c;
	int64_t ref;
	char *name, *value;
	struct variable out;
	int rc;
	char err[512];
};

static void setvar_run(struct gilcall *gc)
{
	struct setvar_call *c = (struct setvar_call *)gc;

	c->rc = variables_set(c->ref, c->name, c->value, &c->out, c->err,
			      sizeof(c->err));
}

static void setvar_release(struct gilcall *gc)
{
	struct setvar_call *c = (struct setvar_call *)gc;

	variable_release(&c->out);
	free(c->name);
	free(c->value);
	free(c);
}

static void run_set_variable(struct request *req)
{
	const char *name = NULL, *value = NULL;
	struct setvar_call *c;
	int64_t ref = 0;
	char err[512];
	cJSON *body;
	int rc;

	if ((rc = dap_arg_int(req->args, "variablesReference", &ref, err,
			      sizeof(err))) ||
	    (rc = dap_arg_string(req->args, "name", &name, err, sizeof(err))) ||
	    (rc = dap_arg_string(req->args, "value", &value, err,
				 sizeof(err)))) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "setVariable needs "
				       "variablesReference, name and value"
				     : err);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->name = strdup(name)) || !(c->value = strdup(value))) {
		if (c)
			free(c->name);
		free(c);
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	c->c.run = setvar_run;
	c->c.release = setvar_release;
	c->c.kind = PYGIL_CODE; /* the client's expression */
	c->ref = ref;
	rc = gilcall_run(&c->c, run_ms(), &req->cancel, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "setVariable: %s", err);
	} else if (c->rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", c->err);
	} else if ((body = request_ok(req))) {
		cJSON_AddStringToObject(body, "value", c->out.value);
		cJSON_AddStringToObject(body, "type", c->out.type);
		cJSON_AddNumberToObject(body, "variablesReference",
					(double)c->out.ref);
		if (c->out.named)
			cJSON_AddNumberToObject(body, "namedVariables",
						(double)c->out.named);
		if (c->out.indexed)
			cJSON_AddNumberToObject(body, "indexedVariables",
						(double)c->out.indexed);
	}
	gilcall_done(&c->c);
}

const struct handler handler_set_variable = {
	.command = "setVariable",
	.flags = HANDLER_RUNS_CODE | HANDLER_GIL,
	.run = run_set_variable,
};

/* ---- completions -----------------------------------------------------------
 */

struct compl_call {
	struct gilcall c;
	int64_t frame_id; /* 0: __main__ */
	char *text;	  /* up to the cursor */
	char *items[COMPLETIONS_MAX];
	size_t n;
	long start; /* where the completed token starts in text (0-based) */
	int rc;
	char err[256];
};

static void compl_run(struct gilcall *gc)
{
	struct compl_call *c = (struct compl_call *)gc;
	PyObject *g = NULL, *l = NULL, *fn = NULL, *r = NULL, *lst;

	if (c->frame_id) {
		PyFrameObject *f = debugger_frame_object(c->frame_id, c->err,
							 sizeof(c->err));
		if (!f) {
			c->rc = -ESRCH;
			return;
		}
		g = cpython.frame.globals(f);
		l = cpython.frame.locals(f);
		Py_DECREF(f);
	} else {
		PyObject *m = PyImport_AddModule("__main__");

		g = m ? Py_NewRef(PyModule_GetDict(m)) : NULL;
		l = Py_XNewRef(g);
	}
	fn = g && l ? pyviews_get("complete") : NULL;
	r = fn ? PyObject_CallFunction(fn, "sOO", c->text, g, l) : NULL;
	if (r && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2 &&
	    PyList_Check(lst = PyTuple_GET_ITEM(r, 1))) {
		c->start = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
		for (Py_ssize_t i = 0;
		     i < PyList_GET_SIZE(lst) && c->n < COMPLETIONS_MAX; i++) {
			const char *s =
				PyUnicode_AsUTF8(PyList_GET_ITEM(lst, i));
			if (s && (c->items[c->n] = strdup(s)))
				c->n++;
		}
	}
	/* A name that does not resolve has no completions; not an error. */
	PyErr_Clear();
	Py_XDECREF(r);
	Py_XDECREF(fn);
	Py_XDECREF(g);
	Py_XDECREF(l);
}

static void compl_release(struct gilcall *gc)
{
	struct compl_call *c = (struct compl_call *)gc;

	for (size_t i = 0; i < c->n; i++)
		free(c->items[i]);
	free(c->text);
	free(c);
}

static void run_completions(struct request *req)
{
	const char *text = NULL;
	int64_t column = 0, frame = 0;
	struct compl_call *c;
	char err[256];
	cJSON *body, *arr;
	size_t len;
	int rc;

	if ((rc = dap_arg_string(req->args, "text", &text, err, sizeof(err))) ||
	    (rc = dap_arg_int(req->args, "column", &column, err,
			      sizeof(err)))) {
		request_fail(req, DAP_ERROR_FAILED, "%s",
			     rc == 1 ? "completions needs text "
				       "and column"
				     : err);
		return;
	}
	if (dap_arg_int(req->args, "frameId", &frame, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	len = strlen(text);
	if (len > COMPLETION_TEXT_MAX) {
		request_fail(req, DAP_ERROR_FAILED, "text longer than %d",
			     COMPLETION_TEXT_MAX);
		return;
	}
	/* Columns start at 1 (VS Code's linesStartAt1/columnsStartAt1). */
	if (column < 1 || (size_t)column > len + 1)
		column = (int64_t)len + 1;
	if (frame && frame < DEBUGGER_FRAME_BASE)
		frame = 0; /* a running thread's frame: complete in __main__ */
	c = calloc(1, sizeof(*c));
	if (!c || !(c->text = strndup(text, (size_t)column - 1))) {
		free(c);
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	c->c.run = compl_run;
	c->c.release = compl_release;
	c->c.kind = PYGIL_CODE; /* evaluates the text typed so far */
	c->frame_id = frame;
	rc = gilcall_run(&c->c, run_ms(), &req->cancel, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "completions: %s", err);
	} else if (c->rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", c->err);
	} else if ((body = request_ok(req)) &&
		   (arr = cJSON_AddArrayToObject(body, "targets"))) {
		size_t tok = strlen(c->text) - (size_t)c->start;

		for (size_t i = 0; i < c->n; i++) {
			cJSON *t = cJSON_CreateObject();
			const char *dot = strrchr(c->items[i], '.');

			if (!t)
				break;
			cJSON_AddStringToObject(t, "label",
						dot ? dot + 1 : c->items[i]);
			cJSON_AddStringToObject(t, "text", c->items[i]);
			/* 0-based, as VS Code reads it (a substring
			 * index into text). */
			cJSON_AddNumberToObject(t, "start", (double)c->start);
			cJSON_AddNumberToObject(t, "length", (double)tok);
			cJSON_AddItemToArray(arr, t);
		}
	}
	gilcall_done(&c->c);
}

const struct handler handler_completions = {
	.command = "completions",
	.flags = HANDLER_RUNS_CODE | HANDLER_GIL,
	.run = run_completions,
};
