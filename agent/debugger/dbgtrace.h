/*
 * dbgtrace: the debugger's C trace function and hooks — what a traced
 * thread does on a line, a call or an exception, the uncaught-exception
 * hooks, and the audit hook that notices files with breakpoints being
 * loaded.
 *
 * Which frames are traced is the trace backend's business
 * (cpython.trace, cpython.h): it turns tracing on only for code with
 * breakpoints, for stepping threads, and for every thread while a pause
 * is wanted.  dbgtrace_update_hooks() decides whether the backend is
 * needed at all: only
 * while something can stop a thread in loaded code (a breakpoint in a
 * loaded file, a function or *raised* exception breakpoint, a pause or a
 * step).  A breakpoint in a file not loaded yet needs none: the audit
 * hook watches `exec` and `compile` events and enables the backend
 * when the file's code is about to run.  *Uncaught* needs no tracing: it wraps
 * sys.excepthook and threading.excepthook (excepthooks.h).
 *
 * The agent's own threads never stop: evaluations from the debugger run
 * untraced.
 *
 * Threads and locks: GIL held for every function except
 * dbgtrace_atfork_child().  The trace function runs the user's
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

/* Installs or removes the frame-evaluation hook and the exception events
 * as the breakpoints, filters, pause and steps now need, and arms the
 * audit hook while breakpoints wait for their files. */
void dbgtrace_update_hooks(void);

/* Exception breakpoints: stop where an exception is raised (raised), or
 * before one ends a thread or the program (uncaught); hooks updated. */
void dbgtrace_set_filters(int raised, int uncaught);

/* Registers the audit hook, once per process (Python cannot remove one:
 * it returns at once while no breakpoint waits for a file). */
void dbgtrace_watch_loads(void);

/* After a detach: the audit hook disarmed, the filters and the
 * uncaught-exception hooks removed. */
void dbgtrace_reset(void);

/* In a forked child: the audit hook disarmed (no GIL needed). */
void dbgtrace_atfork_child(void);

#endif
