/*
 * mcp: see mcp.h.  One loop: read a line, answer it.
 */
#include "mcp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "serve/ops.h"

#ifndef PROBING_VERSION
#define PROBING_VERSION "0"
#endif

/* JSON-RPC's and MCP's error codes. */
#define E_PARSE (-32700)
#define E_REQUEST (-32600)
#define E_METHOD (-32601)
#define E_PARAMS (-32602)
#define E_INTERNAL (-32603)
#define E_NO_RESOURCE (-32002)

#define REPORTS_MAX 200 /* crash reports listed, newest last */

/* Newest first; a client asking for one of these gets it. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26",
				       "2024-11-05", NULL};

static const char instructions[] =
	"Probing looks inside live Python (PyTorch) processes without "
	"stopping them.  Find the process with list_agents (or, when it has "
	"ended, list_recordings), then: a hang -> backtrace, hangs, and for "
	"a distributed job cluster_hang; slow -> flamegraph and "
	"torch_module_times; memory -> memory and query over process.memory; "
	"anything recorded -> describe_tables, then query (SQL).";

struct server {
	FILE *out;
	int allow_eval;
	int initialized;
};

/* ---- messages ------------------------------------------------------------ */

static int send_msg(struct server *s, cJSON *msg)
{
	char *text = cJSON_PrintUnformatted(msg);
	int rc = 0;

	cJSON_Delete(msg);
	if (!text)
		return 0; /* no memory: that answer is lost, not the server */
	if (fputs(text, s->out) < 0 || fputc('\n', s->out) < 0 ||
	    fflush(s->out))
		rc = -1;
	free(text);
	return rc;
}

static cJSON *reply(const cJSON *id)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddStringToObject(m, "jsonrpc", "2.0");
	cJSON_AddItemToObject(m, "id",
			      id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
	return m;
}

static int send_result(struct server *s, const cJSON *id, cJSON *result)
{
	cJSON *m = reply(id);

	cJSON_AddItemToObject(m, "result", result);
	return send_msg(s, m);
}

static int send_error(struct server *s, const cJSON *id, int code,
		      const char *message)
{
	cJSON *m = reply(id), *e = cJSON_AddObjectToObject(m, "error");

	cJSON_AddNumberToObject(e, "code", code);
	cJSON_AddStringToObject(e, "message", message);
	return send_msg(s, m);
}

/* ---- initialize ---------------------------------------------------------- */

static cJSON *initialize(const cJSON *params)
{
	const cJSON *want =
		cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	const char *version = versions[0];
	cJSON *r = cJSON_CreateObject(), *caps, *info;

	for (int i = 0; versions[i] && cJSON_IsString(want); i++)
		if (!strcmp(versions[i], want->valuestring))
			version = versions[i];
	cJSON_AddStringToObject(r, "protocolVersion", version);
	caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"),
			      "listChanged", 0);
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "resources"),
			      "listChanged", 0);
	info = cJSON_AddObjectToObject(r, "serverInfo");
	cJSON_AddStringToObject(info, "name", "probing");
	cJSON_AddStringToObject(info, "title", "Probing");
	cJSON_AddStringToObject(info, "version", PROBING_VERSION);
	cJSON_AddStringToObject(r, "instructions", instructions);
	return r;
}

/* ---- tools --------------------------------------------------------------- */

static int offered(const struct server *s, const struct op *op)
{
	return !(op->flags & OP_EVAL) || s->allow_eval;
}

static cJSON *tools_list(const struct server *s)
{
	cJSON *r = cJSON_CreateObject(), *tools, *t, *ann;

	tools = cJSON_AddArrayToObject(r, "tools");
	for (const struct op *op = ops_all; op->name; op++) {
		if (!offered(s, op))
			continue;
		t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "name", op->name);
		cJSON_AddStringToObject(t, "title", op->title);
		cJSON_AddStringToObject(t, "description", op->doc);
		cJSON_AddItemToObject(t, "inputSchema", ops_schema(op));
		ann = cJSON_AddObjectToObject(t, "annotations");
		cJSON_AddBoolToObject(ann, "readOnlyHint",
				      !(op->flags & OP_EVAL));
		cJSON_AddBoolToObject(ann, "openWorldHint", 0);
		cJSON_AddItemToArray(tools, t);
	}
	return r;
}

