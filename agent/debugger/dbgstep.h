/*
 * dbgstep: next, stepIn and stepOut — a per-thread mode set when a paused
 * thread is resumed with a step, and checked on each of its traced lines.
 *
 * Step in traces every new frame of the thread and stops at the first
 * line; step over (next) and out trace the frames control returns into
 * and stop at the first line at the same or a smaller depth (out: a
 * smaller one).  A step belongs to the epoch its resume started: a later
 * resume makes it stale (the thread did not stop since, e.g. it ended)
 * and it is dropped, so it keeps no hook installed.
 *
 * At most DBGSTEP_MAX threads step at once; a step beyond that runs as
 * continue.  Threads and locks: GIL held for every function.
 */
#ifndef DBGSTEP_H
#define DBGSTEP_H

#define DBGSTEP_MAX 64

struct _ts;
struct _frame;

/* Thread ts was resumed with cmd (enum debugger_cmd) in epoch, stopped in
 * frame f (NULL: none, depth 0): a step begins when cmd is one, and the
 * thread's tracing mode (cpython.trace) follows. */
void dbgstep_begin(struct _ts *ts, struct _frame *f, int cmd, unsigned epoch);

/* Is ts stepping? */
int dbgstep_active(struct _ts *ts);

/* Has the step of ts reached frame f?  A stale step is dropped (0). */
int dbgstep_done(struct _ts *ts, struct _frame *f);

/* Ends the step of ts, if any, and its tracing mode. */
void dbgstep_clear(struct _ts *ts);

/* Drops the steps a resume made stale (see above). */
void dbgstep_prune(void);

/* How many threads step. */
int dbgstep_count(void);

/* Forgets every step (cleanup after a detach, a forked child): the
 * threads' modes are the caller's. */
void dbgstep_reset(void);

#endif
