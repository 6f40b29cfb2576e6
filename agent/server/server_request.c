/*
 * server_request: parsing, the gate, dispatch and answers.  See
 * server_request.h.
 */
#include "server_request.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/readonly.h"
#include "debugger/dbgsession.h"
#include "dap_msg.h"
#include "dap_token.h"
#include "handler.h"
#include "server_auth.h"
#include "server_intern.h"
#include "server_session.h"
#include "worker.h"

static void request_free(struct request *req)
{
	dap_message_free(req->msg);
	dap_message_free(req->resp);
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

static void job_run(struct worker_job *job)
{
	struct request *req = (struct request *)job;

	req->handler->run(req);
}

static void job_done(struct worker_job *job)
{
	struct request *req = (struct request *)job;
	struct server *srv = server_current();
	struct request **pp;
	struct session *s;

	for (pp = &srv->inflight; *pp; pp = &(*pp)->next) {
		if (*pp == req) {
			*pp = req->next;
			break;
		}
	}
	s = server_session_find(srv, req->session);
	if (s)
		s->inflight--;
	request_finish(srv, req);
}

int server_cancel(struct server *srv, uint64_t session, int64_t seq)
{
	for (struct request *r = srv->inflight; r; r = r->next) {
		if (r->session == session && r->msg->seq == seq) {
			r->cancel = 1;
			return 0;
		}
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
	int rc = worker_submit(&req->job);
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "agent busy: %s", rc == -EAGAIN
			     ? "request queue full" : "shutting down");
		request_finish(srv, req);
		return;
	}
	s->inflight++;
	req->next = srv->inflight;
	srv->inflight = req;
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
	for (struct request *r = srv->inflight; r; r = r->next)
		if (r->session == id)
			r->cancel = 1;
}

int server_request_any(struct server *srv)
{
	return srv->inflight != NULL;
}
