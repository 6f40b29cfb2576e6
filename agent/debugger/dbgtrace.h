/*
 * dbgtrace: the debugger's C trace function — what a traced thread does
 * on a line, a call or an exception — and the stop for an uncaught
 * exception (the wrapped excepthooks call it, dbghooks.h).
 *
 * Which frames are traced is the trace backend's business
 * (cpython.trace, cpython.h): it turns tracing on only for code with
 * breakpoints, for stepping threads, and for every thread while a pause
 * is wanted; whether the backend is needed at all is dbghooks.h's.  The
 * agent's own threads never stop: evaluations from the debugger run
 * untraced.  A traced line that finds the debugger detached does the
 * cleanup (dbgcleanup.h) if nobody has yet.
 *
 * Threads and locks: the GIL held.  The trace function runs the user's
 * expressions (conditions, log messages) and may pause the thread
 * (dbgstop.h).
 */
#ifndef DBGTRACE_H
#define DBGTRACE_H

struct _object;
struct _frame;

/* The trace function given to cpython.trace (a Py_tracefunc). */
int dbgtrace_function(struct _object *obj, struct _frame *f, int what,
		      struct _object *arg);

/* Stops the ending thread on its uncaught exception (value, traceback tb)
 * when the uncaught filter is set. */
void dbgtrace_uncaught(struct _object *value, struct _object *tb);

#endif
