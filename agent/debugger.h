/*
 * debugger: one debug session at a time — who is attached, which threads
 * are paused and why, pause/continue/step, and what happens on detach.
 *
 * The model is "all-stop": when a thread stops (breakpoint, step, pause,
 * exception), every other thread is asked to stop at its next Python line
 * (threads in C stop when they come back to Python and are shown running
 * until then), and continue or a step resumes them all.  A paused thread
 * waits inside the C trace function (pyhook.h) with the GIL released, so
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
 * on a worker.  Afterwards no trace function of ours and no hook remain.
 *
 * Threads and locks: one mutex guards the session and pause state (never
 * held while taking the GIL or running Python); breakpoints, pyhook and
 * Python objects are guarded by the GIL.  Which functions need the GIL is
 * said at each.
 */
#ifndef DEBUGGER_H
#define DEBUGGER_H

#include <stddef.h>
#include <stdint.h>

#include "breakpoints.h"

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

/* Any thread.  Makes session the debugger.  Returns 0 (also when it is
 * already), or with err -EBUSY when another session is attached, -EAGAIN
 * while the previous session's cleanup is pending (debugger_cleanup()
 * first). */
int debugger_attach(uint64_t session, char *err, size_t errlen);

/* Is session the attached debugger? */
int debugger_is_attached(uint64_t session);

/* The attached session, 0 when none. */
uint64_t debugger_session(void);

/*
 * Ends session's debugging if it is the attached one: resumes every
 * paused thread and schedules the removal of breakpoints and hooks (see
 * above) on a worker — or, when the session asked for debugger_hold(),
 * keeps the stop for the next debugger.  Never blocks.  Loop thread only
 * (it is the server's close hook).
 */
void debugger_detach(uint64_t session);

/* Registers debugger_detach as a close hook of srv (loop thread or before
 * the loop runs).  Returns 0 or -ENOSPC. */
struct server;
int debugger_register(struct server *srv);

/* Worker thread: takes the GIL (bounded) to finish a detach now, if one
 * is pending.  Used before attach and by the cleanup job.  Returns 0 or
 * -ETIMEDOUT etc. with err. */
int debugger_cleanup(char *err, size_t errlen);

/*
 * Breakpoint configuration; worker thread (takes the GIL, bounded by
 * python.gil_timeout_ms).  Same contracts as breakpoints_set_file /
 * _set_functions, plus -ETIMEDOUT when the GIL did not come.  Afterwards
 * frames of the files concerned that are running already are traced, so
 * a breakpoint in a running loop takes effect at its next line.
 */
int debugger_set_breakpoints(const char *path, const struct bp_spec *specs,
			     size_t n, struct bp_result *out, char *err,
			     size_t errlen);
int debugger_set_function_breakpoints(const struct bp_spec *specs, size_t n,
				      struct bp_result *out, char *err,
				      size_t errlen);

/* Exception breakpoints: stop where an exception is raised (raised), or
 * when one is about to end a thread or the program (uncaught).  Worker
 * thread (GIL, bounded). */
int debugger_set_exception_filters(int raised, int uncaught, char *err,
				   size_t errlen);

/*
 * Asks every thread to stop at its next Python line; the `stopped` event
 * follows when the first one does.  Worker thread (GIL, bounded).
 * Returns 0, -ETIMEDOUT (the GIL is held in C: nothing changed), -ENOTCONN
 * (no debugger attached).
 */
int debugger_pause(char *err, size_t errlen);

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

/*
 * Hands the stop over to the next debugger: when session (attached) ends,
 * the target stays paused — no resume, breakpoints kept — until another
 * session attaches (it takes the stop over) or wait_ms pass (then the
 * detach happens).  For `probing debug --pause`.  Any thread.  Returns 0
 * or -ENOTCONN when session is not the attached one.
 */
int debugger_hold(uint64_t session, int wait_ms, char *err, size_t errlen);

/* Resumes every paused thread for any session (`probing debug --resume`);
 * the attached debugger, if another session, gets a `continued` event.  A
 * held stop with no debugger is detached: the caller (a worker) then runs
 * debugger_cleanup().  Never blocks. */
void debugger_release(uint64_t session);

/* For configurationDone: tells session (now attached) about a stop that
 * was in progress before it came (a held one), with a `stopped` event. */
void debugger_announce(uint64_t session);

/* The debugger's state, for probing/debug status.  Any thread, no GIL. */
struct debugger_status {
	uint64_t session; /* attached session, 0 when none */
	int held;	  /* paused, waiting for a debugger to attach */
	int stopped;
	long paused[DEBUGGER_PAUSED_MAX]; /* native ids of paused threads */
	size_t npaused;
	int hook; /* the frame-evaluation hook is installed */
	int exc_raised, exc_uncaught;
};
void debugger_get_status(struct debugger_status *st);

/* Agent stop (interpreter exit): detaches whatever session is attached
 * and wakes every paused thread.  Any thread. */
void debugger_stop(void);

/* In a forked child: forget the parent's session and paused threads. */
void debugger_atfork_child(void);

#endif
