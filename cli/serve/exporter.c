/*
 * exporter: see exporter.h.
 */
#include "serve/exporter.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "cmd.h"
#include "fanout.h"
#include "proc.h"
#include "render/promtext.h"
#include "serve/listen.h"

#define AGENTS_MAX 4096
#define CONNECTIONS_MAX 16

struct exporter {
	const struct exporter_opts *o;
	pthread_mutex_t lock; /* one scrape at a time (fanout_run's rule) */
};

/* An agent's labels: pid, and where its environment says so rank,
 * local_rank and run_id (torchrun's: "job" is Prometheus's own label).
 * The texts are in the struct. */
struct labels {
	const char *kv[9];
	char pid[16], rank[16], local[16], job[128];
};

static void labels_of(const char *target, struct labels *l)
{
	static const struct {
		const char *var, *name;
		size_t off, len;
	} env[] = {
		{"RANK=", "rank", offsetof(struct labels, rank), 16},
		{"LOCAL_RANK=", "local_rank", offsetof(struct labels, local),
		 16},
		{"TORCHELASTIC_RUN_ID=", "run_id", offsetof(struct labels, job),
		 128},
	};
	char buf[65536];
	char *endp;
	long pid = strtol(target, &endp, 10);
	ssize_t n = *endp || pid <= 0 ? -1
				       : cli_proc_environ((pid_t)pid, buf,
							  sizeof(buf));
	size_t k = 0;

	memset(l, 0, sizeof(*l));
	snprintf(l->pid, sizeof(l->pid), "%s", *endp ? "" : target);
	l->kv[k++] = *endp ? "target" : "pid";
	l->kv[k++] = *endp ? target : l->pid;
	for (size_t i = 0; i < sizeof(env) / sizeof(*env) && n > 0; i++) {
		const char *v = cli_env_value(buf, (size_t)n, env[i].var);
		char *out = (char *)l + env[i].off;

		if (!v || !*v)
			continue;
		snprintf(out, env[i].len, "%s", v);
		l->kv[k++] = env[i].name;
		l->kv[k++] = out;
	}
	l->kv[k] = NULL;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One scrape: the text, or NULL (out of memory). */
static char *scrape(struct exporter *x, size_t *len)
{
	pid_t pids[AGENTS_MAX];
	struct fanout_node *nodes = NULL;
	struct fanout_result *res = NULL;
	struct prom_agent *agents = NULL;
	struct labels *labels = NULL;
	double t0 = now_s();
	char *text = NULL;
	int n;

	if (x->o->target)
		n = 1;
	else if ((n = cli_list_agents(pids, AGENTS_MAX)) < 0)
		n = 0;
	nodes = calloc(n ? (size_t)n : 1, sizeof(*nodes));
	res = calloc(n ? (size_t)n : 1, sizeof(*res));
	agents = calloc(n ? (size_t)n : 1, sizeof(*agents));
	labels = calloc(n ? (size_t)n : 1, sizeof(*labels));
	if (!nodes || !res || !agents || !labels)
		goto out;
	for (int i = 0; i < n; i++) {
		nodes[i].rank = -1;
		if (x->o->target)
			snprintf(nodes[i].addr, sizeof(nodes[i].addr), "%s",
				 x->o->target);
		else
			snprintf(nodes[i].addr, sizeof(nodes[i].addr), "%d",
				 (int)pids[i]);
		labels_of(nodes[i].addr, &labels[i]);
	}
	if (n && fanout_run(nodes, (size_t)n, "probing/metrics", NULL,
			    x->o->timeout_ms, res))
		goto out;
	for (int i = 0; i < n; i++) {
		agents[i].labels = labels[i].kv;
		if (res[i].rc == CLI_OK && res[i].resp->success)
			agents[i].metrics = cJSON_GetObjectItemCaseSensitive(
				res[i].resp->body, "metrics");
	}
	text = promtext_render(agents, (size_t)n, now_s() - t0, len);
out:
	for (int i = 0; res && i < n; i++)
		fanout_result_release(&res[i]);
	free(nodes);
	free(res);
	free(agents);
	free(labels);
	return text;
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status,
			      const char *type, char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result rc;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result plain(struct MHD_Connection *c, unsigned status,
			     const char *text)
{
	char *body = strdup(text);

	return body ? answer(c, status, "text/plain; charset=utf-8", body,
			     strlen(body))
		    : MHD_NO;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_len, void **state)
{
	struct exporter *x = cls;
	size_t len = 0;
	char *text;

	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	if (strcmp(method, "GET") && strcmp(method, "HEAD"))
		return plain(c, MHD_HTTP_METHOD_NOT_ALLOWED,
			     "probing exporter: GET /metrics\n");
	if (!strcmp(url, "/"))
		return plain(c, MHD_HTTP_OK,
			     "probing exporter: the agents' metrics are at "
			     "/metrics (docs/metrics.md)\n");
	if (strcmp(url, "/metrics"))
		return plain(c, MHD_HTTP_NOT_FOUND,
			     "probing exporter: no such page; the metrics "
			     "are at /metrics\n");
	pthread_mutex_lock(&x->lock);
	text = scrape(x, &len);
	pthread_mutex_unlock(&x->lock);
	if (!text)
		return plain(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			     "probing exporter: out of memory\n");
	return answer(c, MHD_HTTP_OK, "text/plain; version=0.0.4; "
				      "charset=utf-8",
		      text, len);
}

int exporter_serve(const struct exporter_opts *o, FILE *say, char *err,
		   size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV | AI_PASSIVE},
			*ai = NULL;
	static struct exporter x = {.lock = PTHREAD_MUTEX_INITIALIZER};
	const union MHD_DaemonInfo *info;
	char host[256], port[16];
	struct MHD_Daemon *d;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD;
	sigset_t stop;
	int rc, sig;

	x.o = o;
	if (listen_split(o->listen, host, sizeof(host), port, sizeof(port))) {
		snprintf(err, errlen, "--listen %s: give HOST:PORT", o->listen);
		return -1;
	}
	if ((rc = getaddrinfo(host, port, &hints, &ai))) {
		snprintf(err, errlen, "--listen %s: %s", o->listen,
			 gai_strerror(rc));
		return -1;
	}
	/* The signals end it: blocked before MHD's thread starts, so that
	 * it inherits the mask and sigwait below takes them. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	d = MHD_start_daemon(flags, 0, NULL, NULL, handle, &x,
			     MHD_OPTION_SOCK_ADDR, ai->ai_addr,
			     MHD_OPTION_CONNECTION_LIMIT, CONNECTIONS_MAX,
			     MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_END);
	if (!d) {
		snprintf(err, errlen,
			 "cannot listen on %s (in use, or not an address of "
			 "this machine)",
			 o->listen);
		freeaddrinfo(ai);
		return -1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	fprintf(say, "probing exporter: http://%s%s%s:%d/metrics\n",
		ai->ai_family == AF_INET6 ? "[" : "", host,
		ai->ai_family == AF_INET6 ? "]" : "",
		info ? info->port : atoi(port));
	if (!listen_loopback(ai->ai_addr))
		fprintf(say, "probing exporter: listening beyond loopback: "
			     "anyone who reaches the port reads the agents' "
			     "figures\n");
	fflush(say);
	freeaddrinfo(ai);
	while (sigwait(&stop, &sig) == EINTR)
		;
	MHD_stop_daemon(d);
	return 0;
}
