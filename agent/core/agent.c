/*
 * agent: start-up, shutdown and fork handling of the agent.  See agent.h.
 *
 * States: NONE -> STARTING (thread created) -> READY (serving) -> STOPPED,
 * or STARTING -> FAILED / DUPLICATE (another copy serves this pid).
 */
#include "agent.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "cluster/cluster.h"
#include "app/app.h"
#include "comm/comm.h"
#include "config.h"
#include "config_lease.h"
#include "cpython/cpython.h"
#include "dap_addr.h"
#include "debugger/debugger.h"
#include "env.h"
#include "forensics/crash.h"
#include "forensics/hang.h"
#include "log.h"
#include "memory/memory.h"
#include "profiler/native.h"
#include "profiler/sampler.h"
#include "python/forkwarn.h"
#include "python/pygil.h"
#include "record.h"
#include "server/server.h"
#include "server/server_sock.h"
#include "server/worker.h"
#include "store.h"
#include "tables.h"
#include "thread.h"
#include "torch/torch.h"

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

/* ---- the subsystems ---------------------------------------------------- */

/* Each start takes what it needs from srv and store, set by those before
 * it. */

static int start_settings(char *err, size_t errlen)
{
	char pid[32];

	config_set_info("agent.version", PROBING_VERSION);
	config_set_info("agent.python", cpython.version);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	config_set_info("agent.pid", pid);
	if (config_load_env(err, errlen))
		log_warn("ignoring a setting: %s", err);
	if (auth_init(err, errlen))
		log_warn("no token: %s", err);
	return 0;
}

static void fork_settings(void)
{
	config_atfork_child();
	config_lease_atfork_child();
	auth_atfork_child();
}

static int start_server(char *err, size_t errlen)
{
	return server_new(&srv, err, errlen);
}

static void stop_server(void)
{
	server_free(srv);
	srv = NULL;
}

static void fork_server(void)
{
	server_atfork_child(srv);
	srv = NULL;
}

static int start_debugger(char *err, size_t errlen)
{
	/* A session that ends, however it ends, lets go of the debugger. */
	if (debugger_register(srv) == 0)
		return 0;
	snprintf(err, errlen, "cannot register the debugger's close hook");
	return -ENOSPC;
}

/* The store lives as long as the process: the settings listeners of
 * torch and the live tables keep pointers into it. */
static int start_store(char *err, size_t errlen)
{
	int rc = store_new(&store, err, errlen);

	return rc ? rc : tables_register(store, err, errlen);
}

static void fork_store(void)
{
	store = NULL; /* the parent's; leaked in the child */
}

static int start_torch(char *err, size_t errlen)
{
	int rc = torch_init(store, err, errlen);

	return rc ? rc : comm_init(store, err, errlen);
}

static int start_app(char *err, size_t errlen)
{
	return app_init(store, err, errlen);
}

static int start_record(char *err, size_t errlen)
{
	return record_start(store, err, errlen);
}

static int start_sampler(char *err, size_t errlen)
{
	return sampler_init(store, err, errlen);
}

static int start_workers(char *err, size_t errlen)
{
	return worker_start(server_loop(srv), err, errlen);
}

static void stop_workers(void)
{
	worker_stop(1000);
}

static int start_memory(char *err, size_t errlen)
{
	return memory_start(store, err, errlen);
}

static int start_hang(char *err, size_t errlen)
{
	return hang_start(store, err, errlen);
}

/* server.listen from the environment: a warning when it cannot be had. */
static int start_listen(char *err, size_t errlen)
{
	char listen[CONFIG_VALUE_MAX], canon[256];

	config_get("server.listen", listen, sizeof(listen));
	if (listen[0] && server_listen(srv, listen, canon, sizeof(canon), err,
				       errlen))
		log_warn("not listening on %s: %s", listen, err);
	else if (listen[0]) /* as it is listed, so a new value replaces it */
		config_set("server.listen", canon, err, errlen);
	return 0;
}

static int start_cluster(char *err, size_t errlen)
{
	return cluster_start(srv, store, err, errlen);
}

/*
 * The agent's subsystems, in start order (the one table; docs/design.md).
 * start() may fail: the ones started before it are stopped, last first.
 * stop() undoes start() (NULL: nothing to undo), last first, on the agent
 * thread once the loop has ended — or, with AT_EXIT, on the exiting
 * thread at interpreter exit after the agent thread is gone (what the
 * program's own threads may still be using: the sampler's signal hooks,
 * the GIL threads).  atfork_child() forgets the parent's threads and
 * sockets in a forked child, first to last.
 */
