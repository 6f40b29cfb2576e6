/*
 * fanout: see fanout.h.
 */
#include "fanout.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "recorded.h"
#include "target.h"

struct job {
	const struct fanout_node *nodes;
	size_t n;
	const char *command;
	const cJSON *args;
	int timeout_ms;
	struct fanout_result *out;
	size_t next; /* under lock */
	pthread_mutex_t lock;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A node that is a recording: answered from its files. */
static void one_recorded(struct job *j, size_t i)
{
	const struct fanout_node *nd = &j->nodes[i];
	struct fanout_result *r = &j->out[i];
	struct recorded *rec = NULL;
	double t0 = now_ms();
	int rc;

	rc = recorded_open(nd->rec, &rec, r->err, sizeof(r->err));
	if (rc) {
		r->rc = CLI_EFAIL;
	} else {
		rc = recorded_request(rec, j->command, j->args, &r->resp);
		r->rc = rc ? CLI_EFAIL : CLI_OK;
		if (rc == -ENOTSUP)
			snprintf(r->err, sizeof(r->err),
				 "a recording has no answer to %s: it needs "
				 "the running process",
				 j->command);
		else if (rc)
			snprintf(r->err, sizeof(r->err), "%s", strerror(-rc));
	}
	recorded_free(rec);
	r->ms = now_ms() - t0;
}

static void one(struct job *j, size_t i)
{
	const struct fanout_node *nd = &j->nodes[i];
	struct fanout_result *r = &j->out[i];
	struct dap_client *c = NULL;
	cJSON *init = NULL, *args;
	char why[512];
	double t0 = now_ms();
	int rc;

	if (nd->rec[0]) {
		one_recorded(j, i);
		return;
	}
	rc = cli_target_open(nd->addr, j->timeout_ms, &c, &init, r->err,
			     sizeof(r->err));
	if (rc != CLI_OK) {
		r->rc = rc;
		r->ms = now_ms() - t0;
		return;
	}
	cJSON_Delete(init);
	args = j->args ? cJSON_Duplicate(j->args, 1) : NULL;
	rc = dap_client_request(c, j->command, args, j->timeout_ms, &r->resp,
				why, sizeof(why));
	if (rc < 0) {
		r->rc = cli_target_lost(rc, j->command, j->timeout_ms, r->err,
					sizeof(r->err));
		r->resp = NULL;
	} else {
		r->rc = CLI_OK;
	}
	r->ms = now_ms() - t0;
	/* Closing the connection is the agent's disconnect. */
	dap_client_free(c);
}

static void *worker(void *arg)
{
	struct job *j = arg;

	for (;;) {
		size_t i;

		pthread_mutex_lock(&j->lock);
		i = j->next++;
		pthread_mutex_unlock(&j->lock);
		if (i >= j->n)
			return NULL;
		one(j, i);
	}
}

int fanout_run(const struct fanout_node *nodes, size_t n, const char *command,
	       const cJSON *args, int timeout_ms, struct fanout_result *out)
{
	pthread_t th[FANOUT_THREADS];
	sigset_t all, old;
	struct job j = {nodes, n, command, args, timeout_ms, out, 0,
			PTHREAD_MUTEX_INITIALIZER};
	size_t nth = n < FANOUT_THREADS ? n : FANOUT_THREADS, started = 0;

	if (n > FANOUT_NODES_MAX)
		return -E2BIG;
	memset(out, 0, n * sizeof(*out));
	/* Ctrl-C stays with the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (; started < nth; started++) {
		pthread_attr_t a;
		int rc;

		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 256 << 10);
		rc = pthread_create(&th[started], &a, worker, &j);
		pthread_attr_destroy(&a);
		if (rc)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (started == 0 && n > 0)
		worker(&j); /* no threads at all: one by one */
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_destroy(&j.lock);
	return 0;
}

void fanout_result_release(struct fanout_result *r)
{
	if (r->resp)
		dap_message_free(r->resp);
	r->resp = NULL;
}

int fanout_read_nodes(const char *path, struct fanout_node **out, char *err,
		      size_t errlen)
{
	FILE *f = fopen(path, "re");
	struct fanout_node *v = NULL;
	size_t n = 0, cap = 0;
	int64_t next = 0;
	char line[1024];
	int lineno = 0, rc = 0;

	*out = NULL;
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(errno));
		return rc;
	}
	while (fgets(line, sizeof(line), f)) {
		const char *node;
		struct dap_addr a;
		char why[256];
		long long rank;
		int got;

		lineno++;
		got = dap_addr_node_line(line, &node, &rank);
		if (got == 0)
			continue;
		if (got < 0 || dap_addr_parse(node, &a, why, sizeof(why)) ||
		    a.kind != DAP_ADDR_TCP) {
			snprintf(err, errlen, "%s:%d: expected HOST:PORT [RANK]",
				 path, lineno);
			rc = -EINVAL;
			break;
		}
		if (n == FANOUT_NODES_MAX) {
			snprintf(err, errlen, "%s: more than %d nodes", path,
				 FANOUT_NODES_MAX);
			rc = -E2BIG;
			break;
		}
		if (n == cap) {
			struct fanout_node *p;

			cap = cap ? cap * 2 : 64;
			p = realloc(v, cap * sizeof(*v));
			if (!p) {
				rc = -ENOMEM;
				snprintf(err, errlen, "out of memory");
				break;
			}
			v = p;
		}
		memset(&v[n], 0, sizeof(v[n])); /* rec "": an agent's node */
		v[n].rank = rank >= 0 ? rank : next;
		if (v[n].rank >= next)
			next = v[n].rank + 1;
		snprintf(v[n].host, sizeof(v[n].host), "%s", a.host);
		dap_addr_format(&a, v[n].addr, sizeof(v[n].addr));
		n++;
	}
	fclose(f);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	return (int)n;
}
