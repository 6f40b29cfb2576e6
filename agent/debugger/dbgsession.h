/*
 * dbgsession: the debug session — which client is the debugger (one at a
 * time), what ends it, and the stop held for the next one.
 *
 * A session attaches (`attach`, or `probing debug --pause`), and its
 * connection closing in any way — disconnect, a dropped socket, the agent
 * stopping — detaches it: every paused thread resumes at once and the
 * removal of breakpoints and hooks is left to the first code that runs
 * with the GIL (dbgcleanup.h); until that cleanup is done, a new attach
 * is refused with -EAGAIN.  A session that asked for dbgsession_hold()
 * leaves the target paused instead, for the next debugger to take over,
 * until a timer ends the held stop.
 *
 * Threads and locks: one mutex guards the session state; it is taken
 * before the paused-thread table's (debugger.h) when both are needed, so
 * a detach ends the session and wakes the paused threads in one step.
 * No function blocks, takes the GIL or runs Python.
 */
#ifndef DBGSESSION_H
#define DBGSESSION_H

#include <stddef.h>
#include <stdint.h>

#include "debugger.h"

struct server;

/* Any thread.  Makes session the debugger.  Returns 0 (also when it is
 * already), or with err -EBUSY when another session is attached, -EAGAIN
 * while the previous session's cleanup is pending (dbgcleanup_run()
 * first).  A session attaching while a stop is held takes it over. */
int dbgsession_attach(uint64_t session, char *err, size_t errlen);

/* Is session the attached debugger? */
int dbgsession_is_attached(uint64_t session);

/*
 * Ends session's debugging if it is the attached one: resumes every
 * paused thread and queues the cleanup on a worker — or, when the session
 * asked for dbgsession_hold(), keeps the stop for the next debugger.
 * Loop thread only (it is the server's close hook).
 */
void dbgsession_detach(uint64_t session);

/* Registers dbgsession_detach as a close hook of srv and the hold timer
 * on its loop (loop thread or before the loop runs).  Returns 0 or
 * -ENOSPC. */
int dbgsession_register(struct server *srv);

/*
 * Hands the stop over to the next debugger: when session (attached) ends,
 * the target stays paused — no resume, breakpoints kept — until another
 * session attaches (it takes the stop over) or wait_ms pass (then the
 * detach happens).  For `probing debug --pause`.  Any thread.  Returns 0
 * or -ENOTCONN when session is not the attached one.
 */
int dbgsession_hold(uint64_t session, int wait_ms, char *err, size_t errlen);

/* Resumes every paused thread for any session (`probing debug --resume`);
 * the attached debugger, if another session, gets a `continued` event.  A
 * held stop with no debugger is detached: the caller (a worker) then runs
 * dbgcleanup_run(). */
void dbgsession_release(uint64_t session);

/* For configurationDone: tells session (now attached) about a stop that
 * was in progress before it came (a held one), with a `stopped` event. */
void dbgsession_announce(uint64_t session);

/* The debugger's state, for probing/debug status.  Any thread, no GIL. */
struct dbgsession_status {
	uint64_t session; /* attached session, 0 when none */
	int held;	  /* paused, waiting for a debugger to attach */
	int stopped;
	long paused[DEBUGGER_PAUSED_MAX]; /* native ids of paused threads */
	size_t npaused;
	int hook; /* the frame-evaluation hook is installed */
	int exc_raised, exc_uncaught;
};
void dbgsession_get_status(struct dbgsession_status *st);

/* Agent stop: detaches whatever session is attached (or held). */
void dbgsession_stop(void);

/* In a forked child: forget the parent's session. */
void dbgsession_atfork_child(void);

#endif
