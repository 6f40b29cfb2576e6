/*
 * cluster: the other agents of a distributed job, and how they find each
 * other.
 *
 * In a torch.distributed job (RANK, WORLD_SIZE and MASTER_ADDR/MASTER_PORT
 * in the environment, as torchrun sets them) each rank's agent:
 *   1. listens on TCP as well, where cluster.listen_host says
 *      (cluster_addr.h): on a job of one host, 127.0.0.1; on a job across
 *      hosts, the address that reaches MASTER_ADDR.  The port is
 *      PROBING_PORT + LOCAL_RANK when PROBING_PORT is set (config.c), else
 *      a free one; a TCP address configured beyond loopback
 *      (PROBING_LISTEN, server.listen) is used as it is;
 *   2. beyond loopback, first gets the job's token: the user's own
 *      (PROBING_TOKEN), or the one shared through the store, adopted
 *      before it listens (cluster_store.h) — never listening beyond
 *      loopback without it;
 *   3. registers itself in the job's rendezvous store (torch's TCPStore
 *      at MASTER_ADDR:MASTER_PORT, spoken to directly: tcpstore.h) under
 *      "probing/<TORCHELASTIC_RUN_ID or 'none'>/rank/<RANK>" with the JSON
 *      {rank, local_rank, world_size, host, pid, addr}.
 * Steps 2 and 3 (and 1 beyond loopback) run on a thread of its own
 * ("probing-cluster"), never on a thread of the target: it waits until the
 * process has imported torch (whose version picks the store's protocol;
 * torch is never imported by us), then tries the store with a backoff
 * (100 ms doubling to 5 s) for at most CLUSTER_REGISTER_S; the store may
 * not be up yet.  What it does is in the setting cluster.status.
 *
 * The node list, cluster.nodes(rank, local_rank, host, pid, addr, status,
 * last_seen), is cluster_nodes.h: filled from the store, from the node
 * file named by PROBING_NODES (read at start) and from probing/cluster
 * {add}.  Node file lines: "HOST:PORT [RANK]"; blank lines and '#'
 * comments skipped.  A node given without a rank gets the next rank after
 * the highest known.
 *
 * Caps: CLUSTER_NODES_MAX nodes, CLUSTER_WORLD_MAX ranks read from the
 * store.  Threads: every function may be called from any agent thread.
 */
#ifndef CLUSTER_H
#define CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_NODES_MAX 65536
#define CLUSTER_WORLD_MAX 65536
#define CLUSTER_REGISTER_S 600

struct server;
struct store;

/* Registers cluster.nodes in st, reads PROBING_NODES, and in a torch job
 * listens on TCP through srv (beyond loopback: later, from the thread,
 * once the token is had) and starts the registration thread.  A
 * failure of the job part is logged and put in cluster.status, not
 * returned: the agent serves without it.  0 or -errno (the table). */
int cluster_start(struct server *srv, struct store *st, char *err,
		  size_t errlen);

/* Stops the registration thread (bounded wait). */
void cluster_stop(void);

/* In a forked child: forget the parent's thread and nodes. */
void cluster_atfork_child(void);

/* Adds or replaces a node at addr ("host:port"); rank < 0: the next free
 * rank.  0, -EINVAL (bad address, err says why) or -ENOSPC. */
int cluster_add(const char *addr, int64_t rank, char *err, size_t errlen);

/* Reads a node file (format above) into the list.  Returns the number of
 * nodes added, or -errno with err (naming the line). */
int cluster_add_file(const char *path, char *err, size_t errlen);

/* The number of nodes listed. */
size_t cluster_count(void);

#endif
