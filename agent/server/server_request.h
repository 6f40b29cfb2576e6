/*
 * server_request: a session's messages to handlers and back.
 *
 * Each message a session reads is parsed (bad JSON or a message that is
 * not a request gets an error answer; the framing is intact, so the
 * session goes on), put through the token gate (server_auth.h) when the
 * session is not authed yet, then checked by read-only mode (readonly.h:
 * DAP_ERROR_READONLY) and dispatched to its handler (handler.h): quick
 * ones run inline on the loop, blocking ones go to the worker pool (at
 * most SERVER_INFLIGHT_MAX per session) and are answered when done.  A
 * request whose session has closed meanwhile is dropped unanswered.
 *
 * Code may never end (an evaluate with no timeout, blocked in C), and a
 * request stays on its worker while it runs.  So requests that run code
 * in the target (HANDLER_RUNS_CODE) hold at most SERVER_CODE_MAX of the
 * WORKER_THREADS workers at once, SERVER_CODE_SESSION_MAX of them for one
 * session: the others are always there for queries, backtraces and
 * settings.  One more such request waits for a place at most
 * python.gil_timeout_ms (quick ones, such as an editor's watches, take
 * turns) and is then refused with a message that names the requests
 * holding the places and says what to do; a `cancel` or the end of its
 * session drops it at once.
 *
 * Threads: the loop thread only (handlers on workers run through
 * worker.h, and their completion comes back to the loop).
 */
#ifndef SERVER_REQUEST_H
#define SERVER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#define SERVER_CODE_MAX 2	    /* requests running code, in all */
#define SERVER_CODE_SESSION_MAX 1 /* ... and of one session */

struct server;
struct session;

/* Handles one framed message body of s (not kept). */
void server_request_handle(struct session *s, const char *body, size_t len);

/* Marks every in-flight request of session id cancelled (its session is
 * closing: a running evaluate is interrupted, the answer dropped). */
void server_request_cancel_session(struct server *srv, uint64_t id);

/* Is any request of srv still on a worker (server_free then leaves the
 * loop to the exiting process)? */
int server_request_any(struct server *srv);

#endif
