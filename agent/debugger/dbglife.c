/*
 * dbglife: the debugger in the agent's life — set up on the server, its
 * tick, stopped at exit, reset in a forked child.  See debugger.h ("the
 * agent's lifecycle").  The top of the debugger: it calls the other
 * modules, none calls it.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <ev.h>

#include "breakpoints.h"
#include "cpython/cpython.h"
#include "dbgcleanup.h"
#include "dbgcontrol.h"
#include "dbgevents.h"
#include "dbghooks.h"
#include "dbgoutput.h"
#include "dbgsession.h"
#include "dbgstep.h"
#include "dbgtasks.h"
#include "dbgtrace.h"
#include "debugger.h"
#include "server/server.h"

#define TICK_S 0.5

/* Loop thread only. */
static ev_timer tick;

/* Twice a second on the loop: the target's buffered output out, a pause
 * that waits for the GIL armed again, thread events. */
static void on_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop, (void)w, (void)revents;
	dbgoutput_flush();
	dbgcontrol_tick();
	dbgevents_tick();
}

int debugger_register(struct server *srv)
{
	dbgevents_init(srv);
	dbghooks_init(dbgtrace_uncaught);
	cpython.trace.init(breakpoints_code_wanted, dbgtrace_function,
			   breakpoints_line_wanted);
	ev_timer_init(&tick, on_tick, TICK_S, TICK_S);
	ev_timer_start(server_loop(srv), &tick);
	return dbgsession_register(srv);
}

void debugger_stop(void)
{
	dbgsession_stop();
}

void debugger_atfork_child(void)
{
	dbgsession_atfork_child();
	debugger_pause_atfork_child();
	dbgcleanup_atfork_child();
	dbgtasks_atfork_child();
	dbgstep_reset();
	dbghooks_atfork_child();
	dbgevents_atfork_child();
	dbgoutput_atfork_child();
	dbgcontrol_atfork_child();
	cpython.trace.atfork_child();
}
