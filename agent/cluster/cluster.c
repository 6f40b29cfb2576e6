/*
 * cluster: the job's environment, where this rank listens, and the
 * registration thread.  See cluster.h; the node list is cluster_nodes.c,
 * the store cluster_store.c, the choice of address cluster_addr.c.
 */
#include "cluster.h"

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
#include "core/log.h"
#include "server/server.h"
#include "core/thread.h"

struct cluster_job cluster_job;
pthread_mutex_t cluster_job_lock = PTHREAD_MUTEX_INITIALIZER;

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

/* Fills cluster_job from a torchrun-style environment; 0 when in a job. */
static int read_env(void)
{
	struct cluster_job *j = &cluster_job;
	const char *master = getenv("MASTER_ADDR"), *run;
	int64_t port;

	memset(j, 0, sizeof(*j));
	j->local_rank = j->local_world = -1;
	if (env_int("RANK", &j->rank) || env_int("WORLD_SIZE", &j->world) ||
	    !master || !*master || env_int("MASTER_PORT", &port) || port < 1 ||
	    port > 65535 || j->world < 1 || j->world > CLUSTER_WORLD_MAX ||
	    j->rank >= j->world || strlen(master) >= sizeof(j->master))
		return -1;
	env_int("LOCAL_RANK", &j->local_rank);
	env_int("LOCAL_WORLD_SIZE", &j->local_world);
	snprintf(j->master, sizeof(j->master), "%s", master);
	j->master_port = (int)port;
	run = getenv("TORCHELASTIC_RUN_ID");
	snprintf(j->run_id, sizeof(j->run_id), "%s",
		 run && *run && !strchr(run, '/') ? run : "none");
	if (gethostname(j->host, sizeof(j->host)) < 0)
		snprintf(j->host, sizeof(j->host), "?");
	j->host[sizeof(j->host) - 1] = 0;
	/* The JSON we write carries it in quotes. */
	for (char *p = j->host; *p; p++)
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
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		port = -errno;
		close(fd);
		return port;
	}
	port = ntohs(ss.ss_family == AF_INET ? s4->sin_port : s6->sin6_port);
	close(fd);
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

	pthread_mutex_lock(&cluster_job_lock);
	join(host, port, cluster_job.addr, sizeof(cluster_job.addr));
	pthread_mutex_unlock(&cluster_job_lock);
	server_addresses(server, addrs, sizeof(addrs));
	config_set_info("agent.address", addrs);
}

/*
 * Decides where this rank listens.  On loopback (the job on one host):
 * listens now and sets cluster_job.addr.  Beyond: the listening waits
 * for the token (listen_remote, on the thread); an address the user
 * configured beyond loopback (server.listen) is already listened on and
 * is what is registered.  0 or -errno with err.
 */
static int plan_listen(char *err, size_t errlen)
{
	struct cluster_job *j = &cluster_job;
	char setting[CONFIG_VALUE_MAX], host[DAP_ADDR_TEXT_MAX];
	int port = 0, have, rc;

	config_get("cluster.listen_host", setting, sizeof(setting));
	rc = cluster_addr_choose(setting, j->master, j->master_port, j->world,
				 j->local_world, j->bind, j->adv, &j->remote,
				 err, errlen);
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
		else if (cluster_addr_choose("route", j->master, j->master_port,
					     j->world, j->local_world, b2, adv,
					     &remote, err, errlen))
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
	struct cluster_job *j = &cluster_job;
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

/* Ourselves in the list, before the store has us. */
static void put_self(void)
{
	struct cluster_node self;

	cluster_node_init(&self);
	self.rank = cluster_job.rank;
	self.local_rank = cluster_job.local_rank;
	self.pid = getpid();
	self.status = CLUSTER_NODE_UP;
	self.last_seen = cluster_unix_s();
	snprintf(self.host, sizeof(self.host), "%s", cluster_job.host);
	pthread_mutex_lock(&cluster_job_lock);
	snprintf(self.addr, sizeof(self.addr), "%s", cluster_job.addr);
	pthread_mutex_unlock(&cluster_job_lock);
	cluster_nodes_put(&self);
}

static void *register_main(void *arg)
{
	const struct cluster_job *j = &cluster_job;
	double start = cluster_mono_ms();
	char err[256] = "", where[300];
	int backoff = 100, listening = !j->remote;

	(void)arg;
	snprintf(where, sizeof(where), "%.200s:%d", j->master, j->master_port);
	while (cluster_mono_ms() - start < CLUSTER_REGISTER_S * 1000.0) {
		if (cluster_store_find_proto() != 0) {
			snprintf(err, sizeof(err), "torch was never imported");
			cluster_status("rank %lld: waiting for the process to "
				       "import torch, then the store at %s",
				       (long long)j->rank, where);
		} else if (!listening) {
			if (listen_remote(err, sizeof(err)) == 0) {
				listening = 1;
				put_self();
				continue;
			}
			cluster_status("rank %lld: not listening on %s yet: %s",
				       (long long)j->rank, j->bind, err);
		} else if (cluster_store_register(err, sizeof(err)) == 0) {
			cluster_status("rank %lld of %lld: registered in the "
				       "store at %s (run %s) as %s%s",
				       (long long)j->rank, (long long)j->world,
				       where, j->run_id, j->addr,
				       j->remote ? ", with the job's token"
						 : "");
			log_info("cluster: rank %lld registered at %s as %s",
				 (long long)j->rank, where, j->addr);
			return NULL;
		} else {
			cluster_status("rank %lld: waiting for the store at "
				       "%s: %s",
				       (long long)j->rank, where, err);
		}
		if (nap(backoff))
			return NULL;
		if (backoff < 5000)
			backoff *= 2;
	}
	cluster_status("rank %lld: not registered: gave up after %d s (%s)",
		       (long long)j->rank, CLUSTER_REGISTER_S, err);
	log_warn("cluster: rank %lld not registered in the store at %s: %s",
		 (long long)j->rank, where, err);
	return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

int cluster_start(struct server *srv, struct store *st, char *err,
		  size_t errlen)
{
	pthread_condattr_t ca;
	const char *file = getenv("PROBING_NODES");
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
			       (long long)cluster_job.rank, (int)job_rank);
		log_info("cluster: pid %d is a child of rank %lld (pid %d): "
			 "not registered as that rank",
			 (int)getpid(), (long long)cluster_job.rank,
			 (int)job_rank);
		return 0;
	}
	job_rank = getpid();
	server = srv;
	rc = plan_listen(why, sizeof(why));
	if (rc) {
		cluster_status("rank %lld: not listening on TCP: %s",
			       (long long)cluster_job.rank, why);
		log_warn("cluster: not listening on TCP: %s", why);
		return 0;
	}
	cluster_job.active = 1;
	if (!cluster_job.remote)
		put_self();
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_REALTIME);
	pthread_cond_init(&cond, &ca);
	pthread_condattr_destroy(&ca);
	stopping = 0;
	rc = agent_thread_start(&thread, "probing-cluster", register_main,
				NULL);
	if (rc) {
		cluster_status("rank %lld: no registration thread: %s",
			       (long long)cluster_job.rank, strerror(-rc));
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
	pthread_mutex_init(&cluster_job_lock, NULL);
	cluster_nodes_atfork_child();
	cluster_store_atfork_child();
	/* A forked child is never the rank. */
	if (job_rank)
		cluster_role_forked(job_rank);
	/* The parent's list stays (the child is in the same job, as far as
	 * it knows); its thread does not exist here. */
	running = 0;
	stopping = 0;
	cluster_job.active = 0;
}
