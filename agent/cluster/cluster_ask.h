/*
 * cluster_ask: one DAP request to another rank's agent, for the `global`
 * schema (queries across the job, global.h).
 *
 * Connects over TCP, sends `initialize` (with the token, when this agent
 * has one: the ranks of a job share it) and the request, and waits for
 * the request's response; events are skipped.  The socket is owned
 * (core/fdown.h) and checked before every send and read, so a program
 * that closes descriptors under the agent never gets agent bytes on a
 * file of its own.  Everything is bounded by one deadline (name
 * resolution excepted: addresses here are the ones ranks registered).
 *
 * Threads: any; no globals.
 */
#ifndef CLUSTER_ASK_H
#define CLUSTER_ASK_H

#include <stddef.h>

#include "cJSON.h"

/*
 * Sends command with args (taken over, may be NULL) to the agent at addr
 * ("host:port") and waits at most timeout_ms in all.  Returns 0 with the
 * response body in *body (caller deletes; may be NULL) and *success; or a
 * negative error with err (the response's message when success is
 * false is in err too).
 */
int cluster_ask(const char *addr, const char *token, const char *command,
		cJSON *args, int timeout_ms, cJSON **body, int *success,
		char *err, size_t errlen);

#endif
