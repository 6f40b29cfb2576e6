/*
 * dbgcleanup: what a detach leaves to be undone, and undoing it once.
 *
 * A detach (dbgsession.h) never waits for the GIL; it arms the cleanup
 * and resumes the paused threads.  The first code to run with the GIL
 * afterwards does it — a resumed thread, the next traced line
 * (dbgcleanup_now()), a configuration request, the next attach, or the
 * job dbgcleanup_submit() queues on a worker: breakpoints, steps,
 * exception filters and hooks, the trace backend, the output capture and
 * variable references go, once.
 *
 * Below the session, the requests, the stops and the trace function,
 * which call it; it calls none of them.
 *
 * Threads and locks: dbgcleanup_now() with the GIL; the others from any
 * thread (a flag under its own lock, taken after the session's).
 */
#ifndef DBGCLEANUP_H
#define DBGCLEANUP_H

#include <stddef.h>

/* A session ended: the cleanup is pending. */
void dbgcleanup_arm(void);

/* Is it pending? */
int dbgcleanup_pending(void);

/* GIL held: does the pending cleanup, once no debugger is active (a new
 * attach takes over what is left).  Cheap when none is pending. */
void dbgcleanup_now(void);

/* Does the pending cleanup with the GIL (waiting python.gil_timeout_ms
 * for it).  0, or the error of taking the GIL with err. */
int dbgcleanup_run(char *err, size_t errlen);

/* Queues dbgcleanup_run() on a worker, retried while the GIL is held
 * elsewhere. */
void dbgcleanup_submit(void);

/* In a forked child: nothing pending (the parent's session is not
 * ours). */
void dbgcleanup_atfork_child(void);

#endif