enum { AT_EXIT = 1 };

static const struct subsystem {
	const char *name;
	int (*start)(char *err, size_t errlen);
	void (*stop)(void);
	void (*atfork_child)(void);
	int flags;
} subsystems[] = {
	{"settings", start_settings, NULL, fork_settings, 0},
	{"server", start_server, stop_server, fork_server, 0},
	{"debugger", start_debugger, NULL, debugger_atfork_child, 0},
	{"store", start_store, NULL, fork_store, 0},
	{"torch", start_torch, NULL, comm_atfork_child, 0},
	/* before the sampler: it stops after it, with the last samples */
	{"record", start_record, record_stop, record_atfork_child, AT_EXIT},
	/* after record: its last rows go in before the recording ends */
	{"app", start_app, app_stop, app_atfork_child, AT_EXIT},
	{"gil", pygil_start, pygil_stop, pygil_atfork_child, AT_EXIT},
	/* after the GIL threads: it stops first, its recorder may use them */
	{"sampler", start_sampler, sampler_shutdown, sampler_atfork_child,
	 AT_EXIT},
	{"workers", start_workers, stop_workers, worker_atfork_child, 0},
	{"memory", start_memory, memory_stop, memory_atfork_child, 0},
	/* after the socket is ours: a second copy of the agent in the
	 * process stays out of the crash handler too */
	{"crash", crash_start, NULL, NULL, 0},
	{"hang", start_hang, hang_stop, hang_atfork_child, 0},
	{"listen", start_listen, NULL, NULL, 0},
	{"cluster", start_cluster, cluster_stop, cluster_atfork_child, 0},
};

#define NSUBSYSTEMS (sizeof(subsystems) / sizeof(subsystems[0]))

/* Stops subsystems [0, n), last first: those with AT_EXIT set as asked. */
static void stop_subsystems(size_t n, int at_exit)
{
	while (n--)
		if (subsystems[n].stop &&
		    (subsystems[n].flags & AT_EXIT) == at_exit)
			subsystems[n].stop();
}

/* ---- the atexit hook ---------------------------------------------------- */

/* How long the exit waits for an agent still starting. */
#define EXIT_START_WAIT_MS 3000

/* Runs in the main thread, GIL held, while the interpreter exits. */
static PyObject *at_interpreter_exit(PyObject *self, PyObject *unused)
{
	char err[256];

	(void)self, (void)unused;
	/* A short program ends before the agent's thread, started at its
	 * import, had the GIL to finish starting: that start is waited for
	 * (the GIL let go) and then stopped like any other — its threads
	 * must not outlive the interpreter (CPython 3.14 crashed in
	 * PyInterpreterState_Delete with them running). */
	Py_BEGIN_ALLOW_THREADS
	if (agent_wait_ready(EXIT_START_WAIT_MS, err, sizeof(err)) ==
	    -ETIMEDOUT)
		log_warn("at exit: %s", err);
	Py_END_ALLOW_THREADS
	pthread_mutex_lock(&lock);
	int running = state == READY && !stopping;
	stopping = 1;
	pthread_mutex_unlock(&lock);
	if (!running)
		Py_RETURN_NONE;
	/* Let go of the GIL so GIL threads waiting for it can see `stopping`
	 * and leave; everything below is bounded. */
	Py_BEGIN_ALLOW_THREADS
	debugger_stop();	/* paused threads go on: the program is exiting */
	server_stop(srv);
	if (agent_thread_join(agent_thread, 2000))
		log_warn("agent thread did not stop in time");
	stop_subsystems(NSUBSYSTEMS, AT_EXIT);
	Py_END_ALLOW_THREADS
	set_state(STOPPED, NULL);
	Py_RETURN_NONE;
}

static PyMethodDef on_exit_def = {"_probing_atexit", at_interpreter_exit, METH_NOARGS,
				  "Stops the Probing agent."};

