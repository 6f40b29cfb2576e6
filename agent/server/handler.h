/*
 * handler: one DAP request family per agent/handlers/req_*.c file, each
 * exporting const struct handler entries (tmux cmd_entry style);
 * dispatch.c lists them.
 *
 * A handler turns the request's JSON arguments into typed values at its
 * edge, does the work through the agent's modules (which know nothing of
 * JSON), and builds the response with request_ok()/request_fail().
 *
 * Where it runs follows from its flags (handler_on_worker()): on a worker
 * thread when it takes the GIL or may otherwise block for a bounded time
 * (HANDLER_GIL, HANDLER_BLOCKS: SQLite, joining a thread), else on the
 * server's loop thread, where it must be quick.  Exactly one response is
 * produced: if run() sets none, the server replies with an internal
 * error.
 *
 * What it may do to the target is declared, not found out: the flags
 * below (redis's CMD_* flags on its command table).  The server reads
 * them before run() is called — the token gate (HANDLER_OPENS), read-only
 * mode (HANDLER_RUNS_CODE, HANDLER_STOPS: refused with
 * DAP_ERROR_READONLY), the debug session (HANDLER_DEBUGGER) — so that no
 * list of command names exists anywhere else.  A request whose effect
 * depends on its arguments (probing/debug's action) gives policy(), which
 * returns the flags of that one request.
 */
#ifndef HANDLER_H
#define HANDLER_H

#include <ev.h>
#include <stdint.h>
#include <cJSON.h>

#include "dap_msg.h"
#include "worker.h"

enum handler_flags {
	/* May be a session's first request, carrying its token. */
	HANDLER_OPENS = 1 << 0,
	/* Runs Python code of the client's choosing in the target
	 * (evaluate, completions' attribute reads, setVariable). */
	HANDLER_RUNS_CODE = 1 << 1,
	/* May stop the target's threads, or arms what will (attach,
	 * breakpoints, pause, steps). */
	HANDLER_STOPS = 1 << 2,
	/* Needs this session to be the attached debugger. */
	HANDLER_DEBUGGER = 1 << 3,
	/* Takes the GIL (through pygil, with a deadline): runs on a
	 * worker. */
	HANDLER_GIL = 1 << 4,
	/* May block for a bounded time otherwise (SQLite, joining a
	 * thread, waiting for a flush): runs on a worker. */
	HANDLER_BLOCKS = 1 << 5,
};

struct request;

struct handler {
	const char *command;
	unsigned flags;                      /* enum handler_flags */
	/* The flags of one request, from its arguments; NULL: flags. */
	unsigned (*policy)(const cJSON *args);
	void (*run)(struct request *req);
};

struct request {
	struct worker_job job;        /* private to the server */
	uint64_t session;             /* the asking session's id */
	struct dap_message *msg;      /* the request (owned by the server) */
	const cJSON *args;            /* msg->arguments or an empty object */
	const struct handler *handler;
	struct dap_message *resp;     /* set through request_ok/request_fail */
	volatile int cancel;          /* set by a `cancel` request */
	int close_after;              /* close the session once sent */
	/* Private to the server (server_request.c): */
	struct request *next;
	int runs_code;                /* HANDLER_RUNS_CODE, this request */
	int waiting;                  /* for a place to run code */
	ev_tstamp since;              /* dispatched, then handed to a worker */
	ev_timer wait_timer;          /* how long it may wait for a place */
	void *trim_token;             /* memtrim_arena_token() of the worker */
};

/* Starts a success response; returns its body to fill (never NULL unless
 * out of memory, in which case the server sends an internal error). */
cJSON *request_ok(struct request *req);

/* An error response with a formatted message (id: DAP error id, 0 for
 * none).  Replaces a response set before. */
void request_fail(struct request *req, int id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Looks up a handler by command; NULL when unknown. */
const struct handler *handler_find(const char *command);

/* The flags of request args for handler h (h->policy, else h->flags). */
unsigned handler_flags_of(const struct handler *h, const cJSON *args);

/* Does h run on a worker thread (HANDLER_GIL or HANDLER_BLOCKS in its
 * flags), rather than on the loop thread?  One that also runs code
 * (HANDLER_RUNS_CODE) takes one of the few places for code first
 * (server_request.h: SERVER_CODE_MAX). */
int handler_on_worker(const struct handler *h);

/* The handlers (one family per file). */
extern const struct handler handler_initialize, handler_disconnect,
	handler_cancel, handler_threads, handler_stack_trace,
	handler_evaluate, handler_backtrace, handler_query, handler_config;

/* The profiler (req_profile.c). */
extern const struct handler handler_profile, handler_flamegraph,
	handler_trace, handler_metrics;

/* The debugger (req_debug.c, req_variables.c). */
extern const struct handler handler_attach, handler_configuration_done,
	handler_set_breakpoints, handler_set_function_breakpoints,
	handler_set_exception_breakpoints, handler_pause, handler_continue,
	handler_next, handler_step_in, handler_step_out,
	handler_exception_info, handler_scopes, handler_variables,
	handler_set_variable, handler_completions, handler_probing_debug;

/* Memory (req_memory.c). */
extern const struct handler handler_memory;

/* Distributed jobs (req_cluster.c). */
extern const struct handler handler_cluster;

#endif
