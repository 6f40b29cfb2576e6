/*
 * cluster_intern: what the modules of the cluster support share (private
 * to cluster.c, cluster_nodes.c, cluster_probe.c, cluster_store.c).
 *
 * cluster_job is this process's place in its torch.distributed job, read
 * from the environment by cluster_start() before any thread of ours
 * starts; afterwards only the registration thread writes it (addr, when
 * it starts listening beyond loopback), under cluster_job_lock, and
 * readers on other threads take that lock for addr.
 */
#ifndef CLUSTER_INTERN_H
#define CLUSTER_INTERN_H

#include <pthread.h>
#include <stdint.h>

#include "cluster_addr.h"
#include "dap_addr.h"

struct cluster_job {
	int active;		    /* in a job, listening on TCP */
	int remote;		    /* beyond loopback: a token first */
	int64_t rank, local_rank;   /* local_rank -1: not known */
	int64_t world, local_world; /* local_world -1: not known */
	char master[256];	    /* MASTER_ADDR */
	int master_port;
	char run_id[128];	     /* TORCHELASTIC_RUN_ID or "none" */
	char host[256];		     /* gethostname(), JSON-safe */
	char bind[CLUSTER_HOST_MAX]; /* remote: the host to listen on */
	char adv[CLUSTER_HOST_MAX];  /* remote: the host others reach */
	int port;		     /* remote: 0, or the port to take */
	int bound; /* remote: listening at bind:port already */
	char addr[DAP_ADDR_TEXT_MAX]; /* ours as registered; "" not yet */
};

extern struct cluster_job cluster_job;
extern pthread_mutex_t cluster_job_lock;

/* Monotonic milliseconds and Unix seconds. */
double cluster_mono_ms(void);
double cluster_unix_s(void);

/* Sets the read-only setting cluster.status (printf-style). */
void cluster_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
