/*
 * agent: the life of libprobing.so inside its host process.
 *
 * The library constructor only calls agent_start(), which starts the agent
 * thread and returns (it may run inside a thread that ptrace stopped at any
 * instruction: no locks of the host taken, no Python).  The agent thread
 * waits until Python is initialised, then loads the settings, opens the
 * store, starts the GIL threads, the workers and the server, and runs the
 * server loop.  At interpreter exit an atexit hook stops it all (bounded);
 * in a forked child the parent's agent is forgotten (its sockets closed)
 * and a new one can be started with probing.init() or `probing inject`
 * (which calls the exported probing_agent_restart(), agent.c).
 *
 * Threads: agent_start/agent_wait_ready/agent_listen from any thread.
 */
#ifndef AGENT_H
#define AGENT_H

#include <stddef.h>

struct store;

#define PROBING_VERSION "0.1.0"

/* Starts the agent thread once per process (and again in a forked child).
 * Returns 0 or -errno. */
int agent_start(void);

/* Says that Python code runs (probing.init() was called from it): the
 * interpreter is usable although Py_IsInitialized() may still say no —
 * 3.15 says yes only once site has imported everything, the .pth that
 * calls probing.init() for PROBING=1 included. */
void agent_python_runs(void);

/* Waits up to timeout_ms for the agent to serve.  Returns 0, -ETIMEDOUT,
 * or -EALREADY when another copy of the agent serves this process (the
 * abstract socket was taken), or the start-up error with err. */
int agent_wait_ready(int timeout_ms, char *err, size_t errlen);

/* Listens on text as well (see server_listen). */
int agent_listen(const char *text, char *canon, size_t canonlen, char *err,
		 size_t errlen);

/* Sets server.listen to text: listens there (canonical address in
 * canon) and stops listening where the setting said before; "" stops
 * listening there and leaves the unix socket (and a cluster rank's own
 * address).  0 or -errno with err; on failure nothing changed. */
int agent_set_listen(const char *text, char *canon, size_t canonlen,
		     char *err, size_t errlen);

/* The agent's addresses, comma-separated. */
void agent_addresses(char *out, size_t outlen);

/* The store (NULL before the agent is ready). */
struct store *agent_store(void);

/* Registers the atexit hook; caller holds the GIL.  Idempotent. */
void agent_register_atexit(void);

#endif
