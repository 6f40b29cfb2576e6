/*
 * tracereq: probing/trace's work over a store — the agent's own, or a
 * recording's (cli/recorded.c) — from the request's arguments to the
 * response's body: what the agent recorded in a time window, as one
 * Chrome Trace Event (Perfetto) JSON document.  Arguments and body:
 * docs/protocol.md; what is in it: docs/trace.md.
 *
 *   process   the program (process_name), a track per thread (thread_name)
 *   spans     "X" events on the thread that ran them: torch module stages
 *             and optimizer steps (python.torch_trace), a span per traced
 *             step around them, synchronous collectives
 *             (python.comm_collective); nested per track (a span that
 *             would cross the end of the one around it is cut there, its
 *             measured time kept in args.ms)
 *   async     "b"/"e" pairs: asynchronous collectives, which overlap
 *   samples   "i" events (thread scope) of profile.samples, every state
 *   counters  "C" events: process.memory (MB), gpu.utilization
 *   hangs     "i" events (process scope) of process.hangs
 *
 * A table the store does not have (a recording without torch, a store of
 * before a column) is left out and said in body.notes.  Times are
 * microseconds from the window's start, which otherData.startTime gives
 * in Unix seconds (cluster_chrome.h joins ranks' traces by it).
 *
 * Caps: TRACEREQ_SPANS_MAX spans and collectives, the flamegraph's
 * samples, TRACEREQ_OUTPUT_MAX bytes of output: past them, -E2BIG and a
 * message (take a shorter window).
 */
#ifndef TRACEREQ_H
#define TRACEREQ_H

#include <stddef.h>

#include <cJSON.h>

#include "flamereq.h"

#define TRACEREQ_SPANS_MAX 200000
/* Escaped into a DAP message of at most 16 MiB (dap_msg.h): a JSON
 * string of it is up to twice as long where names are all quotes. */
#define TRACEREQ_OUTPUT_MAX (8u << 20)
#define TRACEREQ_WINDOW_MAX (30 * 86400) /* seconds */

/* Fills body ({since, until, events, spans, samples, counters, notes,
 * data}); env as probing/flamegraph's (since: the window's start when
 * none is asked for).  0, or -EINVAL / -E2BIG / -ENOMEM / STORE_ESQL with
 * err (a sentence for the user). */
int tracereq_answer(struct store *st, const cJSON *args,
		    const struct flamereq_env *env, cJSON *body, char *err,
		    size_t errlen);

#endif
