/*
 * debugger: the paused threads.  See debugger.h.
 *
 * State, and what guards it:
 *  - `lock`: the paused-thread table (struct paused: which thread, its
 *    round, the command that resumes it, the text of its frames),
 *    active, pause_pending, stopped, epoch.  The cond variable wakes
 *    paused threads.  Never held while taking the GIL or running Python;
 *    taken after the session's lock (dbgsession.c) when both are.
 *  - the GIL: the Python objects of paused threads (frames, exception).
 *  - `active` and `epoch` are also read without the lock (atomics): the
 *    trace function checks them on every event.
 *
 * A stop (dbgstop.c): the stopping thread (GIL held, inside the trace
 * function) captures its frames, registers here, asks the other threads
 * to stop, posts `stopped`, then waits on the cond variable with the GIL
 * released.  A resume sets each paused thread's command and bumps the
 * epoch; each thread takes the GIL back, drops its frames and sets up its
 * step, if any.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"
#include <frameobject.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/thread.h"
#include "dbgtasks.h"
#include "debugger.h"

struct paused {
	int used;
	long native_id;
	uint64_t ident;
	unsigned round;
	int cmd;	    /* 0 while waiting */
	unsigned cmd_epoch; /* the epoch the command started */
	int64_t frame_base;
	struct debugger_pframe *frames;
	size_t nframes;
	PyObject *exc; /* exception value of an exception stop; GIL */
	const char *exc_mode;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static atomic_int active;
static atomic_uint epoch = 1;
static int pause_pending;
static int64_t pause_asked_ms; /* when pause_pending was set */
static int pause_armed;		/* the threads were asked to stop for it */
static int stopped; /* a round is in progress */
static int round_held;	 /* it began with no thread paused */
static long held_tid;	 /* the thread such a round names */
static unsigned round_no;
static int64_t next_frame_id = DEBUGGER_FRAME_BASE;
static struct paused paused[DEBUGGER_PAUSED_MAX];

static struct paused *slot_of_locked(long native_id)
{
	for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++)
		if (paused[i].used && paused[i].native_id == native_id)
			return &paused[i];
	return NULL;
}

/* ---- paused threads -------------------------------------------------- */

int debugger_resume(long thread, enum debugger_cmd cmd, char *err,
		    size_t errlen)
{
	struct paused *p = NULL;
	unsigned ep;

	pthread_mutex_lock(&lock);
	if (cmd != DEBUGGER_CONTINUE) {
		p = slot_of_locked(thread);
		if (!p || p->cmd) {
			pthread_mutex_unlock(&lock);
			snprintf(err, errlen, "thread %ld is not paused",
				 thread);
			return -ESRCH;
		}
	}
	pause_pending = 0;
	pause_armed = 0;
	stopped = 0;
	ep = atomic_fetch_add(&epoch, 1) + 1;
	for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++) {
		if (!paused[i].used || paused[i].cmd)
			continue;
		paused[i].cmd = &paused[i] == p ? (int)cmd : DEBUGGER_CONTINUE;
		paused[i].cmd_epoch = ep;
	}
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	return 0;
}

unsigned debugger_epoch(void)
{
	return atomic_load(&epoch);
}

int debugger_is_paused(long native_id)
{
	struct paused *p;
	int r;

	pthread_mutex_lock(&lock);
	p = slot_of_locked(native_id);
	r = p && !p->cmd;
	pthread_mutex_unlock(&lock);
	return r;
}

int debugger_stopped(void)
{
	int r;

	pthread_mutex_lock(&lock);
	r = stopped;
	pthread_mutex_unlock(&lock);
	return r;
}

int debugger_frames(long native_id, size_t start, size_t levels,
		    struct debugger_frame **out, size_t *n, size_t *total)
{
	struct paused *p;
	int rc;

	*out = NULL;
	*n = *total = 0;
	pthread_mutex_lock(&lock);
	p = slot_of_locked(native_id);
	if (!p || p->cmd) {
		pthread_mutex_unlock(&lock);
		return -ESRCH;
	}
	*total = p->nframes;
	rc = dbgtasks_copy_frames(p->frames, p->nframes, p->frame_base, start,
				  levels, out, n);
	pthread_mutex_unlock(&lock);
	return rc;
}

