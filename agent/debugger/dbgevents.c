/*
 * dbgevents: the debugger's DAP events.  See dbgevents.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpython/cpython.h"
#include "dap_msg.h"
#include "dbgevents.h"
#include "python/pygil.h"
#include "server/server.h"

#define KNOWN_THREADS_MAX 256
#define THREADS_SCAN KNOWN_THREADS_MAX

static struct server *dbg_server;
static _Atomic uint64_t owner; /* the attached session, 0: none */

/* The threads the attached session knows of (thread events). */
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static long known[KNOWN_THREADS_MAX]; /* guarded by known_lock */
static size_t nknown;
static uint64_t known_session;

/* Logpoint output's budget (DBGEVENTS_LOG_RATE), under log_lock. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static double log_tokens = DBGEVENTS_LOG_RATE, log_refilled_ms;
static unsigned long long log_dropped;

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether one more logpoint message may go now; counts it dropped if
 * not. */
static int log_admit(void)
{
	double now = mono_ms();
	int ok;

	pthread_mutex_lock(&log_lock);
	log_tokens += (now - log_refilled_ms) * DBGEVENTS_LOG_RATE / 1e3;
	if (log_tokens > DBGEVENTS_LOG_RATE)
		log_tokens = DBGEVENTS_LOG_RATE;
	log_refilled_ms = now;
	ok = log_tokens >= 1;
	if (ok)
		log_tokens -= 1;
	else
		log_dropped++;
	pthread_mutex_unlock(&log_lock);
	return ok;
}

/* Loop thread (the tick): says how many were dropped since it last
 * said. */
static void log_report_dropped(void)
{
	unsigned long long n;
	char text[200];

	pthread_mutex_lock(&log_lock);
	n = log_dropped;
	log_dropped = 0;
	pthread_mutex_unlock(&log_lock);
	if (!n)
		return;
	snprintf(text, sizeof(text),
		 "probing: %llu logpoint message%s dropped: more than %d a "
		 "second (a logpoint on a hot line?)\n",
		 n, n == 1 ? "" : "s", DBGEVENTS_LOG_RATE);
	dbgevents_stream("console", text);
}

void dbgevents_set_owner(uint64_t session)
{
	atomic_store(&owner, session);
}

static void post(struct dap_message *ev)
{
	uint64_t s = atomic_load(&owner);

	if (!ev)
		return;
	if (!s || !dbg_server) {
		dap_message_free(ev);
		return;
	}
	server_post_event(dbg_server, s, ev);
}

void dbgevents_output(const char *category, const char *text, const char *path,
		      int line)
{
	struct dap_message *ev;
	size_t n = strlen(text);
	char *t;

	if (!atomic_load(&owner) || !log_admit())
		return;
	ev = dap_event_new("output");
	if (!ev)
		return;
	t = malloc(n + 2);
	if (!t) {
		dap_message_free(ev);
		return;
	}
	memcpy(t, text, n);
	t[n] = '\n';
	t[n + 1] = 0;
	cJSON_AddStringToObject(ev->body, "category", category);
	cJSON_AddStringToObject(ev->body, "output", t);
	free(t);
	if (path) {
		cJSON *src = cJSON_AddObjectToObject(ev->body, "source");
		if (src)
			cJSON_AddStringToObject(src, "path", path);
		cJSON_AddNumberToObject(ev->body, "line", line);
	}
	post(ev);
}

void dbgevents_stream(const char *category, const char *text)
{
	struct dap_message *ev = dap_event_new("output");

	if (!ev)
		return;
	cJSON_AddStringToObject(ev->body, "category", category);
	cJSON_AddStringToObject(ev->body, "output", text);
	post(ev);
}

void dbgevents_verified(const int *ids, const int *lines, int n)
{
	for (int i = 0; i < n; i++) {
		struct dap_message *ev = dap_event_new("breakpoint");
		cJSON *bp;

		if (!ev)
			return;
		cJSON_AddStringToObject(ev->body, "reason", "changed");
		bp = cJSON_AddObjectToObject(ev->body, "breakpoint");
		if (bp) {
			cJSON_AddNumberToObject(bp, "id", ids[i]);
			cJSON_AddBoolToObject(bp, "verified", 1);
			cJSON_AddNumberToObject(bp, "line", lines[i]);
		}
		post(ev);
	}
}

