/*
 * server_session: a connection's input and output queue.  See
 * server_session.h.
 */
#include "server_session.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "dap_frame.h"
#include "dap_msg.h"
#include "server_auth.h"
#include "server_intern.h"
#include "server_request.h"

#define READ_CHUNK 65536

struct outbuf {
	struct outbuf *next;
	size_t len, off;
	char data[];
};

/* ---- output ----------------------------------------------------------- */

static void flush_output(struct session *s)
{
	/* A number the program reused gets nothing of ours. */
	if (s->out_head && !fdown_ours(&s->sock)) {
		server_session_lost(s);
		return;
	}
	while (s->out_head) {
		struct outbuf *b = s->out_head;
		ssize_t n = send(s->sock.fd, b->data + b->off,
				 b->len - b->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(server_loop(s->srv), &s->wr);
				return;
			}
			server_session_close(s);
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
	ev_io_stop(server_loop(s->srv), &s->wr);
	if (s->refused && !s->lingering)
		server_auth_linger(s);
	else if (s->closing && s->inflight == 0)
		server_session_close(s);
}

/* Queues text (len bytes; taken) and sends what the socket takes now. */
static void queue(struct session *s, char *text, size_t len)
{
	struct outbuf *b;

	if (s->out_bytes + len > SERVER_OUTPUT_MAX) {
		/* A client that does not read is dropped, not buffered for. */
		log_warn("session %llu: output queue full, closing",
			 (unsigned long long)s->id);
		free(text);
		server_session_close(s);
		return;
	}
	b = malloc(sizeof(*b) + len);
	if (!b) {
		free(text);
		server_session_close(s);
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

/*
 * The reply to a request whose response could not be encoded (cJSON out of
 * memory: an address-space limit): a failure built without cJSON, so that
 * the client is answered instead of left waiting or cut off.  NULL when
 * even this does not fit in memory.  The command goes in only when it is
 * a plain name (no JSON escaping needed).
 */
static char *oom_response(int64_t seq, const struct dap_message *msg,
			  size_t *len)
{
	static const char why[] = "out of memory in the target (its address "
				  "space limit?) writing the reply";
	char body[256 + DAP_COMMAND_MAX], hdr[48], *text;
	const char *cmd = msg->command;
	int n, h;

	for (const char *c = cmd; *c; c++)
		if (!(*c == '_' || *c == '/' || *c == '-' || *c == '.' ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9')))
			cmd = "";
	n = snprintf(body, sizeof(body),
		     "{\"seq\":%lld,\"type\":\"response\",\"request_seq\":%lld,"
		     "\"success\":false,\"command\":\"%s\",\"message\":\"%s\"}",
		     (long long)seq, (long long)msg->request_seq, cmd, why);
	if (n < 0 || (size_t)n >= sizeof(body))
		return NULL;
	h = dap_frame_header(hdr, sizeof(hdr), (size_t)n);
	if (h < 0 || !(text = malloc((size_t)h + (size_t)n + 1)))
		return NULL;
	memcpy(text, hdr, (size_t)h);
	memcpy(text + h, body, (size_t)n + 1);
	*len = (size_t)h + (size_t)n;
	return text;
}

void server_session_send(struct session *s, struct dap_message *msg)
{
	char *text;
	size_t len;

	if (s->closed) {
		dap_message_free(msg);
		return;
	}
	text = dap_message_encode(msg, ++s->seq, &len);
	if (!text && msg->type == DAP_RESPONSE)
		text = oom_response(s->seq, msg, &len);
	dap_message_free(msg);
	if (!text) {
		/* An event lost would leave the client's view wrong (a
		 * stop it never heard of): better no session. */
		server_session_close(s);
		return;
	}
	queue(s, text, len);
}

/* A browser or curl at the port: one line of plain HTTP that says what
 * this is, then the session ends as a refused one does.  Nothing is
 * logged where the program would see it. */
static void answer_http(struct session *s)
{
	static const char body[] =
		"This is a Probing agent's port: it speaks the Debug Adapter "
		"Protocol, not HTTP.\n"
		"Connect with the probing command (probing -t HOST:PORT "
		"backtrace, ... query, ... repl)\n"
		"or VS Code's \"Attach to probing\" with this host and "
		"port.\n";
	char *text = malloc(sizeof(body) + 160);
	int n;

	log_debug("session %llu: an HTTP request, answered so",
		  (unsigned long long)s->id);
	s->refused = 1;
	if (!text) {
		server_session_close(s);
		return;
	}
	n = snprintf(text, sizeof(body) + 160,
		     "HTTP/1.0 400 Bad Request\r\n"
		     "Content-Type: text/plain; charset=utf-8\r\n"
		     "Content-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s",
		     sizeof(body) - 1, body);
	queue(s, text, (size_t)n);
	if (!s->closed && !s->out_head && !s->lingering)
		server_auth_linger(s);
}

static void on_writable(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop, (void)revents;
	flush_output(w->data);
}

/* ---- input ------------------------------------------------------------ */

/* At end of input: has the peer shut both ways (closed), not only its
 * sending side?  Known on a unix socket; a TCP peer's close reads as a
 * half-close until a write fails. */
static int peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = 0};

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

static void on_readable(struct ev_loop *loop, ev_io *w, int revents)
{
	struct session *s = w->data;
	char buf[READ_CHUNK];
	ssize_t n;
	int rc;

	(void)loop;
	/* Not ours any more: reading would take the program's data. */
	if ((revents & EV_ERROR) || !fdown_ours(&s->sock)) {
		server_session_lost(s);
		return;
	}
	n = recv(s->sock.fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (s->refused) {
		/* Dropped unread; the end of it (or the timer) closes. */
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN &&
			       errno != EWOULDBLOCK))
			server_session_close(s);
		return;
	}
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		server_session_close(s);
		return;
	}
	if (n == 0) {
		/* A client that is gone altogether (it closed the socket or
		 * exited: both ways shut, POLLHUP on a unix socket) reads no
		 * answer: its requests are cancelled as for a lost
		 * connection, and its place goes at once, not when a request
		 * that may never end does. */
		if (peer_gone(s->sock.fd)) {
			server_session_close(s);
			return;
		}
		/* The client is done sending (it may have half-closed, as
		 * `printf ... | probing dap` does): answer what is in flight,
		 * then close. */
		ev_io_stop(server_loop(s->srv), &s->rd);
		s->closing = 1;
		if (!s->out_head && s->inflight == 0)
			server_session_close(s);
		return;
	}
	if (s->in_bytes == 0 && dap_frame_is_http(buf, (size_t)n)) {
		answer_http(s);
		return;
	}
	s->in_bytes += (uint64_t)n;
	rc = dap_framer_feed(&s->framer, buf, (size_t)n);
	for (;;) {
		char *body;
		size_t len;
		int got = rc ? rc : dap_framer_next(&s->framer, &body, &len);
		if (got == 0)
			break;
		if (got < 0) {
			/* The stream cannot be followed any more: the
			 * client's error, not the program's business. */
			log_info("session %llu: %s, closing",
				 (unsigned long long)s->id, dap_strerror(got));
			server_session_close(s);
			return;
		}
		server_request_handle(s, body, len);
		free(body);
		if (s->closed || s->closing || s->refused)
			return;
	}
}

/* ---- lifetime --------------------------------------------------------- */

struct session *server_session_find(struct server *srv, uint64_t id)
{
	for (int i = 0; i < srv->nsessions; i++)
		if (srv->sessions[i]->id == id && !srv->sessions[i]->closed)
			return srv->sessions[i];
	return NULL;
}

void server_session_lost(struct session *s)
{
	fdown_forget(&s->sock);
	server_session_close(s);
}

void server_session_close(struct session *s)
{
	if (s->closed)
		return;
	s->closed = 1;
	ev_io_stop(server_loop(s->srv), &s->rd);
	ev_io_stop(server_loop(s->srv), &s->wr);
	ev_timer_stop(server_loop(s->srv), &s->auth_timer);
	fdown_close(&s->sock);
	/* In-flight requests find no session and drop their replies; a
	 * running evaluate is interrupted. */
	server_request_cancel_session(s->srv, s->id);
	/* Whatever a session owned (a debugger's pause, breakpoints) is let
	 * go now, however the session ended. */
	for (int i = 0; i < s->srv->nclose_hooks; i++)
		s->srv->close_hooks[i](s->id);
}

void server_session_free(struct session *s)
{
	struct outbuf *b, *next;

	for (b = s->out_head; b; b = next) {
		next = b->next;
		free(b);
	}
	dap_framer_release(&s->framer);
	free(s);
}

void server_session_reap(struct server *srv)
{
	for (int i = 0; i < srv->nsessions;) {
		if (srv->sessions[i]->closed) {
			server_session_free(srv->sessions[i]);
			srv->sessions[i] = srv->sessions[--srv->nsessions];
		} else {
			i++;
		}
	}
}

int server_session_count(struct server *srv, int *local, int *tcp, int *pending)
{
	int n[3] = {0, 0, 0};

	for (int i = 0; i < srv->nsessions; i++) {
		const struct session *s = srv->sessions[i];

		if (!s->closed)
			n[s->local ? 0 : s->authed ? 1 : 2]++;
	}
	if (local)
		*local = n[0];
	if (tcp)
		*tcp = n[1];
	if (pending)
		*pending = n[2];
	return srv->nsessions;
}

struct session *server_session_oldest_pending(struct server *srv)
{
	struct session *old = NULL;

	for (int i = 0; i < srv->nsessions; i++) {
		struct session *s = srv->sessions[i];

		if (!s->closed && !s->local && !s->authed &&
		    (!old || s->id < old->id))
			old = s;
	}
	return old;
}

void server_session_send_all(struct server *srv, struct dap_message *msg)
{
	for (int i = 0; i < srv->nsessions; i++) {
		struct session *s = srv->sessions[i];
		struct dap_message *copy;

		if (s->closed || !s->authed)
			continue;
		copy = dap_message_copy(msg);
		if (copy)
			server_session_send(s, copy);
	}
	dap_message_free(msg);
}

void server_session_check_fds(struct server *srv)
{
	for (int i = 0; i < srv->nsessions; i++)
		if (!srv->sessions[i]->closed &&
		    !fdown_ours(&srv->sessions[i]->sock))
			server_session_lost(srv->sessions[i]);
}

void server_session_free_all(struct server *srv)
{
	for (int i = 0; i < srv->nsessions; i++) {
		server_session_close(srv->sessions[i]);
		server_session_free(srv->sessions[i]);
	}
	srv->nsessions = 0;
}

void server_session_atfork_child(struct server *srv)
{
	for (int i = 0; i < srv->nsessions; i++)
		fdown_close(&srv->sessions[i]->sock);
}

int server_on_close(struct server *srv, server_close_fn fn)
{
	if (srv->nclose_hooks >= SERVER_CLOSE_HOOKS_MAX)
		return -ENOSPC;
	srv->close_hooks[srv->nclose_hooks++] = fn;
	return 0;
}

struct session *server_session_new(struct server *srv, struct fdown *sock,
				   int local, int authed)
{
	struct session *s;
	int fd;

	s = calloc(1, sizeof(*s));
	if (!s) {
		fdown_close(sock);
		return NULL;
	}
	s->sock = *sock;
	fdown_forget(sock);
	fd = s->sock.fd;
	s->id = ++srv->next_session;
	s->srv = srv;
	s->authed = authed;
	s->local = local;
	/* Until the token is given, little is buffered and not for long
	 * (server_auth.h). */
	dap_framer_init(&s->framer, s->authed ? 0 : SERVER_AUTH_MESSAGE_MAX);
	ev_io_init(&s->rd, on_readable, fd, EV_READ);
	ev_io_init(&s->wr, on_writable, fd, EV_WRITE);
	s->rd.data = s->wr.data = s;
	ev_io_start(server_loop(srv), &s->rd);
	server_auth_init(s);
	srv->sessions[srv->nsessions++] = s;
	return s;
}