void debugger_frames_release(struct debugger_frame *f, size_t n)
{
	for (size_t i = 0; f && i < n; i++) {
		free(f[i].func);
		free(f[i].file);
	}
	free(f);
}

PyFrameObject *debugger_frame_object(int64_t id, char *err, size_t errlen)
{
	PyObject *obj = NULL;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < DEBUGGER_PAUSED_MAX && !obj; i++) {
		struct paused *p = &paused[i];
		if (!p->used || p->cmd || id < p->frame_base ||
		    id >= p->frame_base + (int64_t)p->nframes)
			continue;
		obj = p->frames[id - p->frame_base].obj;
	}
	/* The owning thread drops its frames only with the GIL, which the
	 * caller holds: the reference is safe to take. */
	Py_XINCREF(obj);
	pthread_mutex_unlock(&lock);
	/* A held thread's or an asyncio task's frame, an entry of this
	 * stop (dbgtasks.h). */
	if (!obj && id >= DBGTASKS_FRAME_BASE)
		obj = (PyObject *)dbgtasks_frame_object(debugger_epoch(), id);
	if (!obj)
		snprintf(err, errlen,
			 "frame %lld is not a frame of a paused "
			 "thread (was it resumed?)",
			 (long long)id);
	return (PyFrameObject *)obj;
}

PyObject *debugger_exception(long native_id, const char **mode, char *err,
			     size_t errlen)
{
	struct paused *p;
	PyObject *exc = NULL;

	pthread_mutex_lock(&lock);
	p = slot_of_locked(native_id);
	if (p && !p->cmd && p->exc) {
		exc = Py_NewRef(p->exc);
		*mode = p->exc_mode ? p->exc_mode : "always";
	}
	pthread_mutex_unlock(&lock);
	if (!exc)
		snprintf(err, errlen,
			 "thread %ld is not stopped on an "
			 "exception",
			 native_id);
	return exc;
}

/* ---- the agent's lifecycle ---------------------------------------------- */

void debugger_pause_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&wake, NULL);
	atomic_store(&active, 0);
	pause_pending = 0;
	pause_armed = 0;
	stopped = 0;
	round_held = 0;
	memset(paused, 0, sizeof(paused)); /* the parent's; leaked */
}

/* ---- for the session ---------------------------------------------------- */

/* Every waiting thread gets CONTINUE.  The lock held. */
static void continue_all_locked(void)
{
	for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++)
		if (paused[i].used && !paused[i].cmd)
			paused[i].cmd = DEBUGGER_CONTINUE;
	pthread_cond_broadcast(&wake);
}

void debugger_activate(void)
{
	pthread_mutex_lock(&lock);
	atomic_store(&active, 1);
	atomic_fetch_add(&epoch, 1);
	pthread_mutex_unlock(&lock);
}

void debugger_end(void)
{
	pthread_mutex_lock(&lock);
	atomic_store(&active, 0);
	atomic_fetch_add(&epoch, 1);
	pause_pending = 0;
	pause_armed = 0;
	stopped = 0;
	continue_all_locked();
	pthread_mutex_unlock(&lock);
}

void debugger_continue_all(void)
{
	pthread_mutex_lock(&lock);
	pause_pending = 0;
	pause_armed = 0;
	stopped = 0;
	atomic_fetch_add(&epoch, 1);
	continue_all_locked();
	pthread_mutex_unlock(&lock);
}

long debugger_first_paused(void)
{
	long tid = 0;

	pthread_mutex_lock(&lock);
	if (stopped)
		for (int i = 0; i < DEBUGGER_PAUSED_MAX && !tid; i++)
			if (paused[i].used && !paused[i].cmd)
				tid = paused[i].native_id;
	if (stopped && !tid && round_held)
		tid = held_tid;
	pthread_mutex_unlock(&lock);
	return tid;
}

