/*
 * cluster_store: this rank in its job's rendezvous store — torch's
 * TCPStore at MASTER_ADDR:MASTER_PORT, spoken to directly (tcpstore.h).
 *
 * Keys, under "/probing/<run id>/" (torch's own client prefixes "/", so
 * Python's store.get("probing/none/rank/0") reads the first one):
 *   rank/<R>  rank R's registration, JSON {rank, local_rank, world_size,
 *             host, pid, addr}, set by rank R;
 *   token     the job's token, for ranks that listen beyond loopback:
 *             the first rank to ask puts a fresh random token there with
 *             compare-set (set only when unset) and every rank, the first
 *             included, adopts what the store then holds — one token per
 *             job whatever the order, no race.  Never written when the
 *             user gave a token (PROBING_TOKEN, probing.init): then every
 *             rank must have been given the same one.
 * The store has no access control: whoever reaches MASTER_PORT can read
 * the token (docs/security.md).
 *
 * The protocol is chosen by the target's torch version, read on the GIL
 * thread (pygil.h) once the process has imported torch; nothing here
 * imports it.
 *
 * Every call blocks for at most a few CLUSTER_STORE_TIMEOUT_MS.  Threads:
 * the registration thread, and readers of cluster.nodes for
 * cluster_store_refresh().
 */
#ifndef CLUSTER_STORE_H
#define CLUSTER_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CLUSTER_REFRESH_MS 2000
#define CLUSTER_STORE_TIMEOUT_MS 2000

/* The job, as the store needs it (cluster.c reads it from the
 * environment). */
struct cluster_store_job {
	char run_id[128]; /* TORCHELASTIC_RUN_ID or "none", no '/' */
	char master[256]; /* MASTER_ADDR */
	int master_port;
	int64_t rank, local_rank, world; /* local_rank -1: not known */
	char host[256];			 /* JSON-safe */
};

/* This process is a rank of job: the store is used from now on (until
 * then, and in a forked child, refresh does nothing).  Before any thread
 * of ours calls the functions below. */
void cluster_store_begin(const struct cluster_store_job *job);

/* Makes sure the store's protocol is known: 0 when it is, -EAGAIN while
 * the process has not imported torch (or the GIL could not be had). */
int cluster_store_find_proto(void);

/*
 * Gets the job's token (above) and adopts it (auth_token_adopt).  A
 * no-op returning 0 when the token is the user's own.  0, or -errno with
 * err (store unreachable, PROBING_TOKEN malformed: -EINVAL).
 */
int cluster_store_share_token(char *err, size_t errlen);

/* Sets our registration, reachable at addr ("host:port"), with our
 * workers' pids (cluster_role_workers), and reads the other ranks'.  0
 * or -errno with err. */
int cluster_store_register(const char *addr, const pid_t *workers, int nworkers,
			   char *err, size_t errlen);

/* Reads every rank's registration into the node list when it is older
 * than CLUSTER_REFRESH_MS, or some rank is still missing.  Failures are
 * logged; the list stays as it was. */
void cluster_store_refresh(void);

/* In a forked child: the lock usable again, the store unused (a forked
 * child is never the rank). */
void cluster_store_atfork_child(void);

#endif
