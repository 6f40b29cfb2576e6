/*
 * dbgtasks: what a stop shows besides its paused threads — the threads it
 * holds in C, and asyncio's tasks as thread-like entries.
 *
 * Held threads.  All-stop asks every thread to stop at its next Python
 * line; a thread in a C call (a lock, time.sleep, a collective waiting
 * for a rank at a breakpoint) gets there only when the call returns,
 * which may be never while the stop lasts.  Such a thread is held: it
 * runs no Python while it waits, so its frames can be read where they
 * are.  At a stop, its entry (id: its kernel thread id) gives its Python
 * frames as they stand in the call, with frame ids that scopes,
 * variables and evaluate accept like a paused thread's; `threads` names
 * it "NAME (in C)".  When its call returns it stops at its next line for
 * good (and is a paused thread from then on).  Not on a free-threaded
 * build, where a held thread's frames are not ours to read.
 *
 * Tasks, for an editor that asked for them (attach's "asyncioTasks": the
 * extension's probing.asyncioTasks setting).  At a stop, `threads` lists
 * after each thread running an event loop one entry per task of that
 * loop ("task NAME (coro): awaits WHAT"), with ids DBGTASKS_ID_BASE and
 * above; stackTrace on such an entry gives the task's coroutine frames,
 * innermost first.
 *
 * Both are captured once per stop (the epoch), with the GIL, the first
 * time `threads` or stackTrace asks; they hold their frame objects until
 * the program is resumed (the first resumed thread, or the debugger's
 * tick, lets go of them with the GIL), the next capture or the session's
 * end (dbgcleanup), never past it.
 *
 * Below debugger.c (which asks it for the frame objects of its ids): it
 * calls only the Python modules; the epoch and the paused threads are its
 * callers'.
 *
 * Threads and locks: a mutex of its own guards the table (never held
 * while taking the GIL); which functions need the GIL is said at each.
 */
#ifndef DBGTASKS_H
#define DBGTASKS_H

#include <stddef.h>
#include <stdint.h>

#define DBGTASKS_ID_BASE (1L << 30) /* above every kernel thread id */
#define DBGTASKS_MAX 256	     /* tasks of a stop, at most */
#define DBGTASKS_HELD_MAX 256	     /* held threads of a stop, at most */
#define DBGTASKS_FRAMES_MAX 64	     /* frames kept per entry */
/* Frame ids of the tasks' frames: above every paused thread's. */
#define DBGTASKS_FRAME_BASE ((1LL << 40) + (1LL << 39))

/* Whether the attached editor wants the entries (attach's argument). */
void dbgtasks_enable(int on);
int dbgtasks_enabled(void);

/*
 * Without the GIL (it is taken): captures the held threads of the stop in
 * progress (every thread with a Python frame but the agent's and
 * paused[0..npaused), the main thread first), and its tasks when
 * enabled, unless captured already in this epoch.  Returns 0 when
 * epoch's capture is there (note: why the tasks could not be listed, when
 * this call made it and they could not; else ""), or a negative errno:
 * with note when this call failed, without (-EAGAIN) when one failed in
 * this epoch already — a failed capture is not tried again in the same
 * stop (each would wait for the GIL again).
 */
int dbgtasks_capture(unsigned epoch, const long *paused, size_t npaused,
		     volatile int *cancel, char *note, size_t notelen);

/* Whether the thread with this kernel id is held in epoch's capture. */
int dbgtasks_held(unsigned epoch, long native_id);

/* The held threads' kernel ids in epoch's capture (at most max); their
 * number. */
size_t dbgtasks_held_list(unsigned epoch, long *ids, size_t max);

/* Whether frames of an epoch before this one are kept (the tick lets go
 * of them: dbgtasks_drop_stale). */
int dbgtasks_stale(unsigned epoch);

/* GIL held: the frames from f outwards, innermost first (at most max),
 * as a stop keeps them; *n of them.  NULL when out of memory. */
struct _frame;
struct debugger_pframe *dbgtasks_frames_of(struct _frame *f, size_t max,
					   size_t *n);

/* One entry of the stop: its id, label, and its loop's thread (Python
 * ident). */
struct dbgtask_entry {
	long id;
	char label[256];
	uint64_t ident;
};

/* The task entries (at most max) captured in epoch; their number. */
size_t dbgtasks_list(unsigned epoch, struct dbgtask_entry *out, size_t max);

/* The frames of entry id (a task's id, or a held thread's kernel id) as
 * debugger_frames() gives a paused thread's: 0, -ESRCH (no such entry in
 * this epoch), -ENOMEM. */
struct debugger_frame;
int dbgtasks_frames(unsigned epoch, long id, size_t start, size_t levels,
		    struct debugger_frame **out, size_t *n, size_t *total);

/* Copies frames src[start..start+levels) (levels 0: to the end) as
 * debugger_frames() gives them, ids from base: 0 or -ENOMEM.  Any
 * thread (the caller's lock held); debugger.c's too. */
struct debugger_pframe;
int dbgtasks_copy_frames(const struct debugger_pframe *src, size_t nsrc,
			 int64_t base, size_t start, size_t levels,
			 struct debugger_frame **out, size_t *n);

/* GIL held: the frame object of frame id (new reference) captured in
 * epoch, or NULL. */
struct _frame *dbgtasks_frame_object(unsigned epoch, int64_t id);

/* GIL held: lets go of the captured frames unless they are epoch's (the
 * program was resumed since). */
void dbgtasks_drop_stale(unsigned epoch);

/* GIL held: lets go of the captured frames (the session ended); a
 * capture still running then keeps nothing. */
void dbgtasks_release(void);

/* In a forked child: the table is forgotten (its objects are the
 * parent's references, and stay). */
void dbgtasks_atfork_child(void);

#endif