void agent_register_atexit(void)
{
	PyObject *fn, *mod, *res;

	if (atexit_registered || cpython.finalizing())
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

/* The agent's hooks in the interpreter: at exit, around fork. */
static void register_hooks_fn(void *arg)
{
	(void)arg;
	agent_register_atexit();
	forkwarn_register();
}

/* The GIL-free reader against the running interpreter (cpython.h): a
 * mismatch turns it off and is said in the log.  And where the
 * evaluation loop's code is, for native stacks (native.h). */
static void check_reader_fn(void *arg)
{
	char err[768];

	(void)arg;
	native_learn_eval();
	err[0] = '\0';
	if (cpython.read.self_check(err, sizeof(err))) {
		log_warn("%s", err);
		config_set_info("agent.stack_reader", err);
	} else {
		/* "ok", or "ok: ..." with what it had to adapt to. */
		if (err[0])
			log_info("stack reader %s", err);
		config_set_info("agent.stack_reader", err[0] ? err : "ok");
	}
}

/* Both, on a thread of their own: a program thread that holds the GIL in
 * C (a long regex) may take it in the middle of one (as its Python lets
 * it go) and keep it; the agent answers meanwhile, without them.  Each
 * waited for a while, then given up (it ends on its own). */
#define SETTLE_WAIT_MS 500 /* agent_main's wait for it */

static void *settle_main(void *arg)
{
	struct pygil_limits lim = {.start_ms = 2000, .hard_ms = 2000};

	(void)arg;
	pygil_run(register_hooks_fn, NULL, &lim, NULL);
	pygil_run(check_reader_fn, NULL, &lim, NULL);
	return NULL;
}

/* ---- the agent thread ------------------------------------------------- */

/* Set by agent_python_runs(). */
static _Atomic int python_runs;

void agent_python_runs(void)
{
	atomic_store(&python_runs, 1);
}

static int wait_for_python(void)
{
	int ms = 5;

	while (!Py_IsInitialized() && !atomic_load(&python_runs)) {
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
	char addrs[1024];
	size_t i;
	int rc = 0;

	for (i = 0; i < NSUBSYSTEMS && !rc; i++)
		rc = subsystems[i].start(err, errlen);
	if (rc) {
		/* subsystems[i - 1] failed: it undid itself. */
		log_info("%s did not start: %s", subsystems[i - 1].name, err);
		stop_subsystems(i - 1, 0);
		stop_subsystems(i - 1, AT_EXIT);
		return rc;
	}
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
	pthread_t settle;
	char err[256] = "";
	int rc;

	(void)arg;
	if (wait_for_python())
		return NULL;
	if (cpython.check(err, sizeof(err))) {
		log_warn("agent not started: %s", err);
		set_state(FAILED, err);
		return NULL;
	}
	/* Before anything reads stacks without the GIL (the sampler, the
	 * watchdogs): the layout the interpreter publishes, followed where
	 * it differs.  A refusal is said by the check against the C API,
	 * once listening (check_reader_fn). */
	(void)cpython.read.learn_layout(err, sizeof(err));
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
	 * simply end with the process.  Waited for a little, so that the
	 * first request finds the reader checked; no longer (a program
	 * holding the GIL left initialize unanswered for good). */
	if (agent_thread_start(&settle, "probing-settle", settle_main, NULL))
		log_warn("no exit hook, stack reader not checked: no thread "
			 "for them");
	else
		(void)agent_thread_join(settle, SETTLE_WAIT_MS);
	server_run(srv);
	stop_subsystems(NSUBSYSTEMS, 0);
	return NULL;
}

/* ---- fork ------------------------------------------------------------- */

/* In the child, only the forking thread exists: the agent's threads are
 * gone, and its sockets belong to the parent's agent. */
static void atfork_child(void)
{
	agent_threads_atfork_child();
	if (state == NONE)
		return;
	for (size_t i = 0; i < NSUBSYSTEMS; i++)
		if (subsystems[i].atfork_child)
			subsystems[i].atfork_child();
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&cond, NULL);
	state = NONE;
	stopping = 0;
}

/* ---- the public face -------------------------------------------------- */

int agent_start(void)
{
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
	rc = agent_thread_start(&agent_thread, "probing-agent", agent_main,
				NULL);
	if (rc == 0)
		state = STARTING;
	pthread_mutex_unlock(&lock);
	return rc;
}

int agent_wait_ready(int timeout_ms, char *err, size_t errlen)
{
	struct timespec dl;
	int rc = 0;

	agent_deadline(&dl, CLOCK_REALTIME, timeout_ms);
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
	env_snapshot(); /* before any thread of ours reads it (env.h) */
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
	env_snapshot();
	return agent_start() == 0 ? (void *)&agent_thread : NULL;
}
