/*
 * server: listeners, sessions and request dispatch.  See server.h.
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ev.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "auth.h"
#include "dap_addr.h"
#include "dap_frame.h"
#include "dap_msg.h"
#include "dap_token.h"
#include "handler.h"
#include "log.h"
#include "readonly.h"
#include "worker.h"

#define READ_CHUNK 65536

struct outbuf {
	struct outbuf *next;
	size_t len, off;
	char data[];
};

struct session {
	uint64_t id;
	int fd;
	ev_io rd, wr;
	struct dap_framer framer;
	struct outbuf *out_head, *out_tail;
	size_t out_bytes;
	int64_t seq;              /* our outgoing message numbers */
	int inflight;
	int closing;              /* flush output, then close */
	int closed;               /* waiting to be reaped */
	int authed;               /* may make requests (see session_auth) */
	int refused;              /* told so: reply, then linger and close */
	int lingering;            /* the reply is out: draining input */
	ev_timer auth_timer;      /* the time left to give the token, or to
				     linger */
	struct server *srv;
};

struct listener {
	int fd;
	int is_unix;
	ev_io io;
	char addr[DAP_ADDR_TEXT_MAX];
};

struct pending_listener {
	int fd;
	int is_unix;
	char addr[DAP_ADDR_TEXT_MAX];
};

struct posted_event {
	struct posted_event *next;
	uint64_t session;          /* 0: every session */
	struct dap_message *msg;
};

#define POSTED_EVENTS_MAX 4096

struct server {
	struct ev_loop *loop;
	ev_async wake;            /* new listeners, posted events, stop */
	ev_prepare reaper;        /* frees closed sessions */
	struct listener listeners[SERVER_LISTENERS_MAX];
	int nlisteners;
	struct session *sessions[SERVER_CLIENTS_MAX];
	int nsessions;
	uint64_t next_session;
	struct request *inflight; /* every request handed to a worker */
	pthread_mutex_t lock;     /* pending[], stop_requested, addresses */
	struct pending_listener pending[SERVER_LISTENERS_MAX];
	int npending;
	int stop_requested;
	struct posted_event *events_head, *events_tail;  /* under lock */
	int nevents;
	server_close_fn close_hooks[SERVER_CLOSE_HOOKS_MAX];  /* loop thread */
	int nclose_hooks;
	char addresses[SERVER_LISTENERS_MAX][DAP_ADDR_TEXT_MAX];
	int naddresses;
};

static struct server *current_server;

static void session_close(struct session *s);
static void session_send(struct session *s, struct dap_message *msg);
static void session_linger(struct session *s);

struct server *server_current(void)
{
	return current_server;
}

/* ---- sockets ---------------------------------------------------------- */

static int bind_unix(const struct dap_addr *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, rc;

	rc = dap_addr_unix_sockaddr(addr, &ss, &len);
	if (rc) {
		snprintf(err, errlen, "unix address too long: %s", addr->host);
		return rc;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return rc;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 16) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s: %s", addr->host,
			 strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return 0;
}

static int bind_tcp(const struct dap_addr *addr, char *canon, size_t canonlen,
		    char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char port[16], why[512];
	int fd = -1, rc, one = 1, token = 0;

	snprintf(port, sizeof(port), "%d", addr->port);
	rc = getaddrinfo(addr->host, port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve %s: %s", addr->host,
			 gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	snprintf(err, errlen, "no address for %s", addr->host);
	for (ai = res; ai; ai = ai->ai_next) {
		if (!is_loopback(ai->ai_addr) && !token) {
			/* Other machines may connect: only with the token,
			 * which must exist before the first of them. */
			if (auth_token_ensure(why, sizeof(why))) {
				snprintf(err, errlen,
					 "refusing to listen on %s (not "
					 "loopback) without a token: %s",
					 addr->host, why);
				rc = -EPERM;
				continue;
			}
			token = 1;
		}
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 16) == 0)
			break;
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s:%d: %s", addr->host,
			 addr->port, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return rc;
	dap_addr_format(addr, canon, canonlen);
	return fd;
}

/* ---- output ----------------------------------------------------------- */

