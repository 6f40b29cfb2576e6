/*
 * cluster: what the `probing cluster` subcommands share (cmd_cluster.c
 * holds the command, cluster_fg.c its flamegraph).
 */
#ifndef CLI_CLUSTER_H
#define CLI_CLUSTER_H

#include <stddef.h>

#include "cmd.h"
#include "fanout.h"

#define CLUSTER_NODE_TIMEOUT_MS 5000 /* per node, unless --timeout */

struct cluster_opts {
	const char *nodes_file; /* --nodes FILE, or NULL: ask the target */
	int node_timeout_ms;
};

/*
 * Reports the nodes that failed (a line each on stderr, "rank R (ADDR):
 * why") and a summary when some did; ok[i] says which answered (CLI_OK and
 * success).  what names the request for the summary.  Returns CLI_OK when
 * all answered, the common exit code when all failed the same way, else
 * CLI_EPARTIAL.
 */
int cluster_report(const struct fanout_node *nodes, size_t n,
		   const struct fanout_result *res, const int *ok,
		   const char *what);

/* `probing cluster flamegraph` (cluster_fg.c): argv from "flamegraph". */
int cluster_flamegraph(struct cmd_ctx *ctx, const struct cluster_opts *o,
		       const struct fanout_node *nodes, size_t n, int argc,
		       char **argv);

#endif
