/*
 * agent: start-up, shutdown and fork handling of the agent.  See agent.h.
 *
 * States: NONE -> STARTING (thread created) -> READY (serving) -> STOPPED,
 * or STARTING -> FAILED / DUPLICATE (another copy serves this pid).
 */
#include "agent.h"

#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "dap_addr.h"
#include "cluster.h"
#include "config.h"
#include "crash.h"
#include "debugger.h"
#include "hang.h"
#include "log.h"
#include "memory.h"
#include "pygil.h"
#include "sampler.h"
#include "server.h"
#include "server_sock.h"
#include "store.h"
#include "tables.h"
#include "torch.h"
#include "worker.h"

enum state { NONE, STARTING, READY, FAILED, DUPLICATE, STOPPED };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static enum state state;
static char failure[256];
static pthread_t agent_thread;
static struct server *srv;
static struct store *store;
static int stopping;
static int atexit_registered;
static int atfork_registered;

static void set_state(enum state s, const char *why)
{
	pthread_mutex_lock(&lock);
	state = s;
	if (why)
		snprintf(failure, sizeof(failure), "%s", why);
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---- the atexit hook ---------------------------------------------------- */

/* Runs in the main thread, GIL held, while the interpreter exits. */
static PyObject *at_interpreter_exit(PyObject *self, PyObject *unused)
{
	(void)self, (void)unused;
	pthread_mutex_lock(&lock);
	int running = state == READY && !stopping;
	stopping = 1;
	pthread_mutex_unlock(&lock);
	if (!running)
		Py_RETURN_NONE;
	/* Let go of the GIL so GIL threads waiting for it can see `stopping`
	 * and leave; everything below is bounded. */
	Py_BEGIN_ALLOW_THREADS
	struct timespec dl;
	debugger_stop();	/* paused threads go on: the program is exiting */
	server_stop(srv);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 2;
	if (pthread_timedjoin_np(agent_thread, NULL, &dl) != 0)
		log_warn("agent thread did not stop in time");
	sampler_shutdown(); /* before pygil: its recorder may use it */
	pygil_stop();
	Py_END_ALLOW_THREADS
	set_state(STOPPED, NULL);
	Py_RETURN_NONE;
}

static PyMethodDef on_exit_def = {"_probing_atexit", at_interpreter_exit, METH_NOARGS,
				  "Stops the Probing agent."};

void agent_register_atexit(void)
{
	PyObject *fn, *mod, *res;

	if (atexit_registered || _Py_IsFinalizing())
		return;
	fn = PyCFunction_New(&on_exit_def, NULL);
	mod = fn ? PyImport_ImportModule("atexit") : NULL;
	res = mod ? PyObject_CallMethod(mod, "register", "O", fn) : NULL;
	if (res)
		atexit_registered = 1;
	else
		PyErr_Clear();
	Py_XDECREF(res);
	Py_XDECREF(mod);
	Py_XDECREF(fn);
}

static void register_atexit_fn(void *arg)
{
	(void)arg;
	agent_register_atexit();
}

/* ---- the agent thread ------------------------------------------------- */

static int wait_for_python(void)
{
	int ms = 5;

	while (!Py_IsInitialized()) {
		pthread_mutex_lock(&lock);
		int stop = stopping;
		pthread_mutex_unlock(&lock);
		if (stop)
			return -ECANCELED;
		sleep_ms(ms);
		if (ms < 100)
			ms *= 2;
	}
	return 0;
}

static int bring_up(char *err, size_t errlen)
{
	char listen[CONFIG_VALUE_MAX], canon[256], addrs[1024], pid[32];
	int rc;

	config_set_info("agent.version", PROBING_VERSION);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	config_set_info("agent.pid", pid);
	if (config_load_env(err, errlen))
		log_warn("ignoring a setting: %s", err);
	if (auth_init(err, errlen))
		log_warn("no token: %s", err);

	rc = server_new(&srv, err, errlen);
	if (rc)
		return rc;
	/* A session that ends, however it ends, lets go of the debugger. */
	if ((rc = debugger_register(srv))) {
		snprintf(err, errlen, "cannot register the debugger's close "
			 "hook");
		return rc;
	}
	if ((rc = store_new(&store, err, errlen)) ||
	    (rc = tables_register(store, err, errlen)) ||
	    (rc = torch_init(store, err, errlen)) ||
	    (rc = sampler_init(store, err, errlen)) ||
	    (rc = pygil_start(err, errlen)))
		return rc;
	rc = worker_start(server_loop(srv), err, errlen);
	if (rc)
		return rc;
	rc = memory_start(store, err, errlen);
	if (rc)
		return rc;
	/* After the socket is ours: a second copy of the agent in the
	 * process stays out of the crash handler too. */
	rc = crash_start(err, errlen);
	if (rc)
		return rc;
	rc = hang_start(store, err, errlen);
	if (rc)
		return rc;
	config_get("server.listen", listen, sizeof(listen));
	if (listen[0] && server_listen(srv, listen, canon, sizeof(canon), err,
				       errlen))
		log_warn("not listening on %s: %s", listen, err);
	else if (listen[0]) /* as it is listed, so a new value replaces it */
		config_set("server.listen", canon, err, errlen);
	rc = cluster_start(srv, store, err, errlen);
	if (rc)
		return rc;
	server_addresses(srv, addrs, sizeof(addrs));
	config_set_info("agent.address", addrs);
	return 0;
}

/* Whether @probing-<our pid> is held by this process (another copy of
 * the agent) rather than by a stranger. */
static int agent_holds_own_name(void)
{
	struct dap_addr addr;

	dap_addr_for_pid(getpid(), &addr);
	return server_sock_unix_holder(&addr) == getpid();
}

static void *agent_main(void *arg)
{
	struct pygil_limits lim = {.start_ms = 2000};
	char err[256] = "";
	int rc;

	(void)arg;
	if (wait_for_python())
		return NULL;
	rc = bring_up(err, sizeof(err));
	if (rc == -EADDRINUSE && !agent_holds_own_name()) {
		/* Not another copy of ours: someone else took the name. */
		log_warn("agent not started: %s", err);
		set_state(FAILED, err);
		return NULL;
	}
	if (rc == -EADDRINUSE) {
		/* Another copy of the agent (another libprobing.so) serves
		 * this process already: one agent per process. */
		log_info("an agent already serves this process");
		set_state(DUPLICATE, "another Probing agent already serves "
			  "this process");
		return NULL;
	}
	if (rc) {
		log_warn("agent not started: %s", err);
		set_state(FAILED, err);
		return NULL;
	}
	set_state(READY, NULL);
	server_addresses(srv, err, sizeof(err));
	log_info("listening on %s", err);
	/* Best effort: the hook makes exit clean; without it the threads
	 * simply end with the process. */
	if (!atexit_registered)
		pygil_run(register_atexit_fn, NULL, &lim, NULL);
	server_run(srv);
	memory_stop();
	hang_stop();
	cluster_stop();
	worker_stop(1000);
	server_free(srv);
	srv = NULL;
	return NULL;
}

/* ---- fork ------------------------------------------------------------- */

/* In the child, only the forking thread exists: the agent's threads are
 * gone, and its sockets belong to the parent's agent. */
static void atfork_child(void)
{
	if (state == NONE)
		return;
	server_atfork_child(srv);
	srv = NULL;
	store = NULL;   /* the parent's; leaked in the child */
	pygil_atfork_child();
	sampler_atfork_child();
	debugger_atfork_child();
	worker_atfork_child();
	memory_atfork_child();
	hang_atfork_child();
	cluster_atfork_child();
	config_atfork_child();
	auth_atfork_child();
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&cond, NULL);
	state = NONE;
	stopping = 0;
}