static void flush_output(struct session *s)
{
	while (s->out_head) {
		struct outbuf *b = s->out_head;
		ssize_t n = send(s->fd, b->data + b->off, b->len - b->off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(s->srv->loop, &s->wr);
				return;
			}
			session_close(s);
			return;
		}
		b->off += (size_t)n;
		s->out_bytes -= (size_t)n;
		if (b->off < b->len)
			continue;
		s->out_head = b->next;
		if (!s->out_head)
			s->out_tail = NULL;
		free(b);
	}
	ev_io_stop(s->srv->loop, &s->wr);
	if (s->refused && !s->lingering)
		session_linger(s);
	else if (s->closing && s->inflight == 0)
		session_close(s);
}

/* Queues an encoded message; takes ownership of msg. */
static void session_send(struct session *s, struct dap_message *msg)
{
	struct outbuf *b;
	char *text;
	size_t len;

	if (s->closed) {
		dap_message_free(msg);
		return;
	}
	text = dap_message_encode(msg, ++s->seq, &len);
	dap_message_free(msg);
	if (!text) {
		session_close(s);
		return;
	}
	if (s->out_bytes + len > SERVER_OUTPUT_MAX) {
		/* A client that does not read is dropped, not buffered for. */
		log_warn("session %llu: output queue full, closing",
			 (unsigned long long)s->id);
		free(text);
		session_close(s);
		return;
	}
	b = malloc(sizeof(*b) + len);
	if (!b) {
		free(text);
		session_close(s);
		return;
	}
	memcpy(b->data, text, len);
	free(text);
	b->len = len;
	b->off = 0;
	b->next = NULL;
	if (s->out_tail)
		s->out_tail->next = b;
	else
		s->out_head = b;
	s->out_tail = b;
	s->out_bytes += len;
	if (s->out_head == b)
		flush_output(s);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop, (void)revents;
	flush_output(w->data);
}

/* ---- requests --------------------------------------------------------- */

static struct session *session_find(struct server *srv, uint64_t id)
{
	for (int i = 0; i < srv->nsessions; i++)
		if (srv->sessions[i]->id == id && !srv->sessions[i]->closed)
			return srv->sessions[i];
	return NULL;
}

static void request_free(struct request *req)
{
	dap_message_free(req->msg);
	dap_message_free(req->resp);
	free(req);
}

