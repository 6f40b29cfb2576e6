/*
 * fanout: one DAP request to many agents at once, for `probing cluster`.
 *
 * Each node gets its own connection: connect, `initialize` (cli/target.c,
 * so tokens and error wording are the same as for -t), the request, then
 * the connection is closed (the agent treats that as a disconnect).  A
 * bounded pool of threads (FANOUT_THREADS) works through the nodes, each
 * thread with the blocking DAP client; a node that hangs holds one thread
 * for at most its timeout, which applies to the connection, to
 * `initialize` and to the request each.
 *
 * A node with a recording (rec) is read instead: the request is
 * answered from its files as -t would (recorded_request).
 *
 * Nothing is printed; every node's outcome is in its result.  Threads:
 * fanout_run() from one thread at a time.
 */
#ifndef CLI_FANOUT_H
#define CLI_FANOUT_H

#include <stddef.h>
#include <stdint.h>

#include "dap_client.h"
#include "rundir.h"

#define FANOUT_THREADS 64
#define FANOUT_NODES_MAX 65536

struct fanout_node {
	int64_t rank;	  /* -1: not known */
	char host[256];	  /* may be "" */
	char addr[DAP_ADDR_TEXT_MAX]; /* HOST:PORT */
	char rec[RUNDIR_PATH_MAX];    /* a recording answers instead (a rank
				       * of a job that has ended; recorded.h);
				       * "" for an agent */
};

struct fanout_result {
	int rc;			  /* CLI_OK, or the exit code the node would
				     give for -t (CLI_EREFUSED, CLI_ETIMEOUT,
				     ...) */
	char err[512];		  /* why, when rc != CLI_OK */
	struct dap_message *resp; /* with CLI_OK: the response (owned; it
				     may say success:false) */
	double ms;		  /* from connect to response */
};

/*
 * Sends command with a copy of args (may be NULL) to each of the n nodes,
 * all at once, and fills out[0..n) (caller releases each with
 * fanout_result_release).  Returns 0, or -ENOMEM / -E2BIG (n past
 * FANOUT_NODES_MAX) with nothing sent.
 */
int fanout_run(const struct fanout_node *nodes, size_t n, const char *command,
	       const cJSON *args, int timeout_ms, struct fanout_result *out);

void fanout_result_release(struct fanout_result *r);

/*
 * Reads a node file: "HOST:PORT [RANK]" per line, blank lines and '#'
 * comments skipped; a node without a rank gets the next one after the
 * highest so far.  *out is a heap array the caller frees.  Returns the
 * number of nodes, or -errno with err naming the line.
 */
int fanout_read_nodes(const char *path, struct fanout_node **out, char *err,
		      size_t errlen);

#endif