static cJSON *tool_result(const char *text, int is_error)
{
	cJSON *r = cJSON_CreateObject(), *content, *c;

	content = cJSON_AddArrayToObject(r, "content");
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "type", "text");
	cJSON_AddStringToObject(c, "text", text);
	cJSON_AddItemToArray(content, c);
	cJSON_AddBoolToObject(r, "isError", is_error);
	return r;
}

static int tools_call(struct server *s, const cJSON *id, const cJSON *params)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *args =
		cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const struct op *op;
	struct op_result r;
	char err[1024] = "", msg[1200];

	if (!cJSON_IsString(name))
		return send_error(s, id, E_PARAMS, "tools/call needs a name");
	op = ops_find(name->valuestring);
	if (!op || !offered(s, op)) {
		snprintf(msg, sizeof(msg), "no tool '%s'%s", name->valuestring,
			 op ? " (eval needs `probing mcp --allow-eval`)" : "");
		return send_error(s, id, E_PARAMS, msg);
	}
	if (cJSON_IsNull(args))
		args = NULL;
	if (ops_run(op, args, &r, err, sizeof(err)))
		return send_result(s, id, tool_result(err, 1));
	if (!*r.text && r.ok)
		snprintf(err, sizeof(err), "(nothing)");
	else if (!*r.text)
		snprintf(err, sizeof(err), "failed (exit code %d)", r.status);
	send_result(s, id, tool_result(*r.text ? r.text : err, !r.ok));
	ops_result_free(&r);
	return 0;
}

/* ---- resources ----------------------------------------------------------- */

static const char *row_str(const cJSON *row, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static double row_num(const cJSON *row, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int row_int(const cJSON *row, const char *key)
{
	return (int)row_num(row, key);
}

static void add_resource(cJSON *list, const char *uri, const char *name,
			 const char *title, const char *desc)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddStringToObject(r, "uri", uri);
	cJSON_AddStringToObject(r, "name", name);
	cJSON_AddStringToObject(r, "title", title);
	cJSON_AddStringToObject(r, "description", desc);
	cJSON_AddStringToObject(r, "mimeType", "text/plain");
	cJSON_AddItemToArray(list, r);
}

static void list_crash_reports(cJSON *list)
{
	cJSON *runs = ops_run_json("list_recordings", NULL), *row;
	int n = cJSON_GetArraySize(runs), skip = n - REPORTS_MAX;
	char uri[1200], title[300];

	cJSON_ArrayForEach(row, runs)
	{
		const char *report = row_str(row, "report");

		if (skip-- > 0 || !*report || access(report, R_OK))
			continue;
		snprintf(uri, sizeof(uri), "file://%s", report);
		snprintf(title, sizeof(title), "How pid %s ended: %s",
			 row_str(row, "pid"), row_str(row, "how"));
		add_resource(list, uri, strrchr(report, '/') + 1, title,
			     "the crash report of a process that died (its "
			     "stacks, Python and native)");
	}
	cJSON_Delete(runs);
}

static void list_hangs(cJSON *list)
{
	cJSON *agents = ops_run_json("list_agents", NULL), *a, *hangs, *h;
	char uri[200], name[100], title[300];

	cJSON_ArrayForEach(a, agents)
	{
		cJSON *args = cJSON_CreateObject();
		const char *pid = row_str(a, "pid");

		cJSON_AddStringToObject(args, "target", pid);
		cJSON_AddStringToObject(args, "sql",
					"SELECT id, seconds, func, file, "
					"lineno, resumed IS NULL AS stuck FROM "
					"process.hangs ORDER BY id");
		hangs = ops_run_json("query", args);
		cJSON_ArrayForEach(h, hangs)
		{
			const cJSON *id = cJSON_GetObjectItem(h, "id");

			if (!cJSON_IsNumber(id))
				continue;
			snprintf(uri, sizeof(uri), "probing://hang/%s/%d", pid,
				 id->valueint);
			snprintf(name, sizeof(name), "hang %d of pid %s",
				 id->valueint, pid);
			snprintf(title, sizeof(title),
				 "pid %s stuck in %s (%s:%d) for %.0f s%s", pid,
				 row_str(h, "func"), row_str(h, "file"),
				 row_int(h, "lineno"), row_num(h, "seconds"),
				 row_int(h, "stuck") ? ", still" : "");
			add_resource(list, uri, name, title,
				     "what the hang watchdog recorded: every "
				     "thread's stacks when the main thread "
				     "stopped moving");
		}
		cJSON_Delete(hangs);
	}
	cJSON_Delete(agents);
}

static cJSON *resources_list(void)
{
	cJSON *r = cJSON_CreateObject(), *list;

	list = cJSON_AddArrayToObject(r, "resources");
	list_crash_reports(list);
	list_hangs(list);
	return r;
}

static int resources_read(struct server *s, const cJSON *id,
			  const cJSON *params)
{
	const cJSON *uri = cJSON_GetObjectItemCaseSensitive(params, "uri");
	cJSON *args = cJSON_CreateObject(), *res, *contents, *c;
	const struct op *op;
	struct op_result r;
	char err[1024], pid[32], real[PATH_MAX];
	int hang;

	if (!cJSON_IsString(uri)) {
		cJSON_Delete(args);
		return send_error(s, id, E_PARAMS,
				  "resources/read needs a uri");
	}
	if (!strncmp(uri->valuestring, "file://", 7) &&
	    !ops_report_served(uri->valuestring + 7, real, sizeof(real), err,
			       sizeof(err))) {
		/* Only reports the door lists (ops.h), never a path that
		 * merely looks like one. */
		op = ops_find("report");
		cJSON_AddStringToObject(args, "file", real);
	} else if (sscanf(uri->valuestring, "probing://hang/%31[0-9]/%d", pid,
			  &hang) == 2 &&
		   hang > 0) {
		op = ops_find("hangs");
		cJSON_AddStringToObject(args, "target", pid);
		cJSON_AddNumberToObject(args, "id", hang);
	} else {
		cJSON_Delete(args);
		return send_error(s, id, E_NO_RESOURCE, "Resource not found");
	}
	if (ops_run(op, args, &r, err, sizeof(err))) {
		cJSON_Delete(args);
		return send_error(s, id, E_INTERNAL, err);
	}
	cJSON_Delete(args);
	if (!r.ok) {
		int rc = send_error(s, id, E_NO_RESOURCE, r.text);

		ops_result_free(&r);
		return rc;
	}
	res = cJSON_CreateObject();
	contents = cJSON_AddArrayToObject(res, "contents");
	c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "uri", uri->valuestring);
	cJSON_AddStringToObject(c, "mimeType", "text/plain");
	cJSON_AddStringToObject(c, "text", r.text);
	cJSON_AddItemToArray(contents, c);
	ops_result_free(&r);
	return send_result(s, id, res);
}