/* Sends req's response (or an internal error) and frees req. */
static void request_finish(struct server *srv, struct request *req)
{
	struct session *s = session_find(srv, req->session);

	if (s) {
		if (!req->resp)
			request_fail(req, 1, "internal error: %s produced no "
				     "response", req->msg->command);
		if (req->resp) {
			session_send(s, req->resp);
			req->resp = NULL;
		} else {
			session_close(s);
		}
		if (req->close_after)
			s->closing = 1;
		if (s->closing && !s->closed && !s->out_head &&
		    s->inflight == 0)
			session_close(s);
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
	struct server *srv = current_server;
	struct request **pp;
	struct session *s;

	for (pp = &srv->inflight; *pp; pp = &(*pp)->next) {
		if (*pp == req) {
			*pp = req->next;
			break;
		}
	}
	s = session_find(srv, req->session);
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

/*
 * The refusal is out: FIN after it, then read and drop what the client
 * still sends until it closes or SERVER_LINGER_S pass.  Closing with
 * unread input would send a reset, which may destroy the reply in the
 * client's buffer before it is read.
 */
static void session_linger(struct session *s)
{
	s->lingering = 1;
	shutdown(s->fd, SHUT_WR);
	ev_timer_stop(s->srv->loop, &s->auth_timer);
	ev_timer_set(&s->auth_timer, SERVER_LINGER_S, 0.);
	ev_timer_start(s->srv->loop, &s->auth_timer);
}

/* Answers an unauthenticated session with an error; it is closed once
 * the answer is out (session_linger).  Nothing it sends is read any
 * more. */
static void auth_refuse(struct session *s, int64_t seq, const char *command,
			const char *why)
{
	log_info("session %llu: refused: %s", (unsigned long long)s->id, why);
	s->refused = 1;
	session_send(s, dap_error_new(seq, command, DAP_ERROR_AUTH, "%s",
				      why));
	if (!s->closed && !s->out_head && !s->lingering)
		session_linger(s);
}

/*
 * The first request of a session that must present the token: initialize
 * or attach with the right arguments.probingToken.  Returns 1 when the
 * session may go on (msg is then dispatched), else 0 (msg freed, the
 * session closing).
 */
static int session_auth(struct session *s, struct dap_message *msg)
{
	const cJSON *t = msg->arguments ? cJSON_GetObjectItemCaseSensitive(
						  msg->arguments, DAP_TOKEN_ARG)
					: NULL;
	const char *why = NULL;

	if (msg->type != DAP_REQUEST || (strcmp(msg->command, "initialize") &&
					 strcmp(msg->command, "attach")))
		why = "this agent needs a token: the first request must be "
		      "initialize (or attach) with arguments." DAP_TOKEN_ARG;
	else if (!cJSON_IsString(t))
		why = "this agent needs a token: none was given (give it "
		      "in arguments." DAP_TOKEN_ARG "; probing: --token or "
		      "PROBING_TOKEN)";
	else if (!auth_check(t->valuestring))
		why = "wrong token: the agent refused it";
	if (!why) {
		s->authed = 1;
		ev_timer_stop(s->srv->loop, &s->auth_timer);
		s->framer.max_body = DAP_MESSAGE_MAX;
		return 1;
	}
	auth_refuse(s, msg->type == DAP_REQUEST ? msg->seq : 0,
		    msg->type == DAP_REQUEST ? msg->command : "", why);
	dap_message_free(msg);
	return 0;
}

static void dispatch(struct session *s, struct dap_message *msg)
{
	struct server *srv = s->srv;
	const struct handler *h;
	struct request *req;
	char why[512];

	if (!s->authed && !session_auth(s, msg))
		return;
	if (msg->type != DAP_REQUEST) {
		/* Clients send requests only; ignore stray responses. */
		dap_message_free(msg);
		return;
	}
	h = handler_find(msg->command);
	if (!h) {
		session_send(s, dap_error_new(msg->seq, msg->command, 1,
					      "unknown request '%s'",
					      msg->command));
		dap_message_free(msg);
		return;
	}
	req = calloc(1, sizeof(*req));
	if (!req) {
		dap_message_free(msg);
		session_close(s);
		return;
	}
	req->session = s->id;
	req->msg = msg;
	req->handler = h;
	req->args = msg->arguments ? msg->arguments : &empty_args;
	if (readonly_check(msg->command, msg->arguments, why, sizeof(why))) {
		request_fail(req, DAP_ERROR_READONLY, "%s", why);
		request_finish(srv, req);
		return;
	}
	if (h->where == HANDLER_LOOP) {
		h->run(req);
		request_finish(srv, req);
		return;
	}
	if (s->inflight >= SERVER_INFLIGHT_MAX) {
		request_fail(req, 1, "too many requests in flight (max %d)",
			     SERVER_INFLIGHT_MAX);
		request_finish(srv, req);
		return;
	}
	req->job.run = job_run;
	req->job.done = job_done;
	int rc = worker_submit(&req->job);
	if (rc) {
		request_fail(req, 1, "agent busy: %s", rc == -EAGAIN
			     ? "request queue full" : "shutting down");
		request_finish(srv, req);
		return;
	}
	s->inflight++;
	req->next = srv->inflight;
	srv->inflight = req;
}

static void handle_message(struct session *s, const char *body, size_t len)
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
		auth_refuse(s, seq < 0 ? 0 : seq, cmd, "this agent needs a "
			    "token: the first request must be initialize "
			    "with arguments." DAP_TOKEN_ARG);
		return;
	}
	/* Bad JSON or not a DAP request: answer, keep the connection (the
	 * framing is intact). */
	session_send(s, dap_error_new(seq < 0 ? 0 : seq, cmd[0] ? cmd : "",
				      1, "%s", err));
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct session *s = w->data;
	char buf[READ_CHUNK];
	ssize_t n;
	int rc;

	(void)loop, (void)revents;
	n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (s->refused) {
		/* Dropped unread; the end of it (or the timer) closes. */
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN &&
			       errno != EWOULDBLOCK))
			session_close(s);
		return;
	}
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		session_close(s);
		return;
	}
	if (n == 0) {
		/* The client is done sending (it may have half-closed, as
		 * `printf ... | probing dap` does): answer what is in flight,
		 * then close. */
		ev_io_stop(s->srv->loop, &s->rd);
		s->closing = 1;
		if (!s->out_head && s->inflight == 0)
			session_close(s);
		return;
	}
	rc = dap_framer_feed(&s->framer, buf, (size_t)n);
	for (;;) {
		char *body;
		size_t len;
		int got = rc ? rc : dap_framer_next(&s->framer, &body, &len);
		if (got == 0)
			break;
		if (got < 0) {
			/* The stream cannot be followed any more. */
			log_warn("session %llu: %s, closing",
				 (unsigned long long)s->id, dap_strerror(got));
			session_close(s);
			return;
		}
		handle_message(s, body, len);
		free(body);
		if (s->closed || s->closing || s->refused)
			return;
	}
}