/* ---- the public face -------------------------------------------------- */

int agent_start(void)
{
	sigset_t all, old;
	int rc;

	pthread_mutex_lock(&lock);
	if (state != NONE) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	if (!atfork_registered) {
		pthread_atfork(NULL, NULL, atfork_child);
		atfork_registered = 1;
	}
	/* Agent threads never take the target's signals. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&agent_thread, NULL, agent_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		state = STARTING;
	pthread_mutex_unlock(&lock);
	return -rc;
}

int agent_wait_ready(int timeout_ms, char *err, size_t errlen)
{
	struct timespec dl;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&lock);
	while (state == STARTING && rc == 0)
		rc = pthread_cond_timedwait(&cond, &lock, &dl);
	switch (state) {
	case READY:
		rc = 0;
		break;
	case DUPLICATE:
		snprintf(err, errlen, "%s", failure);
		rc = -EALREADY;
		break;
	case STARTING:
		snprintf(err, errlen, "the agent did not start within %d ms",
			 timeout_ms);
		rc = -ETIMEDOUT;
		break;
	case NONE:
		snprintf(err, errlen, "the agent is not started");
		rc = -ESRCH;
		break;
	case STOPPED:
		snprintf(err, errlen, "the agent has stopped");
		rc = -ESHUTDOWN;
		break;
	case FAILED:
		snprintf(err, errlen, "%s", failure);
		rc = -EIO;
		break;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

int agent_listen(const char *text, char *canon, size_t canonlen, char *err,
		 size_t errlen)
{
	char addrs[1024];
	int rc;

	if (state != READY) {
		snprintf(err, errlen, "the agent is not serving");
		return -ESRCH;
	}
	rc = server_listen(srv, text, canon, canonlen, err, errlen);
	if (rc == 0) {
		server_addresses(srv, addrs, sizeof(addrs));
		config_set_info("agent.address", addrs);
	}
	return rc;
}

int agent_set_listen(const char *text, char *canon, size_t canonlen,
		     char *err, size_t errlen)
{
	char old[CONFIG_VALUE_MAX], addrs[1024];
	int rc;

	config_get("server.listen", old, sizeof(old));
	if (text[0]) {
		rc = agent_listen(text, canon, canonlen, err, errlen);
		if (rc)
			return rc;
	} else if (state != READY) {
		snprintf(err, errlen, "the agent is not serving");
		return -ESRCH;
	} else if (canonlen) {
		canon[0] = 0;
	}
	/* The setting names one address: the one it named before goes. */
	if (old[0] && strcmp(old, text[0] ? canon : "")) {
		server_unlisten(srv, old);
		server_addresses(srv, addrs, sizeof(addrs));
		config_set_info("agent.address", addrs);
	}
	return config_set("server.listen", text[0] ? canon : "", err, errlen);
}

void agent_addresses(char *out, size_t outlen)
{
	if (state == READY && srv)
		server_addresses(srv, out, outlen);
	else if (outlen)
		out[0] = 0;
}

struct store *agent_store(void)
{
	return store;
}

/* The whole of the constructor: start a thread, return.  It may run in a
 * thread stopped by ptrace anywhere, so nothing else happens here. */
__attribute__((constructor)) static void probing_constructor(void)
{
	agent_start();
}

/* What `probing inject` calls in a process that has this library mapped
 * already (inject/layout.h: INJECT_RESTART_SYMBOL), in dlopen's place and
 * with its signature: a forked child, whose agent is gone.  Runs where
 * the constructor does, under the same rules.  Non-NULL when the agent
 * runs (or was running already). */
__attribute__((visibility("default"))) void *
probing_agent_restart(const char *path, int mode)
{
	(void)path;
	(void)mode;
	return agent_start() == 0 ? (void *)&agent_thread : NULL;
}
