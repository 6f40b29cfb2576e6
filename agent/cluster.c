/*
 * cluster: the node list, the job's environment and the registration
 * thread.  See cluster.h.
 */
#include "cluster.h"

#include <Python.h>
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "dap_addr.h"
#include "livetab.h"
#include "log.h"
#include "pygil.h"
#include "server.h"
#include "store.h"
#include "tcpstore.h"

enum status { ST_UNKNOWN, ST_UP, ST_UNREACHABLE };
static const char *const status_names[] = {"unknown", "up", "unreachable"};

struct node {
	int64_t rank, local_rank, pid; /* -1: not known */
	char host[256];
	char addr[DAP_ADDR_TEXT_MAX];
	enum status status;
	double last_seen; /* Unix seconds; 0: never */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct node *nodes;
static size_t nnodes, capnodes;

/* The job, from the environment; fixed after cluster_start. */
static struct {
	int active;
	int64_t rank, local_rank, world;
	char master[256];
	int master_port;
	char run_id[128];
	char host[256];
	char addr[DAP_ADDR_TEXT_MAX]; /* ours on TCP */
} job;

/* Registration and refresh state, under lock. */
static enum tcpstore_proto proto;
static int proto_known;
static double last_refresh; /* CLOCK_MONOTONIC ms */

/* The thread. */
static pthread_t thread;
static pthread_cond_t cond;
static int running, stopping;

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double unix_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void set_status(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void set_status(const char *fmt, ...)
{
	char text[CONFIG_VALUE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	config_set_info("cluster.status", text);
}

/* ---- the node list ----------------------------------------------------- */

/* Under lock.  The node of rank, or NULL. */
static struct node *by_rank(int64_t rank)
{
	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].rank == rank)
			return &nodes[i];
	return NULL;
}

/* Under lock.  A new zeroed node at the end, or NULL past the cap. */
static struct node *append(void)
{
	if (nnodes == capnodes) {
		size_t cap = capnodes ? capnodes * 2 : 64;
		struct node *p;

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
static int upsert(const struct node *n)
{
	struct node *old = by_rank(n->rank);

	if (!old) {
		old = append();
		if (!old)
			return -ENOSPC;
	} else if (!strcmp(old->addr, n->addr)) {
		struct node keep = *old;
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
	struct node n = {.local_rank = -1, .pid = -1};
	int rc;

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
	FILE *f = fopen(path, "re");
	char line[1024], addr[512], why[256];
	int lineno = 0, added = 0, rc = 0;

	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok[3] = {NULL, NULL, NULL}, *end;
		long long rank = -1;
		int k = 0;

		lineno++;
		line[strcspn(line, "#\r\n")] = 0;
		for (char *t = strtok_r(line, " \t", &save); t && k < 3;
		     t = strtok_r(NULL, " \t", &save))
			tok[k++] = t;
		if (k == 0)
			continue;
		if (k == 2) {
			errno = 0;
			rank = strtoll(tok[1], &end, 10);
			if (errno || *end || rank < 0)
				k = 3;
		}
		if (k == 3) {
			snprintf(err, errlen, "%s:%d: expected HOST:PORT "
				 "[RANK]", path, lineno);
			rc = -EINVAL;
			break;
		}
		snprintf(addr, sizeof(addr), "%s", tok[0]);
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

/* ---- the store ---------------------------------------------------------- */

static void rank_key(int64_t rank, char *out, size_t outlen)
{
	snprintf(out, outlen, "/probing/%s/rank/%lld", job.run_id,
		 (long long)rank);
}

/* A registration's JSON into n.  0 or -EINVAL. */
static int parse_node(const char *text, struct node *n)
{
	cJSON *j = cJSON_Parse(text);
	const cJSON *v;
	int rc = -EINVAL;

	memset(n, 0, sizeof(*n));
	n->rank = n->local_rank = n->pid = -1;
	if (!j)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(j, "rank");
	if (!cJSON_IsNumber(v))
		goto out;
	n->rank = (int64_t)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(j, "local_rank");
	if (cJSON_IsNumber(v))
		n->local_rank = (int64_t)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(j, "pid");
	if (cJSON_IsNumber(v))
		n->pid = (int64_t)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(j, "host");
	if (cJSON_IsString(v))
		snprintf(n->host, sizeof(n->host), "%s", v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(j, "addr");
	if (!cJSON_IsString(v) || !*v->valuestring)
		goto out;
	snprintf(n->addr, sizeof(n->addr), "%s", v->valuestring);
	rc = 0;
out:
	cJSON_Delete(j);
	return rc;
}

/* Reads every rank's registration from the store on ts into the list. */
static int refresh_with(struct tcpstore *ts, char *err, size_t errlen)
{
	static char keybuf[TCPSTORE_BATCH_MAX][192];
	static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
	const char *keys[TCPSTORE_BATCH_MAX], *want[TCPSTORE_BATCH_MAX];
	unsigned char ready[TCPSTORE_BATCH_MAX];
	char *values[TCPSTORE_BATCH_MAX];
	int rc = 0;

	pthread_mutex_lock(&buf_lock); /* keybuf: 768 KiB, not on a stack */
	for (int64_t base = 0; base < job.world && !rc;
	     base += TCPSTORE_BATCH_MAX) {
		size_t n = 0, m = 0;

		for (int64_t r = base;
		     r < job.world && n < TCPSTORE_BATCH_MAX; r++) {
			rank_key(r, keybuf[n], sizeof(keybuf[n]));
			keys[n] = keybuf[n];
			n++;
		}
		rc = tcpstore_check_each(ts, keys, n, ready, err, errlen);
		if (rc)
			break;
		for (size_t i = 0; i < n; i++)
			if (ready[i])
				want[m++] = keys[i];
		if (!m)
			continue;
		rc = tcpstore_get_each(ts, want, m, values, err, errlen);
		if (rc)
			break;
		pthread_mutex_lock(&lock);
		for (size_t i = 0; i < m; i++) {
			struct node nd;

			if (parse_node(values[i], &nd) == 0)
				upsert(&nd);
			free(values[i]);
		}
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_unlock(&buf_lock);
	if (!rc) {
		pthread_mutex_lock(&lock);
		last_refresh = mono_ms();
		pthread_mutex_unlock(&lock);
	}
	return rc;
}

/* Under lock: how many of the job's ranks are listed. */
static int64_t ranks_known_locked(void)
{
	int64_t n = 0;

	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].rank >= 0 && nodes[i].rank < job.world)
			n++;
	return n;
}

/* The store's protocol known, reads it when it is stale. */
static void refresh_if_stale(void)
{
	struct tcpstore *ts;
	enum tcpstore_proto p;
	char err[256];
	int go;

	pthread_mutex_lock(&lock);
	/* While some ranks are missing (the job is starting), every read
	 * asks the store again. */
	go = job.active && proto_known &&
	     (mono_ms() - last_refresh >= CLUSTER_REFRESH_MS ||
	      ranks_known_locked() < job.world);
	p = proto;
	pthread_mutex_unlock(&lock);
	if (!go)
		return;
	if (tcpstore_connect(job.master, job.master_port, p,
			     CLUSTER_STORE_TIMEOUT_MS, &ts, err,
			     sizeof(err)) == 0) {
		if (refresh_with(ts, err, sizeof(err)))
			log_info("cluster: reading the store: %s", err);
		tcpstore_free(ts);
	}
}

struct version_call {
	char text[64];
};

/* GIL thread: torch.__version__ when the process has imported torch
 * (text left empty when it has not, or not yet far enough). */
static void torch_version_fn(void *arg)
{
	struct version_call *c = arg;
	PyObject *name, *m, *v;

	c->text[0] = 0;
	name = PyUnicode_FromString("torch");
	m = name ? PyImport_GetModule(name) : NULL;
	Py_XDECREF(name);
	v = m ? PyObject_GetAttrString(m, "__version__") : NULL;
	if (v && PyUnicode_Check(v)) {
		const char *s = PyUnicode_AsUTF8(v);
		if (s)
			snprintf(c->text, sizeof(c->text), "%s", s);
	}
	if (PyErr_Occurred())
		PyErr_Clear();
	Py_XDECREF(v);
	Py_XDECREF(m);
}

/* Our registration, as JSON. */
static int registration(char *out, size_t outlen)
{
	return snprintf(out, outlen,
			"{\"rank\":%lld,\"local_rank\":%lld,\"world_size\":"
			"%lld,\"host\":\"%s\",\"pid\":%d,\"addr\":\"%s\"}",
			(long long)job.rank, (long long)job.local_rank,
			(long long)job.world, job.host, (int)getpid(),
			job.addr);
}

/* One try: connect, set our key, read the others'.  0 or -errno. */
static int register_once(enum tcpstore_proto p, char *err, size_t errlen)
{
	struct tcpstore *ts;
	char key[192], value[1024];
	int n, rc;

	rc = tcpstore_connect(job.master, job.master_port, p,
			      CLUSTER_STORE_TIMEOUT_MS, &ts, err, errlen);
	if (rc)
		return rc;
	rank_key(job.rank, key, sizeof(key));
	n = registration(value, sizeof(value));
	rc = tcpstore_set(ts, key, value, (size_t)n, err, errlen);
	if (!rc && refresh_with(ts, err, errlen))
		log_info("cluster: reading the store: %s", err);
	tcpstore_free(ts);
	return rc;
}

/* Sleeps ms unless stopped; returns stopping. */
static int nap(int ms)
{
	struct timespec dl;
	int stop;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&lock);
	if (!stopping)
		pthread_cond_timedwait(&cond, &lock, &dl);
	stop = stopping;
	pthread_mutex_unlock(&lock);
	return stop;
}

static void *register_main(void *arg)
{
	struct pygil_limits lim = {.start_ms = 200};
	double start = mono_ms();
	char err[256] = "", where[300];
	int backoff = 100;

	(void)arg;
	snprintf(where, sizeof(where), "%s:%d", job.master, job.master_port);
	while (mono_ms() - start < CLUSTER_REGISTER_S * 1000.0) {
		enum tcpstore_proto p;

		if (!proto_known) {
			struct version_call c = {""};

			/* A quick call: waits until it is done. */
			if (pygil_run(torch_version_fn, &c, &lim, NULL) == 0 &&
			    c.text[0] && tcpstore_proto_for(c.text, &p) == 0) {
				pthread_mutex_lock(&lock);
				proto = p;
				proto_known = 1;
				pthread_mutex_unlock(&lock);
			} else {
				set_status("rank %lld: waiting for the process "
					   "to import torch, then the store "
					   "at %s", (long long)job.rank, where);
			}
		}
		if (proto_known) {
			if (register_once(proto, err, sizeof(err)) == 0) {
				set_status("rank %lld of %lld: registered in "
					   "the store at %s (run %s)",
					   (long long)job.rank,
					   (long long)job.world, where,
					   job.run_id);
				log_info("cluster: rank %lld registered at %s",
					 (long long)job.rank, where);
				return NULL;
			}
			set_status("rank %lld: waiting for the store at %s: %s",
				   (long long)job.rank, where, err);
		}
		if (nap(backoff))
			return NULL;
		if (backoff < 5000)
			backoff *= 2;
	}
	set_status("rank %lld: not registered: gave up after %d s (%s)",
		   (long long)job.rank, CLUSTER_REGISTER_S,
		   proto_known ? err : "torch was never imported");
	log_warn("cluster: rank %lld not registered in the store at %s",
		 (long long)job.rank, where);
	return NULL;
}

/* ---- the environment ---------------------------------------------------- */

static int env_int(const char *name, int64_t *out)
{
	const char *v = getenv(name);
	char *end;
	long long x;

	if (!v || !*v)
		return -1;
	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno || *end || x < 0)
		return -1;
	*out = x;
	return 0;
}

/* Fills job from a torchrun-style environment; 0 when in a job. */
static int read_env(void)
{
	const char *master = getenv("MASTER_ADDR"), *run;
	int64_t port;

	memset(&job, 0, sizeof(job));
	job.local_rank = -1;
	if (env_int("RANK", &job.rank) || env_int("WORLD_SIZE", &job.world) ||
	    !master || !*master || env_int("MASTER_PORT", &port) ||
	    port < 1 || port > 65535 || job.world < 1 ||
	    job.world > CLUSTER_WORLD_MAX || job.rank >= job.world ||
	    strlen(master) >= sizeof(job.master))
		return -1;
	env_int("LOCAL_RANK", &job.local_rank);
	snprintf(job.master, sizeof(job.master), "%s", master);
	job.master_port = (int)port;
	run = getenv("TORCHELASTIC_RUN_ID");
	snprintf(job.run_id, sizeof(job.run_id), "%s",
		 run && *run && !strchr(run, '/') ? run : "none");
	if (gethostname(job.host, sizeof(job.host)) < 0)
		snprintf(job.host, sizeof(job.host), "?");
	job.host[sizeof(job.host) - 1] = 0;
	/* The JSON we write carries it in quotes. */
	for (char *p = job.host; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			*p = '_';
	job.active = 1;
	return 0;
}

/* A TCP address among the server's ("a,b,c"), into out; 0 or -ENOENT. */
static int tcp_address(struct server *srv, char *out, size_t outlen)
{
	char all[1024], *save = NULL;

	server_addresses(srv, all, sizeof(all));
	for (char *t = strtok_r(all, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (*t != '@' && *t != '/' && strchr(t, ':')) {
			snprintf(out, outlen, "%s", t);
			return 0;
		}
	}
	return -ENOENT;
}

/* A free port on 127.0.0.1 (the kernel's choice), or -errno. */
static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		port = -errno;
		close(fd);
		return port;
	}
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* Makes sure the server listens on TCP; our address into job.addr. */
static int listen_tcp(struct server *srv, char *err, size_t errlen)
{
	char text[64], canon[DAP_ADDR_TEXT_MAX];
	int rc = -EADDRINUSE;

	if (tcp_address(srv, job.addr, sizeof(job.addr)) == 0)
		return 0;
	/* Another process may take the port between our probe and our
	 * bind: try a few. */
	for (int i = 0; i < 8 && rc == -EADDRINUSE; i++) {
		int port = free_port();

		if (port < 0)
			return port;
		snprintf(text, sizeof(text), "127.0.0.1:%d", port);
		rc = server_listen(srv, text, canon, sizeof(canon), err,
				   errlen);
	}
	if (rc == 0)
		snprintf(job.addr, sizeof(job.addr), "%s", canon);
	return rc;
}

/* ---- reachability -------------------------------------------------------- */

struct probe {
	char addr[DAP_ADDR_TEXT_MAX];
	int fd;
	int up;
};

/* Starts a non-blocking connect to p->addr (numeric or resolved). */
static void probe_start(struct probe *p)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	struct dap_addr a;
	char port[16];

	p->fd = -1;
	p->up = 0;
	if (dap_addr_parse(p->addr, &a, NULL, 0) || a.kind != DAP_ADDR_TCP)
		return;
	snprintf(port, sizeof(port), "%d", a.port);
	if (getaddrinfo(a.host, port, &hints, &res) || !res)
		return;
	p->fd = socket(res->ai_family,
		       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd >= 0) {
		if (connect(p->fd, res->ai_addr, res->ai_addrlen) == 0) {
			p->up = 1;
		} else if (errno != EINPROGRESS) {
			close(p->fd);
			p->fd = -1;
		}
	}
	freeaddrinfo(res);
}

/* Connects to every address at once (CLUSTER_PROBE_BATCH in flight),
 * CLUSTER_PROBE_MS per batch at most; sets up.  Closes what it opened. */
static void probe_all(struct probe *ps, size_t n)
{
	struct pollfd pfd[CLUSTER_PROBE_BATCH];
	size_t idx[CLUSTER_PROBE_BATCH];

	for (size_t base = 0; base < n; base += CLUSTER_PROBE_BATCH) {
		size_t m = 0, end = base + CLUSTER_PROBE_BATCH;
		double deadline = mono_ms() + CLUSTER_PROBE_MS;

		if (end > n)
			end = n;
		for (size_t i = base; i < end; i++) {
			probe_start(&ps[i]);
			if (ps[i].fd >= 0 && !ps[i].up) {
				pfd[m] = (struct pollfd){ps[i].fd, POLLOUT, 0};
				idx[m++] = i;
			}
		}
		while (m > 0) {
			double left = deadline - mono_ms();
			size_t k = 0;
			int rc;

			if (left <= 0)
				break;
			rc = poll(pfd, m, (int)left + 1);
			if (rc < 0 && errno == EINTR)
				continue;
			if (rc <= 0)
				break;
			for (size_t j = 0; j < m; j++) {
				int soerr = 0;
				socklen_t sl = sizeof(soerr);

				if (!pfd[j].revents) {
					pfd[k] = pfd[j];
					idx[k++] = idx[j];
					continue;
				}
				getsockopt(pfd[j].fd, SOL_SOCKET, SO_ERROR,
					   &soerr, &sl);
				ps[idx[j]].up = soerr == 0;
			}
			m = k;
		}
		for (size_t i = base; i < end; i++)
			if (ps[i].fd >= 0)
				close(ps[i].fd);
	}
}

/* Probes every node and records what it found. */
static void probe_nodes(void)
{
	struct probe *ps;
	size_t n;
	double now = unix_s();

	pthread_mutex_lock(&lock);
	n = nnodes;
	ps = calloc(n ? n : 1, sizeof(*ps));
	for (size_t i = 0; ps && i < n; i++)
		snprintf(ps[i].addr, sizeof(ps[i].addr), "%s", nodes[i].addr);
	pthread_mutex_unlock(&lock);
	if (!ps)
		return;
	probe_all(ps, n);
	pthread_mutex_lock(&lock);
	/* The list may have changed meanwhile: match by address. */
	for (size_t i = 0; i < nnodes; i++) {
		for (size_t j = i < n ? i : 0; j < n; j++) {
			if (strcmp(ps[j].addr, nodes[i].addr))
				continue;
			nodes[i].status = ps[j].up ? ST_UP : ST_UNREACHABLE;
			if (ps[j].up)
				nodes[i].last_seen = now;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	free(ps);
}

/* ---- cluster.nodes -------------------------------------------------------- */

static int cmp_rank(const void *a, const void *b)
{
	const struct node *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

static int add_int(struct livetab_rows *rows, int64_t v)
{
	return v < 0 ? livetab_rows_null(rows) : livetab_rows_int(rows, v);
}

static int nodes_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			  size_t errlen)
{
	struct node *copy;
	size_t n;
	int rc = 0;

	(void)ctx;
	refresh_if_stale();
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
		const struct node *nd = &copy[i];

		if ((rc = livetab_rows_begin(rows)) ||
		    (rc = add_int(rows, nd->rank)) ||
		    (rc = add_int(rows, nd->local_rank)) ||
		    (rc = livetab_rows_text(rows, nd->host)) ||
		    (rc = add_int(rows, nd->pid)) ||
		    (rc = livetab_rows_text(rows, nd->addr)) ||
		    (rc = livetab_rows_text(rows, status_names[nd->status])) ||
		    (rc = nd->last_seen > 0
				  ? livetab_rows_real(rows, nd->last_seen)
				  : livetab_rows_null(rows)))
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
	       "last_seen from a TCP connect when read",
	.columns = "rank INTEGER, local_rank INTEGER, host TEXT, pid INTEGER, "
		   "addr TEXT, status TEXT, last_seen REAL",
	.snapshot = nodes_snapshot,
};

/* ---- lifecycle ------------------------------------------------------------ */

int cluster_start(struct server *srv, struct store *st, char *err,
		  size_t errlen)
{
	pthread_condattr_t ca;
	const char *file = getenv("PROBING_NODES");
	char why[256];
	int rc;

	rc = store_add_livetab(st, &nodes_tab, NULL, err, errlen);
	if (rc)
		return rc;
	if (file && *file && (rc = cluster_add_file(file, why, sizeof(why))) < 0)
		log_warn("PROBING_NODES: %s", why);
	if (read_env()) {
		set_status("not in a torch.distributed job (no RANK, "
			   "WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
		return 0;
	}
	rc = listen_tcp(srv, why, sizeof(why));
	if (rc) {
		set_status("rank %lld: not listening on TCP: %s",
			   (long long)job.rank, why);
		log_warn("cluster: not listening on TCP: %s", why);
		job.active = 0;
		return 0;
	}
	/* Ourselves, before the store has us. */
	{
		struct node self = {.rank = job.rank,
				    .local_rank = job.local_rank,
				    .pid = getpid(),
				    .status = ST_UP,
				    .last_seen = unix_s()};

		snprintf(self.host, sizeof(self.host), "%s", job.host);
		snprintf(self.addr, sizeof(self.addr), "%s", job.addr);
		pthread_mutex_lock(&lock);
		upsert(&self);
		pthread_mutex_unlock(&lock);
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_REALTIME);
	pthread_cond_init(&cond, &ca);
	pthread_condattr_destroy(&ca);
	stopping = 0;
	rc = pthread_create(&thread, NULL, register_main, NULL);
	if (rc) {
		set_status("rank %lld: no registration thread: %s",
			   (long long)job.rank, strerror(rc));
		return 0;
	}
	pthread_setname_np(thread, "probing-cluster");
	running = 1;
	return 0;
}

void cluster_stop(void)
{
	struct timespec dl;

	if (!running)
		return;
	pthread_mutex_lock(&lock);
	stopping = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
	/* It may be in a store call (bounded by its timeout). */
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 1;
	if (pthread_timedjoin_np(thread, NULL, &dl) != 0)
		pthread_detach(thread);
	running = 0;
}

void cluster_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	/* The parent's list stays (the child is in the same job, as far as
	 * it knows); its thread does not exist here. */
	running = 0;
	stopping = 0;
	job.active = 0;
}