/* ---- sessions --------------------------------------------------------- */

static void session_close(struct session *s)
{
	if (s->closed)
		return;
	s->closed = 1;
	ev_io_stop(s->srv->loop, &s->rd);
	ev_io_stop(s->srv->loop, &s->wr);
	ev_timer_stop(s->srv->loop, &s->auth_timer);
	close(s->fd);
	s->fd = -1;
	/* In-flight requests find no session and drop their replies; a
	 * running evaluate is interrupted. */
	for (struct request *r = s->srv->inflight; r; r = r->next)
		if (r->session == s->id)
			r->cancel = 1;
	/* Whatever a session owned (a debugger's pause, breakpoints) is let
	 * go now, however the session ended. */
	for (int i = 0; i < s->srv->nclose_hooks; i++)
		s->srv->close_hooks[i](s->id);
}

static void session_free(struct session *s)
{
	struct outbuf *b, *next;

	for (b = s->out_head; b; b = next) {
		next = b->next;
		free(b);
	}
	dap_framer_release(&s->framer);
	free(s);
}

static void on_reap(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct server *srv = w->data;

	(void)loop, (void)revents;
	for (int i = 0; i < srv->nsessions;) {
		if (srv->sessions[i]->closed) {
			session_free(srv->sessions[i]);
			srv->sessions[i] = srv->sessions[--srv->nsessions];
		} else {
			i++;
		}
	}
}

static int peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return 0;
	return cred.uid == geteuid() || cred.uid == 0;
}

static void on_auth_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct session *s = w->data;

	(void)loop, (void)revents;
	if (!s->refused)
		log_info("session %llu: no token within %d s, closing",
			 (unsigned long long)s->id, SERVER_AUTH_TIMEOUT_S);
	session_close(s);
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct listener *l = w->data;
	struct server *srv = current_server;
	struct session *s;
	int fd, one = 1;

	(void)revents;
	fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (l->is_unix && !peer_allowed(fd)) {
		log_warn("refused a client of another user on %s", l->addr);
		close(fd);
		return;
	}
	if (srv->nsessions >= SERVER_CLIENTS_MAX) {
		log_warn("refused a client: %d connected already",
			 SERVER_CLIENTS_MAX);
		close(fd);
		return;
	}
	if (!l->is_unix)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return;
	}
	s->id = ++srv->next_session;
	s->fd = fd;
	s->srv = srv;
	/* Decided once, now: a TCP client needs the token when the agent
	 * has one.  Until it is given, little is buffered and not for long. */
	s->authed = l->is_unix || !auth_token();
	dap_framer_init(&s->framer, s->authed ? 0 : SERVER_AUTH_MESSAGE_MAX);
	ev_io_init(&s->rd, on_readable, fd, EV_READ);
	ev_io_init(&s->wr, on_writable, fd, EV_WRITE);
	ev_timer_init(&s->auth_timer, on_auth_timeout,
		      SERVER_AUTH_TIMEOUT_S, 0.);
	s->rd.data = s->wr.data = s->auth_timer.data = s;
	ev_io_start(loop, &s->rd);
	if (!s->authed)
		ev_timer_start(loop, &s->auth_timer);
	srv->sessions[srv->nsessions++] = s;
}

/* ---- listeners -------------------------------------------------------- */

static void add_listener(struct server *srv, int fd, int is_unix,
			 const char *addr)
{
	struct listener *l;

	if (srv->nlisteners >= SERVER_LISTENERS_MAX) {
		close(fd);
		return;
	}
	l = &srv->listeners[srv->nlisteners++];
	l->fd = fd;
	l->is_unix = is_unix;
	snprintf(l->addr, sizeof(l->addr), "%s", addr);
	ev_io_init(&l->io, on_accept, fd, EV_READ);
	l->io.data = l;
	ev_io_start(srv->loop, &l->io);
}

