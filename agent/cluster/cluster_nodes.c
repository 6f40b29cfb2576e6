/*
 * cluster_nodes: the node list and cluster.nodes.  See cluster_nodes.h.
 */
#include "cluster_nodes.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_intern.h"
#include "cluster_probe.h"
#include "cluster_store.h"
#include "fdown.h"
#include "livetab.h"
#include "store.h"

static const char *const status_names[] = {"unknown", "up", "unreachable"};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cluster_node *nodes;
static size_t nnodes, capnodes;

void cluster_node_init(struct cluster_node *n)
{
	memset(n, 0, sizeof(*n));
	n->rank = n->local_rank = n->pid = -1;
}

/* Under lock.  The node of rank, or NULL. */
static struct cluster_node *by_rank(int64_t rank)
{
	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].rank == rank)
			return &nodes[i];
	return NULL;
}

/* Under lock.  A new zeroed node at the end, or NULL past the cap. */
static struct cluster_node *append(void)
{
	if (nnodes == capnodes) {
		size_t cap = capnodes ? capnodes * 2 : 64;
		struct cluster_node *p;

		if (capnodes >= CLUSTER_NODES_MAX)
			return NULL;
		if (cap > CLUSTER_NODES_MAX)
			cap = CLUSTER_NODES_MAX;
		p = realloc(nodes, cap * sizeof(*p));
		if (!p)
			return NULL;
		nodes = p;
		capnodes = cap;
	}
	memset(&nodes[nnodes], 0, sizeof(nodes[0]));
	return &nodes[nnodes++];
}

/* Under lock.  Sets the node of n->rank to n (status kept when the
 * address is the same).  0 or -ENOSPC. */
static int upsert(const struct cluster_node *n)
{
	struct cluster_node *old = by_rank(n->rank);

	if (!old) {
		old = append();
		if (!old)
			return -ENOSPC;
	} else if (!strcmp(old->addr, n->addr)) {
		struct cluster_node keep = *old;
		*old = *n;
		old->status = keep.status;
		old->last_seen = keep.last_seen;
		return 0;
	}
	*old = *n;
	return 0;
}

static int64_t next_rank_locked(void)
{
	int64_t r = 0;

	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].rank >= r)
			r = nodes[i].rank + 1;
	return r;
}

int cluster_add(const char *addr, int64_t rank, char *err, size_t errlen)
{
	struct dap_addr a;
	struct cluster_node n;
	int rc;

	cluster_node_init(&n);
	if (dap_addr_parse(addr, &a, err, errlen))
		return -EINVAL;
	if (a.kind != DAP_ADDR_TCP) {
		snprintf(err, errlen, "'%s' is not HOST:PORT", addr);
		return -EINVAL;
	}
	dap_addr_format(&a, n.addr, sizeof(n.addr));
	snprintf(n.host, sizeof(n.host), "%s", a.host);
	pthread_mutex_lock(&lock);
	/* One node per address: re-adding one moves it. */
	for (size_t i = 0; i < nnodes; i++) {
		if (!strcmp(nodes[i].addr, n.addr)) {
			if (rank < 0)
				rank = nodes[i].rank;
			nodes[i] = nodes[--nnodes];
			break;
		}
	}
	n.rank = rank >= 0 ? rank : next_rank_locked();
	rc = upsert(&n);
	pthread_mutex_unlock(&lock);
	if (rc)
		snprintf(err, errlen, "too many nodes (max %d)",
			 CLUSTER_NODES_MAX);
	return rc;
}

int cluster_add_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fdown_fopen(path);
	char line[1024], addr[512], why[256];
	int lineno = 0, added = 0, rc = 0;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		const char *node;
		long long rank;
		int got;

		lineno++;
		got = dap_addr_node_line(line, &node, &rank);
		if (got == 0)
			continue;
		if (got < 0) {
			snprintf(err, errlen,
				 "%s:%d: expected HOST:PORT "
				 "[RANK]",
				 path, lineno);
			rc = -EINVAL;
			break;
		}
		snprintf(addr, sizeof(addr), "%s", node);
		rc = cluster_add(addr, rank, why, sizeof(why));
		if (rc) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
			break;
		}
		added++;
	}
	fclose(f);
	return rc ? rc : added;
}

size_t cluster_count(void)
{
	size_t n;

	pthread_mutex_lock(&lock);
	n = nnodes;
	pthread_mutex_unlock(&lock);
	return n;
}

int cluster_nodes_put(const struct cluster_node *n)
{
	int rc;

	pthread_mutex_lock(&lock);
	rc = upsert(n);
	pthread_mutex_unlock(&lock);
	return rc;
}

