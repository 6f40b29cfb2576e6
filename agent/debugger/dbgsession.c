/*
 * dbgsession: the debug session.  See dbgsession.h.
 *
 * State, guarded by `lock`: the owner, the held stop (asked for, its
 * length, the timer's generation, whether the new owner must be told).
 * `lock` is taken before the paused-thread table's and the cleanup's.
 */
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "cpython/cpython.h"
#include "dbgcleanup.h"
#include "dbgevents.h"
#include "dbghooks.h"
#include "dbgoutput.h"
#include "dbgsession.h"
#include "debugger.h"
#include "server/server.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t owner;
static int hold_asked; /* the owner asked for dbgsession_hold() */
static int hold_ms;
static int held;     /* paused, no owner, waiting for one */
static int announce; /* the owner took a held stop over */
static unsigned hold_gen;

/* Loop thread only. */
static ev_timer hold_timer;
static struct ev_loop *dbg_loop;

int dbgsession_attach(uint64_t session, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (owner && owner != session) {
		snprintf(err, errlen,
			 "another debugger is attached to this "
			 "process (session %llu); only one at a time",
			 (unsigned long long)owner);
		rc = -EBUSY;
	} else if (!owner && dbgcleanup_pending()) {
		snprintf(err, errlen,
			 "the previous debug session is still "
			 "being cleaned up; try again");
		rc = -EAGAIN;
	} else if (!owner && held) {
		/* Takes over a stop held for it (dbgsession_hold). */
		owner = session;
		held = 0;
		announce = 1;
		hold_gen++;
		dbgevents_set_owner(owner);
	} else if (!owner) {
		owner = session;
		debugger_activate();
		dbgevents_set_owner(owner);
	}
	pthread_mutex_unlock(&lock);
	if (!rc)
		dbgevents_threads_start(session);
	return rc;
}

int dbgsession_is_attached(uint64_t session)
{
	int r;

	pthread_mutex_lock(&lock);
	r = session && owner == session;
	pthread_mutex_unlock(&lock);
	return r;
}

/* The session lock held: ends the session and wakes the paused
 * threads. */
static void detach_locked(void)
{
	owner = 0;
	dbgevents_set_owner(0);
	announce = 0;
	dbgcleanup_arm();
	dbgoutput_stop();
	debugger_end();
}

/* Loop thread: a held stop that nobody came for ends. */
static void on_hold_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	int expired;

	(void)loop, (void)revents;
	pthread_mutex_lock(&lock);
	expired = held && hold_gen == (unsigned)(uintptr_t)w->data;
	if (expired) {
		held = 0;
		detach_locked();
	}
	pthread_mutex_unlock(&lock);
	if (expired) {
		log_info("debugger: nobody attached to the held stop; resumed");
		dbgcleanup_submit();
	}
}

void dbgsession_detach(uint64_t session)
{
	int hold = 0;

	pthread_mutex_lock(&lock);
	if (!session || owner != session) {
		pthread_mutex_unlock(&lock);
		return;
	}
	if (hold_asked) {
		/* Keep everything as it is for the next debugger. */
		hold = hold_ms;
		hold_asked = 0;
		owner = 0;
		dbgevents_set_owner(0);
		held = 1;
		hold_gen++;
	} else {
		detach_locked();
	}
	pthread_mutex_unlock(&lock);
	if (hold) {
		/* The close hook runs on the loop thread: the timer is ours. */
		if (dbg_loop) {
			ev_timer_stop(dbg_loop, &hold_timer);
			ev_timer_set(&hold_timer, hold / 1000.0, 0.);
			hold_timer.data = (void *)(uintptr_t)hold_gen;
			ev_timer_start(dbg_loop, &hold_timer);
		}
		return;
	}
	dbgcleanup_submit();
}

int dbgsession_hold(uint64_t session, int wait_ms, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (!session || owner != session) {
		snprintf(err, errlen, "not the attached debugger");
		rc = -ENOTCONN;
	} else {
		hold_asked = 1;
		hold_ms = wait_ms > 0 ? wait_ms : 1;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void dbgsession_release(uint64_t session)
{
	uint64_t to = 0;
	int was_held;

	pthread_mutex_lock(&lock);
	was_held = held;
	if (held) {
		held = 0;
		detach_locked();
	} else if (owner) {
		debugger_continue_all();
		if (owner != session)
			to = owner;
	}
	pthread_mutex_unlock(&lock);
	(void)was_held; /* the caller runs dbgcleanup_run() */
	if (to)
		dbgevents_continued(to);
}

void dbgsession_announce(uint64_t session)
{
	long tid = 0;

	pthread_mutex_lock(&lock);
	if (owner == session && announce)
		tid = debugger_first_paused();
	if (owner == session)
		announce = 0;
	pthread_mutex_unlock(&lock);
	if (tid)
		dbgevents_stopped("pause", tid, 1, NULL, 0,
				  debugger_round_held() ? "Paused in C" : NULL);
}

void dbgsession_get_status(struct dbgsession_status *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&lock);
	st->session = owner;
	st->held = held;
	st->stopped = debugger_paused_list(st->paused, DEBUGGER_PAUSED_MAX,
					   &st->npaused);
	pthread_mutex_unlock(&lock);
	dbghooks_status(&st->hook, &st->exc_raised, &st->exc_uncaught);
}

int dbgsession_register(struct server *srv)
{
	dbg_loop = server_loop(srv);
	ev_timer_init(&hold_timer, on_hold_timeout, 1., 0.);
	return server_on_close(srv, dbgsession_detach);
}

void dbgsession_stop(void)
{
	pthread_mutex_lock(&lock);
	if (owner || held) {
		held = 0;
		detach_locked();
	}
	pthread_mutex_unlock(&lock);
}

void dbgsession_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	owner = 0;
	held = hold_asked = 0;
	dbg_loop = NULL; /* the parent's loop; its timers are not ours */
}
