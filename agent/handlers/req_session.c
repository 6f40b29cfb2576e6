/*
 * req_session: initialize, disconnect, cancel.
 */
#include "cpython/pycompat.h"
#include <unistd.h>

#include "core/agent.h"
#include "cpython/cpython.h"
#include "server/handler.h"
#include "server/server.h"

/* The debugger's (req_debug.c, req_variables.c, req_evaluate.c). */
static void add_debugger_capabilities(cJSON *body)
{
	static const struct {
		const char *filter, *label, *description;
		int dflt;
	} filters[] = {
		{"raised", "Raised Exceptions",
		 "Stop where any exception is raised (not StopIteration "
		 "or GeneratorExit).", 0},
		{"uncaught", "Uncaught Exceptions",
		 "Stop when an exception is about to end a thread or the "
		 "program.", 1},
	};
	static const char *const yes[] = {
		"supportsConfigurationDoneRequest",
		"supportsFunctionBreakpoints",
		"supportsConditionalBreakpoints",
		"supportsHitConditionalBreakpoints",
		"supportsLogPoints",
		"supportsEvaluateForHovers",
		"supportsSetVariable",
		"supportsCompletionsRequest",
		"supportsExceptionInfoRequest",
		"supportsDelayedStackTraceLoading",
	};
	static const char *const no[] = {
		"supportsStepBack", "supportsRestartFrame",
		"supportsGotoTargetsRequest", "supportsStepInTargetsRequest",
		"supportsModulesRequest", "supportsRestartRequest",
		"supportsExceptionOptions", "supportsValueFormattingOptions",
		"supportTerminateDebuggee", "supportSuspendDebuggee",
		"supportsSetExpression", "supportsDataBreakpoints",
		"supportsReadMemoryRequest", "supportsSteppingGranularity",
		"supportsInstructionBreakpoints",
		"supportsExceptionFilterOptions",
	};
	cJSON *arr, *f, *trig;

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cJSON_AddBoolToObject(body, yes[i], 1);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cJSON_AddBoolToObject(body, no[i], 0);
	trig = cJSON_AddArrayToObject(body, "completionTriggerCharacters");
	if (trig)
		cJSON_AddItemToArray(trig, cJSON_CreateString("."));
	arr = cJSON_AddArrayToObject(body, "exceptionBreakpointFilters");
	for (size_t i = 0; arr && i < sizeof(filters) / sizeof(filters[0]);
	     i++) {
		f = cJSON_CreateObject();
		if (!f)
			return;
		cJSON_AddStringToObject(f, "filter", filters[i].filter);
		cJSON_AddStringToObject(f, "label", filters[i].label);
		cJSON_AddStringToObject(f, "description",
					filters[i].description);
		cJSON_AddBoolToObject(f, "default", filters[i].dflt);
		cJSON_AddItemToArray(arr, f);
	}
}

static void run_initialize(struct request *req)
{
	cJSON *body = request_ok(req), *info;
	char exe[512], pyver[256];
	ssize_t n;

	if (!body)
		return;
	/* Honest capabilities: only what this agent implements. */
	cJSON_AddBoolToObject(body, "supportsCancelRequest", 1);
	cJSON_AddBoolToObject(body, "supportsTerminateRequest", 0);
	add_debugger_capabilities(body);
	info = cJSON_AddObjectToObject(body, "probing");
	if (!info)
		return;
	cJSON_AddStringToObject(info, "version", PROBING_VERSION);
	cJSON_AddNumberToObject(info, "pid", getpid());
	cpython.version_text(pyver, sizeof(pyver));
	cJSON_AddStringToObject(info, "python", pyver);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	cJSON_AddStringToObject(info, "executable", exe);
}

const struct handler handler_initialize = {
	.command = "initialize",
	.flags = HANDLER_OPENS,
	.run = run_initialize,
};

static void run_disconnect(struct request *req)
{
	request_ok(req);
	req->close_after = 1;
}

const struct handler handler_disconnect = {
	.command = "disconnect",
	.run = run_disconnect,
};

static void run_cancel(struct request *req)
{
	char err[128];
	int64_t id = -1;

	if (dap_arg_int(req->args, "requestId", &id, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	/* DAP: cancelling something that already finished is not an error. */
	if (id >= 0)
		server_cancel(server_current(), req->session, id);
	request_ok(req);
}

const struct handler handler_cancel = {
	.command = "cancel",
	.run = run_cancel,
};