int64_t cluster_nodes_ranks_known(int64_t world)
{
	int64_t n = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].rank >= 0 && nodes[i].rank < world)
			n++;
	pthread_mutex_unlock(&lock);
	return n;
}

/* ---- reachability ------------------------------------------------------ */

/* Probes every node and records what it found. */
static void probe_nodes(void)
{
	struct cluster_probe *ps;
	size_t n;
	double now = cluster_unix_s();

	pthread_mutex_lock(&lock);
	n = nnodes;
	ps = calloc(n ? n : 1, sizeof(*ps));
	for (size_t i = 0; ps && i < n; i++)
		snprintf(ps[i].addr, sizeof(ps[i].addr), "%s", nodes[i].addr);
	pthread_mutex_unlock(&lock);
	if (!ps)
		return;
	cluster_probe_all(ps, n);
	pthread_mutex_lock(&lock);
	/* The list may have changed meanwhile: match by address. */
	for (size_t i = 0; i < nnodes; i++) {
		for (size_t j = i < n ? i : 0; j < n; j++) {
			if (strcmp(ps[j].addr, nodes[i].addr))
				continue;
			nodes[i].status = ps[j].up ? CLUSTER_NODE_UP
						   : CLUSTER_NODE_UNREACHABLE;
			if (ps[j].up)
				nodes[i].last_seen = now;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	free(ps);
}

/* ---- cluster.nodes ------------------------------------------------------ */

static int cmp_rank(const void *a, const void *b)
{
	const struct cluster_node *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

static int add_int(struct livetab_rows *rows, int64_t v)
{
	return v < 0 ? livetab_rows_null(rows) : livetab_rows_int(rows, v);
}

static int nodes_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			  size_t errlen)
{
	struct cluster_node *copy;
	size_t n;
	int rc = 0;

	(void)ctx;
	cluster_store_refresh();
	/* status, last_seen: connect to each node only when read. */
	if (livetab_rows_wants(rows, 5) || livetab_rows_wants(rows, 6))
		probe_nodes();
	pthread_mutex_lock(&lock);
	n = nnodes;
	copy = malloc((n ? n : 1) * sizeof(*copy));
	if (copy && n)
		memcpy(copy, nodes, n * sizeof(*copy));
	pthread_mutex_unlock(&lock);
	if (!copy) {
		snprintf(err, errlen, "cluster.nodes: out of memory");
		return -ENOMEM;
	}
	qsort(copy, n, sizeof(*copy), cmp_rank);
	for (size_t i = 0; i < n && !rc; i++) {
		const struct cluster_node *nd = &copy[i];

		if ((rc = livetab_rows_begin(rows)) ||
		    (rc = add_int(rows, nd->rank)) ||
		    (rc = add_int(rows, nd->local_rank)) ||
		    (rc = livetab_rows_text(rows, nd->host)) ||
		    (rc = add_int(rows, nd->pid)) ||
		    (rc = livetab_rows_text(rows, nd->addr)) ||
		    (rc = livetab_rows_text(rows, status_names[nd->status])) ||
		    (rc = nd->last_seen > 0
				  ? livetab_rows_real(rows, nd->last_seen)
				  : livetab_rows_null(rows)) ||
		    (rc = livetab_rows_text(rows, "rank")))
			break;
		for (int w = 0;
		     !rc && w < nd->nworkers && w < CLUSTER_WORKERS_MAX; w++)
			if ((rc = livetab_rows_begin(rows)) ||
			    (rc = add_int(rows, nd->rank)) ||
			    (rc = add_int(rows, nd->local_rank)) ||
			    (rc = livetab_rows_text(rows, nd->host)) ||
			    (rc = add_int(rows, nd->workers[w])) ||
			    (rc = livetab_rows_null(rows)) ||
			    (rc = livetab_rows_null(rows)) ||
			    (rc = livetab_rows_null(rows)) ||
			    (rc = livetab_rows_text(rows, "worker")))
				break;
	}
	free(copy);
	if (rc)
		snprintf(err, errlen, "cluster.nodes: too many rows");
	return rc;
}

static const struct livetab nodes_tab = {
	.schema = "cluster",
	.name = "nodes",
	.doc = "the agents of this job: from the rendezvous store, the node "
	       "file (PROBING_NODES) and `probing cluster add`; status and "
	       "last_seen from a TCP connect when read; each rank's "
	       "DataLoader workers follow it (role worker)",
	.columns = "rank INTEGER, local_rank INTEGER, host TEXT, pid INTEGER, "
		   "addr TEXT, status TEXT, last_seen REAL, role TEXT",
	.snapshot = nodes_snapshot,
};

int cluster_nodes_table(struct store *st, char *err, size_t errlen)
{
	return store_add_livetab(st, &nodes_tab, NULL, err, errlen);
}

void cluster_nodes_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
