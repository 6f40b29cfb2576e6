/*
 * cluster_nodes: the node list, and the live table cluster.nodes(rank,
 * local_rank, host, pid, addr, status, last_seen, role) that shows it.
 *
 * role is "rank" for the nodes; each rank's workers (its DataLoader
 * workers: forked children, as the rank registered them) follow it as
 * rows of role "worker" with the rank's rank, their own pid and no
 * address or status: they are the rank's, never a rank themselves.
 *
 * Nodes are keyed by rank; putting a rank again replaces its node (its
 * status and last_seen kept when the address is the same).  Nodes come
 * from the store (cluster_store.h), the node file (PROBING_NODES) and
 * probing/cluster {add} (cluster_add, cluster_add_file in cluster.h,
 * implemented here: one node per address, re-adding an address moves it).
 * At most CLUSTER_NODES_MAX nodes.
 *
 * Reading the table first asks cluster_store_refresh() for news from the
 * store, then, when status or last_seen are read, connects to every
 * node's address (cluster_probe.h): status up, unreachable, or unknown
 * (not probed yet); last_seen the Unix time of the last connect that
 * worked.
 *
 * Threads: any; one lock inside, never held across I/O.
 */
#ifndef CLUSTER_NODES_H
#define CLUSTER_NODES_H

#include <stddef.h>
#include <stdint.h>

#include "dap_addr.h"

enum cluster_node_status {
	CLUSTER_NODE_UNKNOWN,
	CLUSTER_NODE_UP,
	CLUSTER_NODE_UNREACHABLE,
};

#define CLUSTER_WORKERS_MAX 32 /* workers listed per rank */

struct cluster_node {
	int64_t rank, local_rank, pid; /* -1: not known */
	int64_t workers[CLUSTER_WORKERS_MAX]; /* pids (cluster_role.h) */
	int nworkers;
	char host[256];
	char addr[DAP_ADDR_TEXT_MAX];
	enum cluster_node_status status;
	double last_seen; /* Unix seconds; 0: never */
};

struct store;

/* A node with nothing known (ranks and pid -1). */
void cluster_node_init(struct cluster_node *n);

/* Puts n (a copy) in the list under its rank.  0 or -ENOSPC. */
int cluster_nodes_put(const struct cluster_node *n);

/* How many nodes have a rank in 0..world-1. */
int64_t cluster_nodes_ranks_known(int64_t world);

/* Registers cluster.nodes in st.  0 or -errno with err. */
int cluster_nodes_table(struct store *st, char *err, size_t errlen);

/* In a forked child: the lock usable again (the list stays). */
void cluster_nodes_atfork_child(void);

#endif
