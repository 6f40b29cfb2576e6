/*
 * server: the agent's DAP server on a private libev loop.
 *
 * Listens on the abstract unix socket @probing-<pid> (peers must have our
 * uid or be root: SO_PEERCRED) and on TCP addresses when asked, only with
 * a token (auth.h: auth_token_ensure() makes one first), loopback too
 * unless the user chose none (auth_tokenless(): loopback only).  A session
 * accepted on TCP (but for that choice) must present it in its first request (initialize or attach,
 * arguments.probingToken); until then it gets no events, its messages are
 * capped at SERVER_AUTH_MESSAGE_MAX, and it is closed after
 * SERVER_AUTH_TIMEOUT_S; anything else, or a wrong token, is answered with
 * error DAP_ERROR_AUTH and the connection closed once that is sent (what
 * the client sends after it is read and dropped until it closes, for at
 * most SERVER_LINGER_S).
 * How many at once: sessions on the unix socket (the target's user and
 * root) are always served, up to SERVER_LOCAL_MAX, whatever TCP clients
 * do; TCP sessions that may make requests, server.max_clients; TCP
 * sessions that still owe the token, SERVER_PENDING_MAX, a new one
 * closing the oldest when they are all taken (a client that has the
 * token gives it in its first message, so it is never the oldest for
 * long).  A session refused for want of room is told why when it can be
 * (an error response to its first request), else closed.
 * Requests read-only mode refuses (readonly.h) get DAP_ERROR_READONLY.
 * Each connection is a session: non-blocking
 * socket, a dap_framer on input, a bounded output queue.  Requests are
 * dispatched to handlers (handler.h): quick ones inline on the loop,
 * blocking ones on the worker pool; the loop itself never blocks, never
 * takes the GIL.  A session is never freed inside its own callback: it is
 * marked closed and reaped before the loop next sleeps.
 *
 * Threads: server_run() on the agent thread; server_listen() and
 * server_stop() from any thread.
 */
#ifndef SERVER_H
#define SERVER_H

#include <stddef.h>
#include <stdint.h>

#define SERVER_TCP_MAX 1024    /* server.max_clients' ceiling */
#define SERVER_PENDING_MAX 8   /* TCP sessions that owe the token */
#define SERVER_LOCAL_MAX 64    /* sessions on the unix socket */
#define SERVER_LISTENERS_MAX 8
/* Every session at once; closed ones wait until the loop next sleeps,
 * at most one a listener meanwhile. */
#define SERVER_SESSIONS_MAX                                                \
	(SERVER_TCP_MAX + SERVER_PENDING_MAX + SERVER_LOCAL_MAX +           \
	 SERVER_LISTENERS_MAX)
#define SERVER_INFLIGHT_MAX 32          /* requests in flight per session */
#define SERVER_OUTPUT_MAX (64u << 20)   /* queued output bytes per session */
#define SERVER_AUTH_MESSAGE_MAX 65536   /* message cap before the token */
#define SERVER_AUTH_TIMEOUT_S 10        /* to present the token */
#define SERVER_LINGER_S 2               /* after a refusal, before closing */

struct server;
struct ev_loop;
struct dap_message;

#define SERVER_CLOSE_HOOKS_MAX 8

/* Called on the loop thread when a session ends, however it ends
 * (disconnect, dropped connection, agent stop). */
typedef void (*server_close_fn)(uint64_t session);

/* Creates the loop (never the default loop) and binds the unix socket of
 * this pid.  Returns 0, -EADDRINUSE when another agent of this process
 * already listens there, or -errno with err. */
int server_new(struct server **out, char *err, size_t errlen);

/* Frees what the server owns; the loop must have stopped. */
void server_free(struct server *srv);

/*
 * Binds a TCP (or unix) listener for text and hands it to the loop.
 * Returns 0 (also when already listening there) with the canonical
 * address in canon, or -errno / -EPERM (no token could be had) with err.
 * On failure, a server.listen setting that names text is emptied: the
 * setting shows only an address listened on (why is in err, which the
 * caller logs or answers).
 */
int server_listen(struct server *srv, const char *text, char *canon,
		  size_t canonlen, char *err, size_t errlen);

/* Stops listening on canon (an address server_listen() gave back): it
 * leaves the addresses now, its socket closes on the loop.  Sessions
 * accepted there stay.  0, or -ENOENT when not listening there. */
int server_unlisten(struct server *srv, const char *canon);

/* The server's private loop (for the worker pool's wake-up). */
struct ev_loop *server_loop(struct server *srv);

/* Runs the loop until server_stop().  Agent thread. */
void server_run(struct server *srv);

/* Asks the loop to end (safe from atexit: wake_send). */
void server_stop(struct server *srv);

/* Loop thread: interrupts the in-flight request `seq` of session. Returns
 * 0 or -ENOENT. */
int server_cancel(struct server *srv, uint64_t session, int64_t seq);

/*
 * Sends an event to one session (session > 0) or to every session (0),
 * from any thread: queued (at most 4096 waiting) and delivered by the loop.
 * Takes ownership of ev.  Returns 0, -EAGAIN (queue full or stopping: the
 * event is dropped) or -EINVAL.
 */
int server_post_event(struct server *srv, uint64_t session,
		      struct dap_message *ev);

/* Registers a close hook.  Loop thread (or before server_run). */
int server_on_close(struct server *srv, server_close_fn fn);

/* The server the agent runs (for handlers on the loop). */
struct server *server_current(void);

/* Comma-separated addresses it listens on. */
void server_addresses(struct server *srv, char *out, size_t outlen);

/* In a forked child: close the parent's sockets (they belong to the
 * parent's agent) without freeing anything. Async-signal-safe. */
void server_atfork_child(struct server *srv);

#endif