int debugger_paused_list(long *ids, size_t max, size_t *n)
{
	int s;

	*n = 0;
	pthread_mutex_lock(&lock);
	s = stopped;
	for (int i = 0; i < DEBUGGER_PAUSED_MAX && *n < max; i++)
		if (paused[i].used && !paused[i].cmd)
			ids[(*n)++] = paused[i].native_id;
	pthread_mutex_unlock(&lock);
	return s;
}

/* ---- for the debugger's modules ---------------------------------------- */

int debugger_active(void)
{
	return atomic_load(&active);
}

int debugger_pause_wanted(void)
{
	int p;

	pthread_mutex_lock(&lock);
	p = pause_pending || stopped;
	pthread_mutex_unlock(&lock);
	return p;
}

int debugger_pause_begin(void)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active))
		rc = -ENOTCONN;
	else if (stopped)
		rc = 1; /* already paused */
	else if (!pause_pending) {
		pause_pending = 1;
		pause_asked_ms = agent_now_ms();
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void debugger_pause_armed(void)
{
	pthread_mutex_lock(&lock);
	if (pause_pending)
		pause_armed = 1;
	pthread_mutex_unlock(&lock);
}

int debugger_pause_held(int after_ms, long tid)
{
	int began = 0;

	pthread_mutex_lock(&lock);
	if (atomic_load(&active) && pause_pending && pause_armed &&
	    !stopped && agent_now_ms() - pause_asked_ms >= after_ms) {
		pause_pending = 0;
		pause_armed = 0;
		stopped = 1;
		round_held = 1;
		held_tid = tid;
		round_no++;
		began = 1;
	}
	pthread_mutex_unlock(&lock);
	return began;
}

int debugger_round_held(void)
{
	int r;

	pthread_mutex_lock(&lock);
	r = stopped && round_held;
	pthread_mutex_unlock(&lock);
	return r;
}

void debugger_pause_cancel(void)
{
	pthread_mutex_lock(&lock);
	pause_pending = 0;
	pause_armed = 0;
	pthread_mutex_unlock(&lock);
}

int debugger_enter_stop(long tid, uint64_t ident, struct debugger_pframe *fr,
			size_t n, PyObject *exc, const char *exc_mode,
			int paused_for_pause, int *first)
{
	struct paused *p = NULL;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active)) {
		pthread_mutex_unlock(&lock);
		return -ENOTCONN;
	}
	if (paused_for_pause && !pause_pending && !stopped) {
		/* Resumed since the thread saw the pause wanted. */
		pthread_mutex_unlock(&lock);
		return -ECANCELED;
	}
	for (int i = 0; i < DEBUGGER_PAUSED_MAX && !p; i++)
		if (!paused[i].used)
			p = &paused[i];
	if (!p) {
		pthread_mutex_unlock(&lock);
		return -ENOSPC;
	}
	*first = !stopped;
	if (*first) {
		round_no++;
		round_held = 0;
	}
	stopped = 1;
	pause_pending = 0;
	pause_armed = 0;
	p->used = 1;
	p->native_id = tid;
	p->ident = ident;
	p->round = round_no;
	p->cmd = 0;
	p->frames = fr;
	p->nframes = n;
	p->frame_base = next_frame_id;
	next_frame_id += (int64_t)n + 1;
	p->exc = Py_XNewRef(exc);
	p->exc_mode = exc_mode;
	pthread_mutex_unlock(&lock);
	return (int)(p - paused);
}

int debugger_wait_resume(int slot, unsigned *cmd_epoch)
{
	struct paused *p = &paused[slot];
	int cmd;

	pthread_mutex_lock(&lock);
	while (!p->cmd && atomic_load(&active))
		pthread_cond_wait(&wake, &lock);
	cmd = atomic_load(&active) ? p->cmd : 0;
	*cmd_epoch = p->cmd_epoch;
	pthread_mutex_unlock(&lock);
	return cmd;
}

void debugger_leave_stop(int slot, struct debugger_pframe **fr, size_t *n,
			 PyObject **exc)
{
	struct paused *p = &paused[slot];

	pthread_mutex_lock(&lock);
	*fr = p->frames;
	*n = p->nframes;
	*exc = p->exc;
	memset(p, 0, sizeof(*p));
	pthread_mutex_unlock(&lock);
}