void dbgevents_stopped(const char *reason, long tid, int first, const int *ids,
		       int nids, const char *text)
{
	struct dap_message *ev = dap_event_new("stopped");
	cJSON *arr;

	if (!ev)
		return;
	cJSON_AddStringToObject(ev->body, "reason", reason);
	cJSON_AddNumberToObject(ev->body, "threadId", (double)tid);
	cJSON_AddBoolToObject(ev->body, "allThreadsStopped", 1);
	cJSON_AddBoolToObject(ev->body, "preserveFocusHint", !first);
	if (text) {
		cJSON_AddStringToObject(ev->body, "description", text);
		cJSON_AddStringToObject(ev->body, "text", text);
	}
	if (nids) {
		arr = cJSON_AddArrayToObject(ev->body, "hitBreakpointIds");
		for (int i = 0; arr && i < nids; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
	}
	post(ev);
}

/* The target's threads now (native ids), read without the GIL; -1 when
 * they cannot be read. */
static int threads_now(long *now, size_t *k)
{
	struct cpython_thread th[THREADS_SCAN];
	size_t n = 0;
	char err[64];

	*k = 0;
	if (cpython.read.ready() ||
	    cpython.read.threads(th, THREADS_SCAN, &n, err, sizeof(err)))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (th[i].native_id && !pygil_is_own_thread(th[i].native_id))
			now[(*k)++] = th[i].native_id;
	return 0;
}

long dbgevents_main_thread(void)
{
	long now[THREADS_SCAN], pid = (long)getpid();
	size_t k;

	/* The main thread unless the whole list was read without it. */
	if (threads_now(now, &k) || !k || k == THREADS_SCAN)
		return pid;
	for (size_t i = 0; i < k; i++)
		if (now[i] == pid)
			return pid;
	return now[0];
}

/* `thread` events for the attached session (thread states read without
 * the GIL).  dbgevents_threads_start() fills known[] for a new
 * session. */
void dbgevents_tick(void)
{
	long now[THREADS_SCAN];
	size_t k = 0;
	uint64_t s = atomic_load(&owner);

	log_report_dropped();
	if (!s || threads_now(now, &k))
		return;
	pthread_mutex_lock(&known_lock);
	if (s != known_session) {
		memcpy(known, now, k * sizeof(long));
		nknown = k;
		known_session = s;
		pthread_mutex_unlock(&known_lock);
		return;
	}
	for (size_t i = 0; i < k; i++) {
		size_t j;
		for (j = 0; j < nknown && known[j] != now[i]; j++)
			;
		if (j == nknown) {
			struct dap_message *ev = dap_event_new("thread");
			if (ev) {
				cJSON_AddStringToObject(ev->body, "reason",
							"started");
				cJSON_AddNumberToObject(ev->body, "threadId",
							(double)now[i]);
				server_post_event(dbg_server, s, ev);
			}
		}
	}
	for (size_t j = 0; j < nknown; j++) {
		size_t i;
		for (i = 0; i < k && now[i] != known[j]; i++)
			;
		if (i == k) {
			struct dap_message *ev = dap_event_new("thread");
			if (ev) {
				cJSON_AddStringToObject(ev->body, "reason",
							"exited");
				cJSON_AddNumberToObject(ev->body, "threadId",
							(double)known[j]);
				server_post_event(dbg_server, s, ev);
			}
		}
	}
	memcpy(known, now, k * sizeof(long));
	nknown = k;
	pthread_mutex_unlock(&known_lock);
}

void dbgevents_continued(uint64_t session)
{
	struct dap_message *ev;

	if (session && dbg_server && (ev = dap_event_new("continued"))) {
		cJSON_AddNumberToObject(ev->body, "threadId", 0);
		cJSON_AddBoolToObject(ev->body, "allThreadsContinued", 1);
		server_post_event(dbg_server, session, ev);
	}
}

void dbgevents_threads_start(uint64_t session)
{
	long now[KNOWN_THREADS_MAX];
	size_t k;

	if (threads_now(now, &k))
		return;
	pthread_mutex_lock(&known_lock);
	if (session && atomic_load(&owner) == session &&
	    known_session != session) {
		memcpy(known, now, k * sizeof(long));
		nknown = k;
		known_session = session;
	}
	pthread_mutex_unlock(&known_lock);
}

void dbgevents_init(struct server *srv)
{
	dbg_server = srv;
}

void dbgevents_atfork_child(void)
{
	pthread_mutex_init(&known_lock, NULL);
	dbg_server = NULL;
	nknown = 0;
	known_session = 0;
	atomic_store(&owner, 0);
}
