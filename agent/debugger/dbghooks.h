/*
 * dbghooks: what the debugger has installed in the interpreter — whether
 * the trace backend (cpython.trace) is needed at all, the exception
 * filters and their hooks, and the audit hook that notices files with
 * breakpoints being loaded.
 *
 * The backend is needed only while something can stop a thread in loaded
 * code (a breakpoint in a loaded file, a function or *raised* exception
 * breakpoint, a pause or a step).  A breakpoint in a file not loaded yet
 * needs none: the audit hook watches `exec` and `compile` events and
 * enables the backend when the file's code is about to run.  *Uncaught*
 * needs no tracing: it wraps sys.excepthook and threading.excepthook
 * (excepthooks.h), calling the function given to dbghooks_init().
 *
 * Below the trace function, the stops and the requests (dbgtrace.h,
 * dbgstop.h, dbgcontrol.h), which call it; it calls none of them.
 *
 * Threads and locks: the GIL held for every function but
 * dbghooks_status() and dbghooks_atfork_child().  audit_on is read by the
 * audit hook on every audited event (an atomic), the status mirrors by
 * any thread.
 */
#ifndef DBGHOOKS_H
#define DBGHOOKS_H

struct _object;

/* The uncaught-exception stop (dbgtrace.c), called from the wrapped
 * excepthooks with the exception's value and traceback.  Once, before
 * anything else. */
void dbghooks_init(void (*uncaught)(struct _object *value, struct _object *tb));

/* Installs or removes the trace backend and the exception events as the
 * breakpoints, filters, pause and steps now need, and arms the audit
 * hook while breakpoints wait for their files. */
void dbghooks_update(void);

/* Switches the trace backend on (cpython.trace.enable); a refusal is
 * told to the client once, as an `output` event.  0 or its -errno. */
int dbghooks_enable(void);

/* Exception breakpoints: stop where an exception is raised (raised), or
 * before one ends a thread or the program (uncaught); hooks updated. */
void dbghooks_set_filters(int raised, int uncaught);
int dbghooks_raised(void);
int dbghooks_uncaught(void);

/* Registers the audit hook, once per process (Python cannot remove one:
 * it returns at once while no breakpoint waits for a file). */
void dbghooks_watch_loads(void);

/* The backend was switched on for every thread (a pause): said in the
 * status now. */
void dbghooks_enabled_now(void);

/* After a detach: the backend disabled, the audit hook disarmed, the
 * filters and the uncaught-exception hooks removed. */
void dbghooks_reset(void);

/* For status, any thread, no GIL: is the backend on, which filters. */
void dbghooks_status(int *backend, int *raised, int *uncaught);

/* In a forked child: the audit hook disarmed (no GIL needed). */
void dbghooks_atfork_child(void);

#endif
