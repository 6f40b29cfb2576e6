/*
 * dbgstop: a thread's stop, as the thread sees it — inside the trace
 * function or an exception hook, with the GIL.
 *
 * dbgstop_here() captures the thread's frames (names and lines as text,
 * the frame objects referenced), registers it paused (debugger.h), asks
 * every other thread to stop at its next line when it starts the round
 * (all-stop), posts `stopped`, and waits for a resume with the GIL
 * released — so the agent's GIL threads can read and evaluate in the
 * paused frames meanwhile.  dbgstop_resumed() then sets up the thread's
 * step, if it was resumed with one, and its tracing.
 *
 * Threads and locks: GIL held for every function (dbgstop_here releases
 * it while it waits).  The debugger's lock is taken only inside
 * debugger.h's functions.
 */
#ifndef DBGSTOP_H
#define DBGSTOP_H

struct _ts;
struct _frame;
struct _object;

/* Is this thread inside dbgstop_here() (its events are ignored)? */
int dbgstop_busy(void);

/*
 * Stops thread ts at frame f (or, for an uncaught exception, at the
 * innermost frame of traceback tb: f NULL) until a resume.  reason is the
 * `stopped` event's ("breakpoint", "step", "pause", "exception",
 * "function breakpoint"); ids[0..nids) the breakpoints hit; text the
 * event's text or NULL; exc and exc_mode ("always", "unhandled") for an
 * exception stop, else NULL.  Returns the command it was resumed with (0
 * when the debugger went away, when the thread could not stop, or when it
 * was to stop only for a pause that a resume cancelled meanwhile) and, in
 * *cmd_epoch, the epoch that command started.  Not again on a thread that
 * is in it already (the Python code a stop runs): 0.
 */
int dbgstop_here(struct _ts *ts, struct _frame *f, struct _object *tb,
		 const char *reason, const int *ids, int nids, const char *text,
		 struct _object *exc, const char *exc_mode,
		 unsigned *cmd_epoch);

/* After dbgstop_here(): the step of cmd (if one) begins at f, and ts's
 * tracing follows what is still wanted; a finished session is cleaned
 * up instead. */
void dbgstop_resumed(struct _ts *ts, struct _frame *f, int cmd,
		     unsigned cmd_epoch);

/* All-stop: every thread (but the agent's) stops at its next Python
 * line — new frames and the frames control returns into are traced. */
void dbgstop_all(void);

#endif
