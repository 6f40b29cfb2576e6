/*
 * dbgtasks: asyncio's tasks as thread-like entries of a stop, for an
 * editor that asked for them (attach's "asyncioTasks": the extension's
 * probing.asyncioTasks setting).
 *
 * At a stop, `threads` lists after each thread running an event loop one
 * entry per task of that loop ("task NAME (coro): awaits WHAT"), with ids
 * DBGTASKS_ID_BASE and above; stackTrace on such an entry gives the task's
 * coroutine frames, innermost first, with frame ids that scopes,
 * variables and evaluate accept like a paused thread's.  The tasks are
 * captured once per stop (the epoch), with the GIL, the first time
 * `threads` asks; they hold their frame objects until the next capture or
 * the session's end (dbgcleanup), never past it.
 *
 * Below debugger.c (which asks it for the frame objects of its ids): it
 * calls only the Python modules; the epoch is its callers'.
 *
 * Threads and locks: a mutex of its own guards the table (never held
 * while taking the GIL); which functions need the GIL is said at each.
 */
#ifndef DBGTASKS_H
#define DBGTASKS_H

#include <stddef.h>
#include <stdint.h>

#define DBGTASKS_ID_BASE (1L << 30) /* above every kernel thread id */
#define DBGTASKS_MAX 256	     /* entries of a stop, at most */
#define DBGTASKS_FRAMES_MAX 64	     /* frames kept per task */
/* Frame ids of the tasks' frames: above every paused thread's. */
#define DBGTASKS_FRAME_BASE ((1LL << 40) + (1LL << 39))

/* Whether the attached editor wants the entries (attach's argument). */
void dbgtasks_enable(int on);
int dbgtasks_enabled(void);

/* Without the GIL (it is taken): captures the tasks of the stop in
 * progress, unless captured already in this epoch.  0, or a negative
 * errno with err. */
int dbgtasks_capture(unsigned epoch, volatile int *cancel, char *err,
		     size_t errlen);

/* One entry of the stop: its id, label, and its loop's thread (Python
 * ident). */
struct dbgtask_entry {
	long id;
	char label[256];
	uint64_t ident;
};

/* The entries (at most max) captured in epoch; their number. */
size_t dbgtasks_list(unsigned epoch, struct dbgtask_entry *out, size_t max);

/* The frames of entry id as debugger_frames() gives a paused thread's:
 * 0, -ESRCH (no such entry in this epoch), -ENOMEM. */
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
