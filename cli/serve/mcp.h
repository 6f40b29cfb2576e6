/*
 * mcp: `probing mcp`, the Model Context Protocol over stdio.
 *
 * JSON-RPC 2.0, one message per line (MCP's stdio transport), revisions
 * 2024-11-05 to 2025-11-25 (the newest one a client asks for that this
 * knows; else the newest).  What it offers:
 *
 *   tools      the ops of ops.h (backtrace, query, describe_tables,
 *              memory, flamegraph, cluster_hang, diagnose, ...); eval
 *              only when
 *              allow_eval.  A tool's failure (the agent's error, a bad
 *              argument) is a result with isError, its text the reason.
 *   resources  crash and hang reports: every recording's crash report
 *              (file://PATH) and every hang a live agent recorded
 *              (probing://hang/PID/ID), read as `probing report` shows
 *              them.
 *
 * Requests are answered one at a time, in order.  Nothing but protocol
 * goes to out; what is said to a person goes to stderr.
 */
#ifndef CLI_MCP_H
#define CLI_MCP_H

#include <stdio.h>

/* Serves in until it ends.  Returns 0, or -1 when out could not be
 * written. */
int mcp_serve(FILE *in, FILE *out, int allow_eval);

#endif
