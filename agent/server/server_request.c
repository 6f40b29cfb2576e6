/*
 * server_request: parsing, the gate, dispatch and answers.  See
 * server_request.h.
 */
#include "server_request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/readonly.h"
#include "debugger/dbgsession.h"
#include "dap_msg.h"
#include "dap_token.h"
#include "memtrim.h"
#include "errbuf.h"
#include "handler.h"
#include "server_auth.h"
#include "server_intern.h"
#include "server_session.h"
#include "worker.h"

static void request_free(struct request *req)
{
	dap_message_free(req->msg);
	dap_message_free(req->resp);
	/* After the response's nodes, made on the worker, are freed. */
	memtrim_arena_release(req->trim_token);
	free(req);
}

/* Sends req's response (or an internal error) and frees req. */
static void request_finish(struct server *srv, struct request *req)
{
	struct session *s = server_session_find(srv, req->session);

	if (s) {
		if (!req->resp)
			request_fail(req, DAP_ERROR_FAILED, "internal error: %s produced no "
				     "response", req->msg->command);
		if (req->resp) {
			server_session_send(s, req->resp);
			req->resp = NULL;
		} else {
			server_session_close(s);
		}
		if (req->close_after)
			s->closing = 1;
		if (s->closing && !s->closed && !s->out_head &&
		    s->inflight == 0)
			server_session_close(s);
	}
	request_free(req);
}

_Static_assert(SERVER_CODE_MAX < WORKER_THREADS,
	       "requests that run code must leave workers to the others");

static void job_run(struct worker_job *job)
{
	struct request *req = (struct request *)job;

	req->handler->run(req);
	/* Work large enough to ask for a trim (memtrim.h): the worker's
	 * arena is shrunk once the response is sent. */
	req->trim_token = memtrim_arena_token();
}

/* req, in flight (on a worker, or waiting for a place), is over: off the
 * list and its session's count. */
static void request_leave(struct server *srv, struct request *req)
{
	struct session *s;

	for (struct request **pp = &srv->inflight; *pp; pp = &(*pp)->next) {
		if (*pp == req) {
			*pp = req->next;
			break;
		}
	}
	if (req->waiting) {
		ev_timer_stop(server_loop(srv), &req->wait_timer);
		req->waiting = 0;
	}
	s = server_session_find(srv, req->session);
	if (s)
		s->inflight--;
}

/* ---- the places for code ------------------------------------------------
 *
 * Requests that run code on workers, counted from the list in flight
 * (those waiting for a place are not); a place is held from the hand-over
 * to a worker until the answer.
 */

static void code_count(struct server *srv, uint64_t session, int *all,
		       int *mine)
{
	*all = *mine = 0;
	for (const struct request *r = srv->inflight; r; r = r->next) {
		if (!r->runs_code || r->waiting)
			continue;
		(*all)++;
		*mine += r->session == session;
	}
}

static int code_room(struct server *srv, uint64_t session)
{
	int all, mine;

	code_count(srv, session, &all, &mine);
	return all < SERVER_CODE_MAX && mine < SERVER_CODE_SESSION_MAX;
}

/* "evaluate 'expr' (session 3, for 42 s)" of r: what holds a place. */
static int describe(const struct request *r, ev_tstamp now, char *buf,
		    size_t len)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(r->args,
							  "expression");
	char text[48] = "";

	/* The client's text, cut; no control characters. */
	if (cJSON_IsString(e))
		errbuf_line(text, sizeof(text), e->valuestring);
	return snprintf(buf, len, "%s%s%s%s (session %llu, for %.0f s)",
			r->msg->command, *text ? " '" : "", text,
			*text ? "'" : "", (unsigned long long)r->session,
			now - r->since);
}

/* Why req, waiting, found no place: which requests hold them. */
static void code_refusal(struct server *srv, const struct request *req,
			 char *why, size_t len)
{
	ev_tstamp now = ev_now(server_loop(srv));
	int all, mine, shown = 0;
	size_t off;

	code_count(srv, req->session, &all, &mine);
	if (mine >= SERVER_CODE_SESSION_MAX)
		off = (size_t)snprintf(why, len,
				       "not run: this session's earlier "
				       "request that runs code has not ended "
				       "(");
	else
		off = (size_t)snprintf(why, len,
				       "not run: %d requests that run code in "
				       "the target have not ended (",
				       all);
	for (const struct request *r = srv->inflight; r && off < len;
	     r = r->next) {
		if (!r->runs_code || r->waiting ||
		    (mine >= SERVER_CODE_SESSION_MAX &&
		     r->session != req->session))
			continue;
		if (shown++)
			off += (size_t)snprintf(why + off, len - off, "; ");
		if (off < len)
			off += (size_t)describe(r, now, why + off, len - off);
	}
	if (off < len)
		snprintf(why + off, len - off,
			 "), and at most %d run at once, %d for a session, so "
			 "that queries, backtraces and settings always find "
			 "the agent free.  Wait for them to end, or cancel "
			 "them (Ctrl-C, a `cancel` request); code blocked in "
			 "C ends only when what it waits for returns",
			 SERVER_CODE_MAX, SERVER_CODE_SESSION_MAX);
}

static void on_wait_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct request *req = w->data;
	struct server *srv = server_current();
	char why[1024];

	(void)loop, (void)revents;
	code_refusal(srv, req, why, sizeof(why));
	request_leave(srv, req);
	request_fail(req, DAP_ERROR_FAILED, "%s", why);
	request_finish(srv, req);
}

/* Hands req to a worker; answers it (and lets it go) when none takes
 * it.  Its session has counted it in flight already. */
