/*
 * dap_client: a blocking DAP client, for the CLI and tests.
 *
 * One connection, one thread.  Requests are numbered from 1.  Events that
 * arrive while waiting for a response go to the event callback (or are
 * dropped when there is none); responses to other requests are dropped.
 *
 * A send that cannot finish within 30 s (the agent stopped reading), a
 * closed connection or a framing error leaves the client failed: every
 * later call returns the same error.  A message that is framed correctly
 * but does not parse is returned as an error (DAP_EJSON, DAP_EDEPTH,
 * DAP_EPROTO) and the client stays usable.
 */
#ifndef DAP_CLIENT_H
#define DAP_CLIENT_H

#include <stdint.h>
#include "dap_addr.h"
#include "dap_msg.h"

struct dap_client;

/* ev is borrowed: valid during the call only. */
typedef void (*dap_event_cb)(const struct dap_message *ev, void *arg);

/* Error codes beyond dap_frame's, all negative. */
enum {
	DAP_ECONNREFUSED = -1100, /* nothing listens at the address */
	DAP_ETIMEDOUT = -1101,    /* no answer in time */
	DAP_ECLOSED = -1102,      /* the agent closed the connection */
	DAP_EPEER = -1103,        /* the socket is not the target's (another
				     process or user holds the name) */
};

/*
 * Connects to addr within timeout_ms (< 0: no limit; name resolution is not
 * bounded).  Returns 0 and a new client in *out, or DAP_ECONNREFUSED (unix:
 * ECONNREFUSED or ENOENT; the message tells a missing process from a
 * process without an agent), DAP_ETIMEDOUT, -EHOSTUNREACH (host name not
 * resolved) or -errno with a message in err.  A unix socket's peer is
 * checked (SO_PEERCRED) before anything is sent: for an address given as
 * a pid it must be that process, else a process of this user (or root);
 * otherwise DAP_EPEER, and nothing was written (no code, no token reaches
 * a socket someone else bound first).
 */
int dap_client_connect(const struct dap_addr *addr, int timeout_ms,
		       struct dap_client **out, char *err, size_t errlen);

void dap_client_free(struct dap_client *c);

void dap_client_on_event(struct dap_client *c, dap_event_cb cb, void *arg);

/* Sends a request without waiting; takes ownership of args (also on
 * failure).  Returns its seq (> 0) or a negative error (-EINVAL for an empty
 * or too long command). */
int64_t dap_client_send(struct dap_client *c, const char *command, cJSON *args,
			char *err, size_t errlen);

/*
 * Waits for the response to seq for at most timeout_ms (< 0: forever).
 * Returns 0 and the response in *resp (caller frees; check ->success), or
 * a negative error with a message in err.
 */
int dap_client_wait(struct dap_client *c, int64_t seq, int timeout_ms,
		    struct dap_message **resp, char *err, size_t errlen);

/* dap_client_send + dap_client_wait. */
int dap_client_request(struct dap_client *c, const char *command, cJSON *args,
		       int timeout_ms, struct dap_message **resp, char *err,
		       size_t errlen);

/* Sends raw bytes (already framed) — for the stdio bridge and fuzz tests.
 * Returns 0 or a negative error. */
int dap_client_write_raw(struct dap_client *c, const char *data, size_t len);

/* The socket, for poll() in the stdio bridge and the REPL. */
int dap_client_fd(const struct dap_client *c);

/*
 * Reads whatever is available (blocking up to timeout_ms) and returns the
 * next whole message in *msg (caller frees), 0 with *msg NULL on timeout,
 * or a negative error.  For the bridge, which forwards every message.
 *
 * Each of msg, raw, rawlen may be NULL.  raw receives the message body (the
 * JSON text without its header) as a NUL-terminated heap copy the caller
 * frees, its length in *rawlen; on timeout *raw is NULL.  With msg NULL the
 * body is not parsed (a bridge that only forwards).  Messages go to the
 * caller, never to the event callback.
 */
int dap_client_read(struct dap_client *c, int timeout_ms,
		    struct dap_message **msg, char **raw, size_t *rawlen,
		    char *err, size_t errlen);

#endif
