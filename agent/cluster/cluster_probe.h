/*
 * cluster_probe: is anyone listening?  A TCP connect to many addresses at
 * once, for the status and last_seen columns of cluster.nodes.
 *
 * Connects are non-blocking, CLUSTER_PROBE_BATCH in flight at once, each
 * batch given CLUSTER_PROBE_MS at most; a connect that completes is "up",
 * one refused, failed or unfinished is not.  Nothing is sent: the socket
 * is closed as soon as the connect is done (the agent sees a connection
 * that ends before its first message).
 *
 * Blocking for at most CLUSTER_PROBE_MS per batch; no globals; any thread.
 */
#ifndef CLUSTER_PROBE_H
#define CLUSTER_PROBE_H

#include <stddef.h>

#include "fdown.h"
#include "dap_addr.h"

#define CLUSTER_PROBE_MS 500
#define CLUSTER_PROBE_BATCH 256 /* connects in flight at once */

struct cluster_probe {
	char addr[DAP_ADDR_TEXT_MAX]; /* in: "host:port" */
	struct fdown sock;	      /* private */
	int up;			      /* out: 1 when the connect completed */
};

/* Probes ps[0..n) and sets each one's up.  Closes what it opened. */
void cluster_probe_all(struct cluster_probe *ps, size_t n);

#endif