static void start(struct server *srv, struct request *req)
{
	int rc;

	req->since = ev_now(server_loop(srv));
	rc = worker_submit(&req->job);
	if (rc) {
		request_leave(srv, req);
		request_fail(req, DAP_ERROR_FAILED, "agent busy: %s",
			     rc == -EAGAIN ? "request queue full"
					   : "shutting down");
		request_finish(srv, req);
	}
}

/* A place may be free: the oldest waiting requests that fit go. */
static void code_promote(struct server *srv)
{
	for (;;) {
		struct request *next = NULL;

		for (struct request *r = srv->inflight; r; r = r->next)
			if (r->waiting && (!next || r->since < next->since) &&
			    code_room(srv, r->session))
				next = r;
		if (!next)
			return;
		ev_timer_stop(server_loop(srv), &next->wait_timer);
		next->waiting = 0;
		start(srv, next);
	}
}

static void job_done(struct worker_job *job)
{
	struct request *req = (struct request *)job;
	struct server *srv = server_current();
	int code = req->runs_code;

	request_leave(srv, req);
	request_finish(srv, req);
	if (code)
		code_promote(srv);
}

int server_cancel(struct server *srv, uint64_t session, int64_t seq)
{
	for (struct request *r = srv->inflight; r; r = r->next) {
		if (r->session != session || r->msg->seq != seq)
			continue;
		r->cancel = 1;
		if (r->waiting) {
			/* Never ran: answered now. */
			request_leave(srv, r);
			request_fail(r, DAP_ERROR_FAILED,
				     "cancelled before it ran (it waited for "
				     "a place to run code)");
			request_finish(srv, r);
		}
		return 0;
	}
	return -ENOENT;
}

static const cJSON empty_args;

static void dispatch(struct session *s, struct dap_message *msg)
{
	struct server *srv = s->srv;
	const struct handler *h;
	struct request *req;
	unsigned flags;
	char why[512];

	if (!s->authed && !server_auth_check(s, msg))
		return;
	if (msg->type != DAP_REQUEST) {
		/* Clients send requests only; ignore stray responses. */
		dap_message_free(msg);
		return;
	}
	h = handler_find(msg->command);
	if (!h) {
		server_session_send(s, dap_error_new(msg->seq, msg->command, DAP_ERROR_FAILED,
					      "unknown request '%s'",
					      msg->command));
		dap_message_free(msg);
		return;
	}
	req = calloc(1, sizeof(*req));
	if (!req) {
		dap_message_free(msg);
		server_session_close(s);
		return;
	}
	req->session = s->id;
	req->msg = msg;
	req->handler = h;
	req->args = msg->arguments ? msg->arguments : &empty_args;
	flags = handler_flags_of(h, req->args);
	if (readonly_refuses(h->command, flags, why, sizeof(why))) {
		request_fail(req, DAP_ERROR_READONLY, "%s", why);
		request_finish(srv, req);
		return;
	}
	if ((flags & HANDLER_DEBUGGER) && !dbgsession_is_attached(s->id)) {
		request_fail(req, DAP_ERROR_FAILED,
			     "'%s' needs a debug session: send 'attach' first",
			     h->command);
		request_finish(srv, req);
		return;
	}
	if (!handler_on_worker(h)) {
		h->run(req);
		request_finish(srv, req);
		return;
	}
	if (s->inflight >= SERVER_INFLIGHT_MAX) {
		request_fail(req, DAP_ERROR_FAILED, "too many requests in flight (max %d)",
			     SERVER_INFLIGHT_MAX);
		request_finish(srv, req);
		return;
	}
	req->job.run = job_run;
	req->job.done = job_done;
	req->runs_code = (flags & HANDLER_RUNS_CODE) != 0;
	req->since = ev_now(server_loop(srv));
	req->waiting = req->runs_code && !code_room(srv, s->id);
	s->inflight++;
	req->next = srv->inflight;
	srv->inflight = req;
	if (req->waiting) {
		double wait = (double)config_int("python.gil_timeout_ms") / 1e3;

		ev_timer_init(&req->wait_timer, on_wait_timeout, wait, 0.);
		req->wait_timer.data = req;
		ev_timer_start(server_loop(srv), &req->wait_timer);
		return;
	}
	start(srv, req);
}

void server_request_handle(struct session *s, const char *body, size_t len)
{
	struct dap_message *msg = NULL;
	char err[256], cmd[DAP_COMMAND_MAX] = "";
	int64_t seq = -1;
	int rc;

	rc = dap_message_parse(body, len, &msg, &seq, cmd, err, sizeof(err));
	if (rc == 0) {
		dispatch(s, msg);
		return;
	}
	if (!s->authed) {
		server_auth_refuse(s, seq < 0 ? 0 : seq, cmd, "this agent needs a "
			    "token: the first request must be initialize "
			    "with arguments." DAP_TOKEN_ARG);
		return;
	}
	/* Bad JSON or not a DAP request: answer, keep the connection (the
	 * framing is intact). */
	server_session_send(s, dap_error_new(seq < 0 ? 0 : seq, cmd[0] ? cmd : "",
				      DAP_ERROR_FAILED, "%s", err));
}

void server_request_cancel_session(struct server *srv, uint64_t id)
{
	struct request *r = srv->inflight, *next;

	for (; r; r = next) {
		next = r->next;
		if (r->session != id)
			continue;
		r->cancel = 1;
		if (r->waiting) {
			/* Never ran: nobody to answer. */
			request_leave(srv, r);
			request_free(r);
		}
	}
}

int server_request_any(struct server *srv)
{
	return srv->inflight != NULL;
}
