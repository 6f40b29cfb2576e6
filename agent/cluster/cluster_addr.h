/*
 * cluster_addr: where the rank of a distributed job listens, so that the
 * others and the CLI reach it.
 *
 * The setting cluster.listen_host (PROBING_CLUSTER_LISTEN_HOST) says:
 *   auto      loopback when the job runs on one host, else route (the
 *             default);
 *   loopback  127.0.0.1, whatever the job;
 *   route     the local address of the route to MASTER_ADDR (a UDP
 *             connect and getsockname: no packet is sent); when that is a
 *             loopback address (MASTER_ADDR names this host through
 *             127.0.1.1, say), the first non-loopback address of an
 *             interface that is up;
 *   ADDRESS   that IP address; 0.0.0.0 or :: listen on every interface
 *             and register the route's address.
 * One host: LOCAL_WORLD_SIZE equals WORLD_SIZE (torchrun sets both), or,
 * without LOCAL_WORLD_SIZE, MASTER_ADDR is a loopback address.  Anything
 * else is taken as a job across hosts.
 *
 * A rank that listens beyond loopback needs a token (server.h, auth.h);
 * cluster.c gets it before it listens (cluster_store.h).
 *
 * Pure socket and string code; no globals; any thread.
 */
#ifndef CLUSTER_ADDR_H
#define CLUSTER_ADDR_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_HOST_MAX 64 /* an IP address as text, with room */

/* The check of cluster.listen_host for config.c: auto, loopback, route,
 * or a numeric IPv4/IPv6 address.  0 or -EINVAL with err. */
int cluster_listen_host_canon(const char *text, char *canon, size_t canonlen,
			      char *err, size_t errlen);

/* 1 when host is a numeric loopback address (127.0.0.0/8, ::1) or
 * "localhost", else 0. */
int cluster_addr_is_loopback(const char *host);

/* 1 when host is a wildcard address (0.0.0.0, ::), else 0. */
int cluster_addr_is_any(const char *host);

/*
 * Where to listen and what to register, from the setting (above), the
 * job (world, local_world: -1 when unknown) and the store's host.
 * bind: the host to listen on; adv: the host others connect to (the same
 * unless bind is a wildcard).  *remote: 1 when bind is not loopback (a
 * token is needed).  0, or -errno with err (no route to master, no
 * address).
 */
int cluster_addr_choose(const char *setting, const char *master,
			int master_port, int64_t world, int64_t local_world,
			char *bind, char *adv, int *remote, char *err,
			size_t errlen);

#endif
