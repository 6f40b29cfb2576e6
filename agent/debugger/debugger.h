/*
 * debugger: which threads are paused and why, the commands that resume
 * them, and the epochs that make stale handles detectable — the state
 * every part of the debugger shares, under one lock.  The rest of the
 * debugger is built on it:
 *
 *   dbglife     the debugger in the agent's life: set-up, the tick,
 *               stop, fork (the top: it calls the others)
 *   dbgsession  who the debugger is, detach, the stop held for the next
 *   dbgcontrol  the requests that need the GIL (breakpoints, exception
 *               filters, pause)
 *   dbgtrace    the C trace function: line, call and exception events,
 *               the uncaught-exception stop
 *   dbgstop     a thread's stop as the thread sees it (GIL side)
 *   dbgcleanup  what a detach leaves, undone once
 *   dbghooks    what is installed: the trace backend, exception filters
 *               and hooks, the audit hook watching files being loaded
 *   dbgstep     next / stepIn / stepOut, per thread
 *   dbgoutput   the target's output as events
 *   dbgevents   the DAP events sent to the attached debugger (the bottom)
 *
 * Each calls only modules below it in that list (and this file, the
 * breakpoints and the Python modules): no circle.  The trace function and
 * the stops finish a detach's cleanup when they are the first to run
 * with the GIL after it, which is why dbgcleanup sits below them.
 *
 * The model is "all-stop": when a thread stops (breakpoint, step, pause,
 * exception), every other thread is asked to stop at its next Python line
 * (a thread in C stops when it comes back to Python, and is shown held
 * until then: dbgtasks.h), and continue or a step resumes them all.  A
 * pause that no thread reaches within a second (all of them in C) is a
 * stop of held threads only.  A paused thread
 * waits inside the C trace function (dbgtrace.h) with the GIL released, so
 * the agent can read and evaluate in its frames meanwhile; continue, a
 * step or a detach wake it.
 *
 * Identifiers given to the client: thread ids are kernel thread ids
 * (native ids, as `threads` reports them); frame ids of paused threads
 * are DEBUGGER_FRAME_BASE and above, valid until the thread is resumed
 * (snapshot frame ids of running threads stay below it).  Every resume
 * starts a new epoch; frame ids and variable references of an older epoch
 * are refused.
 *
 * Detaching (disconnect, a dropped connection, agent stop) never waits for
 * the GIL: it wakes the paused threads at once and leaves removing the
 * breakpoints, the hook and every trace function to whichever runs first
 * with the GIL — a resumed thread, the next traced line, or a cleanup job
 * on a worker (dbgcontrol.h).  Afterwards no trace function of ours and no
 * hook remain.
 *
 * Threads and locks: one mutex guards the pause state (never held while
 * taking the GIL or running Python; taken after the session's lock when
 * both are); every function here takes it briefly and none blocks,
 * except debugger_wait_resume().  Breakpoints, the trace backend and Python
 * objects are guarded by the GIL.  Which functions need the GIL is said at
 * each.
 */
#ifndef DEBUGGER_H
#define DEBUGGER_H

#include <stddef.h>
#include <stdint.h>

#define DEBUGGER_PAUSED_MAX 256 /* threads paused at once */
#define DEBUGGER_FRAMES_MAX 512 /* frames kept per paused thread */
#define DEBUGGER_FRAME_BASE (1LL << 40)
#define DEBUGGER_TEXT_MAX 4096 /* exception descriptions */

struct _object;
struct _frame;

enum debugger_cmd {
	DEBUGGER_CONTINUE = 1,
	DEBUGGER_NEXT,
	DEBUGGER_STEP_IN,
	DEBUGGER_STEP_OUT,
};

/*
 * Resumes every paused thread; thread (a native id) gets cmd, the others
 * continue.  cmd CONTINUE with thread 0 resumes all.  Cancels a pause
 * asked for but not reached yet.  Never blocks (any thread).  Returns 0,
 * or -ESRCH when a step names a thread that is not paused.
 */
int debugger_resume(long thread, enum debugger_cmd cmd, char *err,
		    size_t errlen);

/* The current epoch (bumped by every resume). */
unsigned debugger_epoch(void);

/* Is the thread with this native id paused?  Any thread, no GIL. */
int debugger_is_paused(long native_id);

/* Is any thread paused (a stop in progress)? */
int debugger_stopped(void);

/* One frame of a paused thread, as stackTrace shows it. */
struct debugger_frame {
	int64_t id;
	char *func; /* owned by the list */
	char *file;
	int line;
};

/*
 * The frames of paused thread native_id, innermost first: from start, at
 * most levels (0: all).  *total is the whole depth.  Any thread, no GIL.
 * Returns 0 (free with debugger_frames_release), or -ESRCH when the
 * thread is not paused, -ENOMEM.
 */
int debugger_frames(long native_id, size_t start, size_t levels,
		    struct debugger_frame **out, size_t *n, size_t *total);