/* ---- the loop ------------------------------------------------------------ */

static int handle(struct server *s, const cJSON *m)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(m, "method");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(m, "params");
	const char *name;

	if (!cJSON_IsObject(m))
		return send_error(s, NULL, E_REQUEST,
				  "not a JSON-RPC message (batches are not "
				  "part of MCP)");
	if (!cJSON_IsString(method))
		return 0; /* a response to us: we send no requests */
	name = method->valuestring;
	if (!id) /* a notification: initialized, cancelled, ... */
		return 0;
	if (!cJSON_IsString(id) && !cJSON_IsNumber(id))
		return send_error(s, NULL, E_REQUEST,
				  "the id is not a string "
				  "or a number");
	if (!strcmp(name, "initialize")) {
		s->initialized = 1;
		return send_result(s, id, initialize(params));
	}
	if (!strcmp(name, "ping"))
		return send_result(s, id, cJSON_CreateObject());
	if (!s->initialized)
		return send_error(s, id, E_REQUEST, "initialize first");
	if (!strcmp(name, "tools/list"))
		return send_result(s, id, tools_list(s));
	if (!strcmp(name, "tools/call"))
		return tools_call(s, id, params);
	if (!strcmp(name, "resources/list"))
		return send_result(s, id, resources_list());
	if (!strcmp(name, "resources/templates/list")) {
		cJSON *r = cJSON_CreateObject();

		cJSON_AddArrayToObject(r, "resourceTemplates");
		return send_result(s, id, r);
	}
	if (!strcmp(name, "resources/read"))
		return resources_read(s, id, params);
	return send_error(s, id, E_METHOD, "method not found");
}

int mcp_serve(FILE *in, FILE *out, int allow_eval)
{
	struct server s = {.out = out, .allow_eval = allow_eval};
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	while (!rc && (n = getline(&line, &cap, in)) >= 0) {
		cJSON *m;

		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (!n)
			continue;
		m = cJSON_ParseWithLength(line, (size_t)n);
		if (!m)
			rc = send_error(&s, NULL, E_PARSE, "parse error");
		else
			rc = handle(&s, m);
		cJSON_Delete(m);
	}
	free(line);
	return rc;
}
