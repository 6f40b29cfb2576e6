/*
 * cluster: the job's environment, where this rank listens, and the
 * registration thread.  See cluster.h; the node list is cluster_nodes.c,
 * the store cluster_store.c, the choice of address cluster_addr.c.
 */
#include "cluster.h"
#include "core/env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster_addr.h"
#include "cluster_intern.h"
#include "cluster_nodes.h"
#include "cluster_role.h"
#include "cluster_store.h"
#include "core/auth.h"
#include "core/config.h"
#include "fdown.h"
#include "core/log.h"
#include "core/thread.h"
#include "dap_addr.h"
#include "server/server.h"

/*
 * This process's place in its torch.distributed job, read from the
 * environment by cluster_start() before any thread of ours starts;
 * afterwards only the registration thread writes addr (when it starts
 * listening beyond loopback), under addr_lock, and readers on other
 * threads take that lock for it.
 */
struct cluster_job {
	struct cluster_store_job id; /* rank, world, master, run id, host */
	int active;		     /* in a job, listening on TCP */
	int remote;		     /* beyond loopback: a token first */
	int64_t local_world;	     /* -1: not known */
	char bind[CLUSTER_HOST_MAX]; /* remote: the host to listen on */
	char adv[CLUSTER_HOST_MAX];  /* remote: the host others reach */
	int port;		     /* remote: 0, or the port to take */
	int bound; /* remote: listening at bind:port already */
	char addr[DAP_ADDR_TEXT_MAX]; /* ours as registered; "" not yet */
};

static struct cluster_job job;
static pthread_mutex_t addr_lock = PTHREAD_MUTEX_INITIALIZER;

static struct server *server;

/* The thread, and its stop signal under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t thread;
static pthread_cond_t cond;
static int running, stopping;

/* The rank this process is (its own pid) or descends from; 0 while no
 * job was read.  Kept across fork for cluster_role_forked(). */
static pid_t job_rank;