void debugger_frames_release(struct debugger_frame *f, size_t n);

/*
 * GIL held: the frame object of frame id (a new reference) of a paused
 * thread, or NULL with err (unknown, or the thread was resumed).
 */
struct _frame *debugger_frame_object(int64_t id, char *err, size_t errlen);

/* GIL held: the exception a paused thread stopped on (new reference to
 * the exception value, *mode "always" or "unhandled"), or NULL with err. */
struct _object *debugger_exception(long native_id, const char **mode, char *err,
				   size_t errlen);

/* ---- the agent's lifecycle ---------------------------------------------- */

/* (dbglife.c) Sets the debugger up on srv: its events, the trace
 * backend's classify and trace functions (cpython.trace), the tick (twice
 * a second on the loop: the target's output flushed, a pause waiting for
 * the GIL armed, thread events), the session's close hook (before the
 * loop runs).  Returns 0 or -ENOSPC. */
struct server;
int debugger_register(struct server *srv);

/* Agent stop (interpreter exit): detaches whatever session is attached
 * and wakes every paused thread.  Any thread. */
void debugger_stop(void);

/* In a forked child: forget the parent's session and paused threads. */
void debugger_atfork_child(void);

/* The paused-thread table's part of debugger_atfork_child(). */
void debugger_pause_atfork_child(void);

/* ---- for the session (dbgsession.c; its lock held) ---------------------- */

/* A debugger attached: active, and a new epoch. */
void debugger_activate(void);

/* The debugger went away: inactive, no pause wanted, a new epoch, every
 * paused thread woken with CONTINUE. */
void debugger_end(void);

/* Resumes every paused thread (CONTINUE), the debugger staying. */
void debugger_continue_all(void);

/* The first paused thread of the stop in progress, or 0. */
long debugger_first_paused(void);

/* The paused threads' native ids (at most max); returns whether a stop
 * is in progress. */
int debugger_paused_list(long *ids, size_t max, size_t *n);

/* ---- for the debugger's own modules ------------------------------------ */

/* Is a debugger attached (or a stop held for one)?  Any thread, lock-free:
 * the trace function checks it on every event. */
int debugger_active(void);

/* Is a pause asked for, or a stop in progress? */
int debugger_pause_wanted(void);

/* dbgcontrol_pause(): marks a pause as asked for.  Returns 0, 1 when a
 * stop is in progress already (nothing to do), or -ENOTCONN (inactive). */
int debugger_pause_begin(void);

/* Forgets a pause asked for (the GIL did not come to arm it). */
void debugger_pause_cancel(void);

/* GIL held: the pause asked for is armed — every thread was asked to
 * stop at its next line, and the trace backend took it. */
void debugger_pause_armed(void);

/* A pause asked for at least after_ms ago, armed, that no thread has
 * reached (every thread is in C: a rank waiting in a collective for a
 * rank at a breakpoint) becomes the stop in progress, with no thread
 * paused: a round that names thread tid and shows the threads held
 * (dbgtasks.h).  Returns 1 when it began now (the caller posts
 * `stopped`), else 0. */
int debugger_pause_held(int after_ms, long tid);

/* Whether the stop in progress began so (its threads' late stops are
 * posted: dbgstop.c). */
int debugger_round_held(void);

/* A frame of a stopping thread, captured with the GIL (dbgstop.h): text
 * for stackTrace, and the frame object for scopes and evaluate. */
struct debugger_pframe {
	char *func, *file;
	int line;
	struct _object *obj; /* PyFrameObject, strong; GIL to release */
};

/*
 * GIL held, in the stopping thread (native id tid, Python ident): records
 * it paused with frames fr[0..n) (taken over on success) and exc (a new
 * reference is taken), *first set when it starts a round (the first
 * thread of an all-stop).  paused_for_pause: the thread stops only
 * because a pause is wanted (a pause request, or another thread's stop);
 * then it stops only if one still is — a resume that came after the
 * thread saw the pause wanted cancels it (-ECANCELED), so a thread late
 * for a round that was continued never starts a new one.  Returns the
 * thread's slot, or -ECANCELED, -ENOTCONN (no debugger) / -ENOSPC
 * (DEBUGGER_PAUSED_MAX threads paused): fr stays the caller's.
 */
int debugger_enter_stop(long tid, uint64_t ident, struct debugger_pframe *fr,
			size_t n, struct _object *exc, const char *exc_mode,
			int paused_for_pause, int *first);

/* The GIL released: waits until slot's thread is resumed or the debugger
 * goes away.  Returns the command (0: went away) and the epoch it started
 * in. */
int debugger_wait_resume(int slot, unsigned *cmd_epoch);

/* GIL held again: frees the slot and hands back its frames and exception
 * for the caller to release. */
void debugger_leave_stop(int slot, struct debugger_pframe **fr, size_t *n,
			 struct _object **exc);

#endif
