/*
 * server_session: one client connection of the server — a non-blocking
 * socket, a dap_framer on input, a bounded output queue.
 *
 * Output: server_session_send() encodes a message and queues it; what the
 * socket does not take now is sent when it becomes writable.  A session
 * whose queue would pass SERVER_OUTPUT_MAX is closed (a client that does
 * not read is dropped, not buffered for).  Input is read in chunks, framed
 * by Content-Length, and each message handed to the request layer
 * (server_request.h); end of input (a half-close) answers what is in
 * flight, then closes; a peer gone both ways (a unix socket's client
 * closed or exited) is closed at once, its requests cancelled.
 *
 * A session is never freed inside its own callback: server_session_close()
 * marks it closed (the socket goes at once, in-flight requests are
 * cancelled, the close hooks run) and server_session_reap() frees it
 * before the loop next sleeps.
 *
 * Threads: the loop thread only.
 */
#ifndef SERVER_SESSION_H
#define SERVER_SESSION_H

#include <ev.h>
#include <stddef.h>
#include <stdint.h>

#include "fdown.h"
#include "dap_frame.h"

struct server;
struct dap_message;
struct outbuf;

struct session {
	uint64_t id;
	struct fdown sock;        /* the connection (fdown.h) */
	ev_io rd, wr;
	struct dap_framer framer;
	struct outbuf *out_head, *out_tail;
	size_t out_bytes;
	int64_t seq;              /* our outgoing message numbers */
	uint64_t in_bytes;        /* received so far */
	int inflight;
	int closing;              /* flush output, then close */
	int closed;               /* waiting to be reaped */
	int authed;               /* may make requests (server_auth.h) */
	int local;                /* on the unix socket */
	int refused;              /* told so: reply, then linger and close */
	int lingering;            /* the reply is out: draining input */
	ev_timer auth_timer;      /* the time left to give the token, or to
				     linger */
	struct server *srv;
};

/* Makes a session of accepted socket *sock (taking it, emptied; closed
 * on failure) and adds it to srv's sessions, which must have room.
 * local: accepted on the unix socket; authed: it may make requests
 * without a token.  Returns it, or NULL out of memory. */
struct session *server_session_new(struct server *srv, struct fdown *sock,
				   int local, int authed);

/* srv's open sessions: on the unix socket, on TCP allowed to make
 * requests, on TCP owing the token (any may be NULL).  Returns how many
 * sessions the table holds, closed ones not reaped yet included. */
int server_session_count(struct server *srv, int *local, int *tcp,
			 int *pending);

/* The oldest open session that owes the token, or NULL. */
struct session *server_session_oldest_pending(struct server *srv);

/* Queues a copy of msg on every open session that may make requests;
 * frees msg. */
void server_session_send_all(struct server *srv, struct dap_message *msg);

/* Closes, as lost, the sessions whose descriptor is not ours any more
 * (the program closed it; fdown.h). */
void server_session_check_fds(struct server *srv);

/* server_free: closes and frees every session. */
void server_session_free_all(struct server *srv);

/* In a forked child: the sessions' descriptors closed (the structures
 * are left to the child's memory). */
void server_session_atfork_child(struct server *srv);

/* Queues an encoded message; takes ownership of msg (freed, unsent, when
 * the session is closed or gets closed for it). */
void server_session_send(struct session *s, struct dap_message *msg);

/* Marks s closed (idempotent); it stays valid until reaped. */
void server_session_close(struct session *s);

/* The same for a session whose descriptor the program closed (and may
 * have reused): closed without touching that number. */
void server_session_lost(struct session *s);

/* The open session of id, or NULL. */
struct session *server_session_find(struct server *srv, uint64_t id);

/* Frees srv's closed sessions. */
void server_session_reap(struct server *srv);

/* Frees s, closed or not, without closing it (server_free, after
 * server_session_close()). */
void server_session_free(struct session *s);

#endif