static void deliver_events(struct server *srv, struct posted_event *ev)
{
	struct posted_event *next;

	for (; ev; ev = next) {
		next = ev->next;
		for (int i = 0; i < srv->nsessions; i++) {
			struct session *s = srv->sessions[i];
			if (s->closed || !s->authed ||
			    (ev->session && ev->session != s->id))
				continue;
			struct dap_message *copy = ev->session
				? ev->msg : dap_message_copy(ev->msg);
			if (copy)
				session_send(s, copy);
			if (ev->session)
				ev->msg = NULL;  /* sent: session_send took it */
		}
		dap_message_free(ev->msg);
		free(ev);
	}
}

static void on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	struct server *srv = w->data;
	struct pending_listener p[SERVER_LISTENERS_MAX];
	struct posted_event *events;
	int n, stop;

	(void)revents;
	pthread_mutex_lock(&srv->lock);
	n = srv->npending;
	memcpy(p, srv->pending, sizeof(p[0]) * (size_t)n);
	srv->npending = 0;
	stop = srv->stop_requested;
	events = srv->events_head;
	srv->events_head = srv->events_tail = NULL;
	srv->nevents = 0;
	pthread_mutex_unlock(&srv->lock);
	for (int i = 0; i < n; i++)
		add_listener(srv, p[i].fd, p[i].is_unix, p[i].addr);
	deliver_events(srv, events);
	if (stop)
		ev_break(loop, EVBREAK_ALL);
}

static int note_address(struct server *srv, const char *canon)
{
	for (int i = 0; i < srv->naddresses; i++)
		if (strcmp(srv->addresses[i], canon) == 0)
			return 1;
	if (srv->naddresses < SERVER_LISTENERS_MAX)
		snprintf(srv->addresses[srv->naddresses++], DAP_ADDR_TEXT_MAX,
			 "%s", canon);
	return 0;
}

int server_listen(struct server *srv, const char *text, char *canon,
		  size_t canonlen, char *err, size_t errlen)
{
	struct dap_addr addr;
	char c[DAP_ADDR_TEXT_MAX];
	int fd, rc;

	rc = dap_addr_parse(text, &addr, err, errlen);
	if (rc)
		return rc;
	dap_addr_format(&addr, c, sizeof(c));
	pthread_mutex_lock(&srv->lock);
	for (int i = 0; i < srv->naddresses; i++) {
		if (strcmp(srv->addresses[i], c) == 0) {
			pthread_mutex_unlock(&srv->lock);
			snprintf(canon, canonlen, "%s", c);
			return 0;  /* already there: starting twice is a no-op */
		}
	}
	if (srv->naddresses >= SERVER_LISTENERS_MAX) {
		pthread_mutex_unlock(&srv->lock);
		snprintf(err, errlen, "too many listeners (max %d)",
			 SERVER_LISTENERS_MAX);
		return -ENOSPC;
	}
	pthread_mutex_unlock(&srv->lock);

	if (addr.kind == DAP_ADDR_UNIX)
		fd = bind_unix(&addr, err, errlen);
	else
		fd = bind_tcp(&addr, c, sizeof(c), err, errlen);
	if (fd < 0)
		return fd;

	pthread_mutex_lock(&srv->lock);
	note_address(srv, c);
	struct pending_listener *p = &srv->pending[srv->npending++];
	p->fd = fd;
	p->is_unix = addr.kind == DAP_ADDR_UNIX;
	snprintf(p->addr, sizeof(p->addr), "%s", c);
	pthread_mutex_unlock(&srv->lock);
	ev_async_send(srv->loop, &srv->wake);
	snprintf(canon, canonlen, "%s", c);
	return 0;
}

static void on_syserr(const char *msg)
{
	/* libev's default is abort(); the target comes first. */
	log_warn("libev: %s", msg);
}

