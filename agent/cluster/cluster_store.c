/*
 * cluster_store: registration, the node list from the store, the job's
 * token.  See cluster_store.h.
 */
#include "cluster_store.h"

#include "cpython/pycompat.h"
#include <cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_intern.h"
#include "cluster_nodes.h"
#include "core/auth.h"
#include "core/log.h"
#include "python/pygil.h"
#include "tcpstore.h"

/* The store's protocol and the last full read, under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static enum tcpstore_proto proto;
static int proto_known;
static double last_refresh; /* cluster_mono_ms() */
static struct cluster_store_job job; /* set before any thread of ours */
static int active;

static void rank_key(int64_t rank, char *out, size_t outlen)
{
	snprintf(out, outlen, "/probing/%s/rank/%lld", job.run_id,
		 (long long)rank);
}

/* A connection to the store; 0 or -errno (-EAGAIN: protocol unknown). */
static int connect_store(struct tcpstore **ts, char *err, size_t errlen)
{
	enum tcpstore_proto p;
	int known;

	pthread_mutex_lock(&lock);
	p = proto;
	known = proto_known;
	pthread_mutex_unlock(&lock);
	if (!known) {
		snprintf(err, errlen, "the store's protocol is not known yet");
		return -EAGAIN;
	}
	return tcpstore_connect(job.master, job.master_port, p,
				CLUSTER_STORE_TIMEOUT_MS, ts, err, errlen);
}

/* ---- the protocol -------------------------------------------------------- */

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

int cluster_store_find_proto(void)
{
	struct pygil_limits lim = {.start_ms = 200};
	struct version_call c = {""};
	enum tcpstore_proto p;
	int known;

	pthread_mutex_lock(&lock);
	known = proto_known;
	pthread_mutex_unlock(&lock);
	if (known)
		return 0;
	/* A quick call: waits until it is done. */
	if (pygil_run(torch_version_fn, &c, &lim, NULL) != 0 || !c.text[0] ||
	    tcpstore_proto_for(c.text, &p) != 0)
		return -EAGAIN;
	pthread_mutex_lock(&lock);
	proto = p;
	proto_known = 1;
	pthread_mutex_unlock(&lock);
	return 0;
}

/* ---- the token ---------------------------------------------------------- */

int cluster_store_share_token(char *err, size_t errlen)
{
	char key[192], fresh[AUTH_TOKEN_GENERATED_LEN + 1], why[256];
	struct tcpstore *ts;
	char *winner = NULL;
	int rc;

	if (auth_token_is_users()) {
		if (auth_token())
			return 0;
		if (auth_tokenless())
			snprintf(err, errlen,
				 "PROBING_TOKEN=" AUTH_TOKEN_NONE " (no token) "
				 "is for loopback only, and a job across hosts "
				 "listens beyond it: give every rank the same "
				 "PROBING_TOKEN, or unset it to share the "
				 "job's token");
		else
			snprintf(err, errlen,
				 "PROBING_TOKEN is set but is not a token");
		return -EINVAL;
	}
	rc = auth_token_generate(fresh, sizeof(fresh), err, errlen);
	if (rc)
		return rc;
	rc = connect_store(&ts, err, errlen);
	if (rc)
		return rc;
	snprintf(key, sizeof(key), "/probing/%s/token", job.run_id);
	rc = tcpstore_compare_set(ts, key, "", fresh, &winner, err, errlen);
	tcpstore_free(ts);
	if (rc)
		return rc;
	rc = auth_token_adopt(winner, why, sizeof(why));
	if (rc)
		snprintf(err, errlen, "the store's token at %s: %s", key + 1,
			 why);
	else
		log_info("cluster: the job's token is %s the store (%s)",
			 strcmp(winner, fresh) ? "from" : "ours, put in",
			 key + 1);
	free(winner);
	return rc;
}

/* ---- registrations ------------------------------------------------------- */

/* A registration's JSON into n.  0 or -EINVAL. */
static int parse_node(const char *text, struct cluster_node *n)
{
	cJSON *j = cJSON_Parse(text);
	const cJSON *v, *w;
	int rc = -EINVAL;

	cluster_node_init(n);
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
	v = cJSON_GetObjectItemCaseSensitive(j, "workers");
	cJSON_ArrayForEach(w, v)
	{
		if (cJSON_IsNumber(w) && n->nworkers < CLUSTER_WORKERS_MAX)
			n->workers[n->nworkers++] = (int64_t)w->valuedouble;
	}
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

		for (int64_t r = base; r < job.world && n < TCPSTORE_BATCH_MAX;
		     r++) {
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
		for (size_t i = 0; i < m; i++) {
			struct cluster_node nd;

			if (parse_node(values[i], &nd) == 0)
				cluster_nodes_put(&nd);
			free(values[i]);
		}
	}
	pthread_mutex_unlock(&buf_lock);
	if (!rc) {
		pthread_mutex_lock(&lock);
		last_refresh = cluster_mono_ms();
		pthread_mutex_unlock(&lock);
	}
	return rc;
}

void cluster_store_refresh(void)
{
	struct tcpstore *ts;
	char err[256];
	int known, stale;

	pthread_mutex_lock(&lock);
	known = proto_known;
	stale = cluster_mono_ms() - last_refresh >= CLUSTER_REFRESH_MS;
	pthread_mutex_unlock(&lock);
	/* While some ranks are missing (the job is starting), every read
	 * asks the store again. */
	if (!active || !known ||
	    (!stale && cluster_nodes_ranks_known(job.world) >= job.world))
		return;
	if (connect_store(&ts, err, sizeof(err)) == 0) {
		if (refresh_with(ts, err, sizeof(err)))
			log_info("cluster: reading the store: %s", err);
		tcpstore_free(ts);
	}
}

/* Our registration, as JSON. */
static int registration(const char *addr, const pid_t *workers, int nworkers,
			char *out, size_t outlen)
{
	int n = snprintf(out, outlen,
			 "{\"rank\":%lld,\"local_rank\":%lld,\"world_size\":"
			 "%lld,\"host\":\"%s\",\"pid\":%d,\"addr\":\"%s\","
			 "\"workers\":[",
			 (long long)job.rank, (long long)job.local_rank,
			 (long long)job.world, job.host, (int)getpid(), addr);

	for (int i = 0; i < nworkers && n > 0 && (size_t)n + 16 < outlen; i++)
		n += snprintf(out + n, outlen - (size_t)n, "%s%d", i ? "," : "",
			      (int)workers[i]);
	if (n > 0 && (size_t)n + 3 < outlen)
		n += snprintf(out + n, outlen - (size_t)n, "]}");
	return n;
}

int cluster_store_register(const char *addr, const pid_t *workers, int nworkers,
			   char *err, size_t errlen)
{
	struct tcpstore *ts;
	char key[192], value[1024];
	int n, rc;

	rc = connect_store(&ts, err, errlen);
	if (rc)
		return rc;
	rank_key(job.rank, key, sizeof(key));
	n = registration(addr, workers, nworkers, value, sizeof(value));
	rc = tcpstore_set(ts, key, value, (size_t)n, err, errlen);
	if (!rc && refresh_with(ts, err, errlen))
		log_info("cluster: reading the store: %s", err);
	tcpstore_free(ts);
	return rc;
}

void cluster_store_begin(const struct cluster_store_job *j)
{
	job = *j;
	active = 1;
}

void cluster_store_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	active = 0;
}
