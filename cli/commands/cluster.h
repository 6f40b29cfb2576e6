/*
 * cluster: what the `probing cluster` subcommands share.  cmd_cluster.c
 * holds the command (options, the node list, nodes, add, reporting);
 * each other subcommand has its file: cluster_query.c, cluster_bt.c,
 * cluster_fg.c (flamegraph: recording), cluster_trace.c (trace), cluster_fgout.c (its outputs
 * from folded stacks) and cluster_chrome.c (its Chrome trace).  Every
 * subcommand sends one request to all the nodes at once (fanout.h), prints what
 * came back, names the nodes that did not answer on stderr (cluster_report) and
 * returns an exit code: CLI_OK, CLI_EPARTIAL when some nodes failed, or the
 * nodes' common code when all failed alike.
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

/* `probing cluster query` (cluster_query.c).  merge may be NULL;
 * max_rows 0: the agents' default. */
int cluster_query(const struct cluster_opts *o, const struct fanout_node *nodes,
		  size_t n, const char *sql, const char *merge, int max_rows,
		  enum cli_format fmt);

/* `probing cluster backtrace` (cluster_bt.c); lines: stacks that differ
 * in line numbers only are different groups. */
int cluster_backtrace(const struct cluster_opts *o,
		      const struct fanout_node *nodes, size_t n, int lines,
		      enum cli_format fmt);

/* The stacks of probing/backtrace answers res[0..n), grouped and printed
 * as `cluster backtrace` does (with each group's native frames when the
 * answers have them); ok[i] set for the nodes whose stack is in.  lead
 * (NULL: none): lead[i] puts node i's group first (the rank a verdict
 * names).  0 or -ENOMEM. */
int cluster_bt_show(const struct fanout_node *nodes, size_t n,
		    const struct fanout_result *res, int lines,
		    enum cli_format fmt, const int *lead, int *ok);

/* `probing cluster hang` (cluster_hang.c): each rank's last collective,
 * a verdict, then the stacks with native frames. */
int cluster_hang(const struct cluster_opts *o, const struct fanout_node *nodes,
		 size_t n, enum cli_format fmt);

/* Why node result r failed ("no answer", the agent's message, ...). */
const char *cluster_why_failed(const struct fanout_result *r);

/* `probing cluster flamegraph` (cluster_fg.c): argv from "flamegraph". */
int cluster_flamegraph(struct cmd_ctx *ctx, const struct cluster_opts *o,
		       const struct fanout_node *nodes, size_t n, int argc,
		       char **argv);

/* `probing flamegraph --subprocesses` (cmd_flamegraph.c): the n processes
 * (nodes: their pids as addresses) recorded at once, as cluster
 * flamegraph records ranks, and their stacks each under a root frame of
 * its own, labels[i] (no ';' in it).  Folded, SVG or speedscope. */
struct cluster_fg_procs {
	int duration_ms, hz, idle, lines, tasks, top;
	const char *const *labels;
	const char *output, *as; /* as: NULL (the table or folded text) */
	enum cli_format fmt;
};

int cluster_flamegraph_procs(const struct fanout_node *nodes, size_t n,
			     const struct cluster_fg_procs *p);

/* `probing cluster trace` (cluster_trace.c): argv from "trace". */
int cluster_trace(struct cmd_ctx *ctx, const struct cluster_opts *o,
		  const struct fanout_node *nodes, size_t n, int argc,
		  char **argv);

#endif