int server_new(struct server **out, char *err, size_t errlen)
{
	struct server *srv;
	struct dap_addr addr;
	char canon[DAP_ADDR_TEXT_MAX];
	int fd;

	ev_set_syserr_cb(on_syserr);
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&srv->lock, NULL);
	srv->loop = ev_loop_new(EVFLAG_NOSIGMASK | EVFLAG_NOENV);
	if (!srv->loop) {
		snprintf(err, errlen, "cannot create an event loop");
		free(srv);
		return -ENOMEM;
	}
	dap_addr_for_pid(getpid(), &addr);
	fd = bind_unix(&addr, err, errlen);
	if (fd < 0) {
		ev_loop_destroy(srv->loop);
		free(srv);
		return fd;
	}
	dap_addr_format(&addr, canon, sizeof(canon));
	note_address(srv, canon);
	ev_async_init(&srv->wake, on_wake);
	srv->wake.data = srv;
	ev_async_start(srv->loop, &srv->wake);
	ev_prepare_init(&srv->reaper, on_reap);
	srv->reaper.data = srv;
	ev_prepare_start(srv->loop, &srv->reaper);
	current_server = srv;
	add_listener(srv, fd, 1, canon);
	*out = srv;
	return 0;
}

int server_post_event(struct server *srv, uint64_t session,
		      struct dap_message *ev)
{
	struct posted_event *pe;

	if (!srv || !ev) {
		dap_message_free(ev);
		return -EINVAL;
	}
	pe = calloc(1, sizeof(*pe));
	if (!pe) {
		dap_message_free(ev);
		return -ENOMEM;
	}
	pe->session = session;
	pe->msg = ev;
	pthread_mutex_lock(&srv->lock);
	if (srv->stop_requested || srv->nevents >= POSTED_EVENTS_MAX) {
		pthread_mutex_unlock(&srv->lock);
		dap_message_free(ev);
		free(pe);
		return -EAGAIN;
	}
	if (srv->events_tail)
		srv->events_tail->next = pe;
	else
		srv->events_head = pe;
	srv->events_tail = pe;
	srv->nevents++;
	pthread_mutex_unlock(&srv->lock);
	ev_async_send(srv->loop, &srv->wake);
	return 0;
}

int server_on_close(struct server *srv, server_close_fn fn)
{
	if (srv->nclose_hooks >= SERVER_CLOSE_HOOKS_MAX)
		return -ENOSPC;
	srv->close_hooks[srv->nclose_hooks++] = fn;
	return 0;
}

struct ev_loop *server_loop(struct server *srv)
{
	return srv->loop;
}

void server_run(struct server *srv)
{
	ev_run(srv->loop, 0);
}

void server_stop(struct server *srv)
{
	pthread_mutex_lock(&srv->lock);
	srv->stop_requested = 1;
	pthread_mutex_unlock(&srv->lock);
	ev_async_send(srv->loop, &srv->wake);
}

void server_addresses(struct server *srv, char *out, size_t outlen)
{
	size_t n = 0;

	out[0] = 0;
	pthread_mutex_lock(&srv->lock);
	for (int i = 0; i < srv->naddresses && n < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%s%s",
				      i ? "," : "", srv->addresses[i]);
	pthread_mutex_unlock(&srv->lock);
}

void server_free(struct server *srv)
{
	if (!srv)
		return;
	for (int i = 0; i < srv->nsessions; i++) {
		session_close(srv->sessions[i]);
		session_free(srv->sessions[i]);
	}
	for (int i = 0; i < srv->nlisteners; i++) {
		ev_io_stop(srv->loop, &srv->listeners[i].io);
		close(srv->listeners[i].fd);
	}
	for (int i = 0; i < srv->npending; i++)
		close(srv->pending[i].fd);
	for (struct posted_event *ev = srv->events_head, *next; ev; ev = next) {
		next = ev->next;
		dap_message_free(ev->msg);
		free(ev);
	}
	srv->events_head = srv->events_tail = NULL;
	/* Requests still on workers keep pointing at their messages: leave
	 * them (and the loop they would wake) to the exiting process. */
	if (!srv->inflight) {
		ev_loop_destroy(srv->loop);
		pthread_mutex_destroy(&srv->lock);
		free(srv);
	}
	if (current_server == srv)
		current_server = NULL;
}

void server_atfork_child(struct server *srv)
{
	if (!srv)
		return;
	for (int i = 0; i < srv->nlisteners; i++)
		close(srv->listeners[i].fd);
	for (int i = 0; i < srv->nsessions; i++)
		if (srv->sessions[i]->fd >= 0)
			close(srv->sessions[i]->fd);
	for (int i = 0; i < srv->npending; i++)
		close(srv->pending[i].fd);
	current_server = NULL;
}
