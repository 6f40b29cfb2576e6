/*
 * dispatch: the table of request handlers.
 */
#include "handler.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct handler *const handlers[] = {
	&handler_initialize, &handler_disconnect, &handler_cancel,
	&handler_threads,    &handler_stack_trace, &handler_evaluate,
	&handler_backtrace,  &handler_query,      &handler_config,
	/* the profiler */
	&handler_profile, &handler_flamegraph, &handler_trace,
	&handler_metrics,
	/* the debugger */
	&handler_attach, &handler_configuration_done, &handler_set_breakpoints,
	&handler_set_function_breakpoints, &handler_set_exception_breakpoints,
	&handler_pause, &handler_continue, &handler_next, &handler_step_in,
	&handler_step_out, &handler_exception_info, &handler_scopes,
	&handler_variables, &handler_set_variable, &handler_completions,
	&handler_probing_debug,
	/* memory */
	&handler_memory,
	/* distributed jobs */
	&handler_cluster,
};

const struct handler *handler_find(const char *command)
{
	for (size_t i = 0; i < sizeof(handlers) / sizeof(handlers[0]); i++)
		if (strcmp(handlers[i]->command, command) == 0)
			return handlers[i];
	return NULL;
}

unsigned handler_flags_of(const struct handler *h, const cJSON *args)
{
	return h->policy ? h->policy(args) : h->flags;
}

int handler_on_worker(const struct handler *h)
{
	return (h->flags & (HANDLER_GIL | HANDLER_BLOCKS)) != 0;
}

cJSON *request_ok(struct request *req)
{
	if (req->resp)
		dap_message_free(req->resp);
	req->resp = dap_response_new(req->msg->seq, req->msg->command, 1, NULL);
	return req->resp ? req->resp->body : NULL;
}

void request_fail(struct request *req, int id, const char *fmt, ...)
{
	char text[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (req->resp)
		dap_message_free(req->resp);
	req->resp = dap_error_new(req->msg->seq, req->msg->command, id, "%s",
				  text);
}