double cluster_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double cluster_unix_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void cluster_status(const char *fmt, ...)
{
	char text[CONFIG_VALUE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	config_set_info("cluster.status", text);
}

/* ---- the environment ---------------------------------------------------- */

static int env_int(const char *name, int64_t *out)
{
	const char *v = env_get(name);
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
	struct cluster_job *j = &job;
	const char *master = env_get("MASTER_ADDR"), *run;
	int64_t port;

	memset(j, 0, sizeof(*j));
	j->id.local_rank = j->local_world = -1;
	if (env_int("RANK", &j->id.rank) ||
	    env_int("WORLD_SIZE", &j->id.world) || !master || !*master ||
	    env_int("MASTER_PORT", &port) || port < 1 || port > 65535 ||
	    j->id.world < 1 || j->id.world > CLUSTER_WORLD_MAX ||
	    j->id.rank >= j->id.world || strlen(master) >= sizeof(j->id.master))
		return -1;
	env_int("LOCAL_RANK", &j->id.local_rank);
	env_int("LOCAL_WORLD_SIZE", &j->local_world);
	snprintf(j->id.master, sizeof(j->id.master), "%s", master);
	j->id.master_port = (int)port;
	run = env_get("TORCHELASTIC_RUN_ID");
	snprintf(j->id.run_id, sizeof(j->id.run_id), "%s",
		 run && *run && !strchr(run, '/') ? run : "none");
	if (gethostname(j->id.host, sizeof(j->id.host)) < 0)
		snprintf(j->id.host, sizeof(j->id.host), "?");
	j->id.host[sizeof(j->id.host) - 1] = 0;
	/* The JSON we write carries it in quotes. */
	for (char *p = j->id.host; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			*p = '_';
	return 0;
}

/* ---- listening ----------------------------------------------------------- */

/* "host:port", with brackets for an IPv6 host. */
static void join(const char *host, int port, char *out, size_t outlen)
{
	snprintf(out, outlen, strchr(host, ':') ? "[%.200s]:%d" : "%.200s:%d",
		 host, port);
}

/* The first TCP listener of the server: its host and port.  0 or
 * -ENOENT. */
static int tcp_listener(char *host, size_t hostlen, int *port)
{
	char all[1024], *save = NULL;
	struct dap_addr a;

	server_addresses(server, all, sizeof(all));
	for (char *t = strtok_r(all, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (dap_addr_parse(t, &a, NULL, 0) == 0 &&
		    a.kind == DAP_ADDR_TCP) {
			snprintf(host, hostlen, "%s", a.host);
			*port = a.port;
			return 0;
		}
	}
	return -ENOENT;
}

/* A free TCP port on host (the kernel's choice), or -errno. */
static int free_port(const char *host)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	struct fdown s;
	int fd, port;

	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		sl = sizeof(*s4);
	} else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		sl = sizeof(*s6);
	} else {
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if ((port = fdown_take(&s, fd)))
		return port;
	if (bind(s.fd, (struct sockaddr *)&ss, sl) < 0 ||
	    getsockname(s.fd, (struct sockaddr *)&ss, &sl) < 0)
		port = -errno;
	else
		port = ntohs(ss.ss_family == AF_INET ? s4->sin_port
						     : s6->sin6_port);
	fdown_close(&s);
	return port;
}

/* Listens on host:port (port 0: a free one); the port taken in *got. */
static int listen_on(const char *host, int port, int *got, char *err,
		     size_t errlen)
{
	char text[DAP_ADDR_TEXT_MAX], canon[DAP_ADDR_TEXT_MAX];
	int rc = -EADDRINUSE;

	/* Another process may take a free port between our probe and our
	 * bind: try a few. */
	for (int i = 0; i < 8 && rc == -EADDRINUSE; i++) {
		int p = port ? port : free_port(host);

		if (p < 0) {
			snprintf(err, errlen, "no free port on %.64s: %s", host,
				 strerror(-p));
			return p;
		}
		join(host, p, text, sizeof(text));
		rc = server_listen(server, text, canon, sizeof(canon), err,
				   errlen);
		*got = p;
		if (port)
			break;
	}
	return rc;
}

static void set_addr(const char *host, int port)
{
	char addrs[1024];

	pthread_mutex_lock(&addr_lock);
	join(host, port, job.addr, sizeof(job.addr));
	pthread_mutex_unlock(&addr_lock);
	server_addresses(server, addrs, sizeof(addrs));
	config_set_info("agent.address", addrs);
}

/*
 * Decides where this rank listens.  On loopback (the job on one host):
 * listens now and sets job.addr.  Beyond: the listening waits
 * for the token (listen_remote, on the thread); an address the user
 * configured beyond loopback (server.listen) is already listened on and
 * is what is registered.  0 or -errno with err.
 */
static int plan_listen(char *err, size_t errlen)
{
	struct cluster_job *j = &job;
	char setting[CONFIG_VALUE_MAX], host[DAP_ADDR_TEXT_MAX];
	int port = 0, have, rc;

	config_get("cluster.listen_host", setting, sizeof(setting));
	rc = cluster_addr_choose(setting, j->id.master, j->id.master_port,
				 j->id.world, j->local_world, j->bind, j->adv,
				 &j->remote, err, errlen);
	if (rc)
		return rc;
	have = tcp_listener(host, sizeof(host), &port) == 0;
	if (have && !cluster_addr_is_loopback(host)) {
		/* server.listen beyond loopback: that one, reached at the
		 * route's address when it is a wildcard. */
		char adv[CLUSTER_HOST_MAX], b2[CLUSTER_HOST_MAX];
		int remote;

		if (!cluster_addr_is_any(host))
			snprintf(adv, sizeof(adv), "%.63s", host);
		else if (j->remote)
			memcpy(adv, j->adv, sizeof(adv));
		else if (cluster_addr_choose("route", j->id.master,
					     j->id.master_port, j->id.world,
					     j->local_world, b2, adv, &remote,
					     err, errlen))
			snprintf(adv, sizeof(adv), "127.0.0.1");
		snprintf(j->bind, sizeof(j->bind), "%.63s", host);
		memcpy(j->adv, adv, sizeof(adv));
		j->remote = 1;
		j->port = port;
		j->bound = 1;
		return 0;
	}
	if (j->remote) {
		/* PROBING_PORT's port per local rank, on the other address. */
		j->port = have ? port : 0;
		return 0;
	}
	if (have) {
		set_addr(host, port);
		return 0;
	}
	rc = listen_on(j->bind, 0, &port, err, errlen);
	if (rc == 0)
		set_addr(j->bind, port);
	return rc;
}

/* Thread: listens beyond loopback (the token adopted first). */
static int listen_remote(char *err, size_t errlen)
{
	struct cluster_job *j = &job;
	int port, rc;

	rc = cluster_store_share_token(err, errlen);
	if (rc)
		return rc;
	if (j->bound) {
		port = j->port;
	} else {
		rc = listen_on(j->bind, j->port, &port, err, errlen);
		if (rc)
			return rc;
	}
	set_addr(j->adv, port);
	return 0;
}

/* ---- the thread --------------------------------------------------------- */

/* Sleeps ms unless stopped; returns stopping. */
static int nap(int ms)
{
	struct timespec dl;
	int stop;

	agent_deadline(&dl, CLOCK_REALTIME, ms);
	pthread_mutex_lock(&lock);
	if (!stopping)
		pthread_cond_timedwait(&cond, &lock, &dl);
	stop = stopping;
	pthread_mutex_unlock(&lock);
	return stop;
}

/* Our workers as registered last (the registration thread's). */
static pid_t workers[CLUSTER_WORKERS_MAX];
static int nworkers;

/* Ourselves in the list, before the store has us. */
static void put_self(void)
{
	struct cluster_node self;

	cluster_node_init(&self);
	for (int i = 0; i < nworkers; i++)
		self.workers[self.nworkers++] = workers[i];
	self.rank = job.id.rank;
	self.local_rank = job.id.local_rank;
	self.pid = getpid();
	self.status = CLUSTER_NODE_UP;
	self.last_seen = cluster_unix_s();
	snprintf(self.host, sizeof(self.host), "%s", job.id.host);
	pthread_mutex_lock(&addr_lock);
	snprintf(self.addr, sizeof(self.addr), "%s", job.addr);
	pthread_mutex_unlock(&addr_lock);
	cluster_nodes_put(&self);
}

/* Registered: registers again whenever our workers change (DataLoader
 * workers come with each epoch's iterator), looking every
 * CLUSTER_REFRESH_MS, until the agent stops. */
static void watch_workers(const struct cluster_job *j)
{
	pid_t now[CLUSTER_WORKERS_MAX];
	char err[256];
	int n;

	while (!nap(CLUSTER_REFRESH_MS)) {
		n = cluster_role_workers(now, CLUSTER_WORKERS_MAX);
		if (n == nworkers &&
		    !memcmp(now, workers, (size_t)n * sizeof(*now)))
			continue;
		memcpy(workers, now, (size_t)n * sizeof(*now));
		nworkers = n;
		put_self();
		if (cluster_store_register(j->addr, workers, nworkers, err,
					   sizeof(err)))
			log_info("cluster: registering %d workers: %s", n, err);
	}
}

static void *register_main(void *arg)
{
	const struct cluster_job *j = &job;
	double start = cluster_mono_ms();
	char err[256] = "", where[300];
	int backoff = 100, listening = !j->remote;

	(void)arg;
	snprintf(where, sizeof(where), "%.200s:%d", j->id.master,
		 j->id.master_port);
	while (cluster_mono_ms() - start < CLUSTER_REGISTER_S * 1000.0) {
		if (cluster_store_find_proto() != 0) {
			snprintf(err, sizeof(err), "torch was never imported");
			cluster_status("rank %lld: waiting for the process to "
				       "import torch, then the store at %s",
				       (long long)j->id.rank, where);
		} else if (!listening) {
			if (listen_remote(err, sizeof(err)) == 0) {
				listening = 1;
				put_self();
				continue;
			}
			cluster_status("rank %lld: not listening on %s yet: %s",
				       (long long)j->id.rank, j->bind, err);
		} else if (cluster_store_register(j->addr, workers, nworkers,
						  err, sizeof(err)) == 0) {
			cluster_status(
				"rank %lld of %lld: registered in the "
				"store at %s (run %s) as %s%s",
				(long long)j->id.rank, (long long)j->id.world,
				where, j->id.run_id, j->addr,
				j->remote ? ", with the job's token" : "");
			log_info("cluster: rank %lld registered at %s as %s",
				 (long long)j->id.rank, where, j->addr);
			watch_workers(j);
			return NULL;
		} else {
			cluster_status("rank %lld: waiting for the store at "
				       "%s: %s",
				       (long long)j->id.rank, where, err);
		}
		if (nap(backoff))
			return NULL;
		if (backoff < 5000)
			backoff *= 2;
	}
	cluster_status("rank %lld: not registered: gave up after %d s (%s)",
		       (long long)j->id.rank, CLUSTER_REGISTER_S, err);
	log_warn("cluster: rank %lld not registered in the store at %s: %s",
		 (long long)j->id.rank, where, err);
	return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

int cluster_start(struct server *srv, struct store *st, char *err,
		  size_t errlen)
{
	pthread_condattr_t ca;
	const char *file = env_get("PROBING_NODES");
	char why[256];
	int rc;

	rc = cluster_nodes_table(st, err, errlen);
	if (rc)
		return rc;
	if (file && *file &&
	    (rc = cluster_add_file(file, why, sizeof(why))) < 0)
		log_warn("PROBING_NODES: %s", why);
	if (read_env()) {
		cluster_status("not in a torch.distributed job (no RANK, "
			       "WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
		return 0;
	}
	if (cluster_role_child_of_rank(&job_rank)) {
		cluster_status("a child of rank %lld (pid %d), not the rank: "
			       "not registered (the rank's own agent answers "
			       "for it)",
			       (long long)job.id.rank, (int)job_rank);
		log_info("cluster: pid %d is a child of rank %lld (pid %d): "
			 "not registered as that rank",
			 (int)getpid(), (long long)job.id.rank, (int)job_rank);
		return 0;
	}
	job_rank = getpid();
	server = srv;
	rc = plan_listen(why, sizeof(why));
	if (rc) {
		cluster_status("rank %lld: not listening on TCP: %s",
			       (long long)job.id.rank, why);
		log_warn("cluster: not listening on TCP: %s", why);
		return 0;
	}
	job.active = 1;
	cluster_store_begin(&job.id);
	if (!job.remote)
		put_self();
	/* Until the thread's first look: never an empty status. */
	cluster_status("rank %lld: registering in the store at %.200s:%d",
		       (long long)job.id.rank, job.id.master,
		       job.id.master_port);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_REALTIME);
	pthread_cond_init(&cond, &ca);
	pthread_condattr_destroy(&ca);
	stopping = 0;
	rc = agent_thread_start(&thread, "probing-cluster", register_main,
				NULL);
	if (rc) {
		cluster_status("rank %lld: no registration thread: %s",
			       (long long)job.id.rank, strerror(-rc));
		return 0;
	}
	running = 1;
	return 0;
}

void cluster_stop(void)
{
	if (!running)
		return;
	pthread_mutex_lock(&lock);
	stopping = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
	/* It may be in a store call (bounded by its timeout). */
	agent_thread_join(thread, 1000);
	running = 0;
}

void cluster_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_mutex_init(&addr_lock, NULL);
	cluster_nodes_atfork_child();
	cluster_store_atfork_child();
	/* A forked child is never the rank. */
	if (job_rank)
		cluster_role_forked(job_rank);
	/* The parent's list stays (the child is in the same job, as far as
	 * it knows); its thread does not exist here. */
	running = 0;
	stopping = 0;
	job.active = 0;
}
