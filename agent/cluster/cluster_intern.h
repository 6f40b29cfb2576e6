/*
 * cluster_intern: the helpers the files of the cluster support share
 * (private to cluster.c, cluster_ask.c, cluster_nodes.c, cluster_probe.c,
 * cluster_store.c): clocks and the cluster.status setting.  No state:
 * each file owns its own.
 */
#ifndef CLUSTER_INTERN_H
#define CLUSTER_INTERN_H

/* Monotonic milliseconds and Unix seconds. */
double cluster_mono_ms(void);
double cluster_unix_s(void);

/* Sets the read-only setting cluster.status (printf-style). */
void cluster_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
