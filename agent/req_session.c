/*
 * req_session: initialize, disconnect, cancel.
 */
#include <Python.h>
#include <unistd.h>

#include "agent.h"
#include "handler.h"
#include "server.h"

static void run_initialize(struct request *req)
{
	cJSON *body = request_ok(req), *info;
	char exe[512];
	ssize_t n;

	if (!body)
		return;
	/* Honest capabilities: only what this agent implements. */
	cJSON_AddBoolToObject(body, "supportsCancelRequest", 1);
	cJSON_AddBoolToObject(body, "supportsConfigurationDoneRequest", 0);
	cJSON_AddBoolToObject(body, "supportsEvaluateForHovers", 0);
	cJSON_AddBoolToObject(body, "supportsTerminateRequest", 0);
	info = cJSON_AddObjectToObject(body, "probing");
	if (!info)
		return;
	cJSON_AddStringToObject(info, "version", PROBING_VERSION);
	cJSON_AddNumberToObject(info, "pid", getpid());
	/* Py_GetVersion() reads a static string: no GIL needed. */
	cJSON_AddStringToObject(info, "python", Py_GetVersion());
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	cJSON_AddStringToObject(info, "executable", exe);
}

const struct handler handler_initialize = {
	.command = "initialize",
	.where = HANDLER_LOOP,
	.run = run_initialize,
};

static void run_disconnect(struct request *req)
{
	request_ok(req);
	req->close_after = 1;
}

const struct handler handler_disconnect = {
	.command = "disconnect",
	.where = HANDLER_LOOP,
	.run = run_disconnect,
};

static void run_cancel(struct request *req)
{
	char err[128];
	int64_t id = -1;

	if (dap_arg_int(req->args, "requestId", &id, err, sizeof(err)) < 0) {
		request_fail(req, 1, "%s", err);
		return;
	}
	/* DAP: cancelling something that already finished is not an error. */
	if (id >= 0)
		server_cancel(server_current(), req->session, id);
	request_ok(req);
}

const struct handler handler_cancel = {
	.command = "cancel",
	.where = HANDLER_LOOP,
	.run = run_cancel,
};
