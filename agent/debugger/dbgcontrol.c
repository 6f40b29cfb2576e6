/*
 * dbgcontrol: the debugger's requests that need the GIL.  See
 * dbgcontrol.h.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "cpython/cpython.h"
#include "dbgcleanup.h"
#include "dbgcontrol.h"
#include "dbgevents.h"
#include "dbghooks.h"
#include "dbgstop.h"
#include "dbgtasks.h"
#include "debugger.h"
#include "python/gilcall.h"
#include "python/pygil.h"
#include "python/pyviews.h"
#include "python/variables.h"
#include "server/worker.h"

/* Runs fn with the GIL (our code only, never interrupted). */
static int with_gil(pygil_fn fn, void *arg, char *err, size_t errlen)
{
	return gilcall_ours(fn, arg, 0, err, errlen);
}

/* ---- configuration ---------------------------------------------------- */

struct set_call {
	const char *path;
	const struct bp_spec *specs;
	size_t n;
	struct bp_result *out;
	int functions;
	int rc;
	char err[256];
};

/*
 * The verified breakpoints of c on lines that torch.compile runs compiled
 * (pyviews.py's compiled_lines): unverified, saying why and what to do.
 * They stay set: where that code does run as Python (dynamo falls back
 * to it: a graph break, an error with suppress_errors, compiling switched
 * off) they stop.  A function compiled after its breakpoints were set is
 * not seen (docs/debugging.md).
 */
static void mark_compiled(struct set_call *c)
{
	PyObject *fn, *lines, *res = NULL;
	size_t k = 0;

	fn = pyviews_get("compiled_lines");
	lines = fn ? PyList_New(0) : NULL;
	for (size_t i = 0; lines && i < c->n; i++) {
		PyObject *l;

		if (!c->out[i].verified)
			continue;
		l = PyLong_FromLong(c->out[i].line);
		if (!l || PyList_Append(lines, l)) {
			Py_XDECREF(l);
			Py_CLEAR(lines);
			break;
		}
		Py_DECREF(l);
		k++;
	}
	if (lines && k)
		res = PyObject_CallFunction(fn, "sO", c->path, lines);
	for (Py_ssize_t j = 0; res && PyTuple_Check(res) &&
			       j < PyTuple_GET_SIZE(res); j++) {
		PyObject *e = PyTuple_GET_ITEM(res, j);
		const char *name;
		long line;

		if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 2)
			continue;
		line = PyLong_AsLong(PyTuple_GET_ITEM(e, 0));
		name = PyUnicode_Check(PyTuple_GET_ITEM(e, 1))
			       ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(e, 1))
			       : NULL;
		for (size_t i = 0; name && i < c->n; i++) {
			struct bp_result *r = &c->out[i];

			if (!r->verified || r->line != line)
				continue;
			r->verified = 0;
			snprintf(r->message, sizeof(r->message),
				 "%.40s runs compiled by torch.compile: its "
				 "lines do not run as Python, so this cannot "
				 "stop; to stop here, run it eagerly "
				 "(torch.compiler.disable, or "
				 "TORCHDYNAMO_DISABLE=1)",
				 name);
		}
	}
	Py_XDECREF(res);
	Py_XDECREF(lines);
	Py_XDECREF(fn);
	PyErr_Clear();
}

static void set_gil_fn(void *arg)
{
	struct set_call *c = arg;

	dbgcleanup_now();
	if (!debugger_active()) {
		c->rc = -ENOTCONN;
		snprintf(c->err, sizeof(c->err), "not attached");
		return;
	}
	if (c->functions)
		c->rc = breakpoints_set_functions(c->specs, c->n, c->out,
						  c->err, sizeof(c->err));
	else
		c->rc = breakpoints_set_file(c->path, c->specs, c->n, c->out,
					     c->err, sizeof(c->err));
	if (!c->rc && !c->functions)
		mark_compiled(c);
	cpython.trace.invalidate();
	dbghooks_watch_loads();
	PyErr_Clear();
	dbghooks_update();
}

static int set_common(struct set_call *c, char *err, size_t errlen)
{
	int rc = with_gil(set_gil_fn, c, err, errlen);

	if (rc)
		return rc;
	if (c->rc)
		snprintf(err, errlen, "%s", c->err);
	return c->rc;
}

int dbgcontrol_set_breakpoints(const char *path, const struct bp_spec *specs,
			       size_t n, struct bp_result *out, char *err,
			       size_t errlen)
{
	struct set_call c = {.path = path, .specs = specs, .n = n, .out = out};

	return set_common(&c, err, errlen);
}

int dbgcontrol_set_function_breakpoints(const struct bp_spec *specs, size_t n,
					struct bp_result *out, char *err,
					size_t errlen)
{
	struct set_call c = {
		.specs = specs, .n = n, .out = out, .functions = 1};

	return set_common(&c, err, errlen);
}

struct filter_call {
	int raised, uncaught, rc;
};

static void filter_gil_fn(void *arg)
{
	struct filter_call *c = arg;

	dbgcleanup_now();
	if (!debugger_active()) {
		c->rc = -ENOTCONN;
		return;
	}
	dbghooks_set_filters(c->raised, c->uncaught);
}

int dbgcontrol_set_exception_filters(int raised, int uncaught, char *err,
				     size_t errlen)
{
	struct filter_call c = {raised, uncaught, 0};
	int rc = with_gil(filter_gil_fn, &c, err, errlen);

	if (!rc && c.rc)
		snprintf(err, errlen, "not attached");
	return rc ? rc : c.rc;
}

/* ---- execution control ------------------------------------------------- */

/*
 * A pause asked for while a thread held the GIL in C is armed as soon as
 * the GIL comes: by a pending call, which the main thread runs when it
 * next evaluates Python (the GIL holder, returning from C, if it is the
 * main thread), or by a job the debugger's tick submits twice a second
 * until one gets the GIL (each waits for it up to ARM_WAIT_MS).  `unarmed` says
 * a pause waits to be armed; `arming` (loop thread) that a job is out.
 */
#define ARM_WAIT_MS 5000 /* a job's wait for the GIL */

static atomic_int unarmed;
static int arming;

/* GIL held: arms the pause asked for, if it still is. */
static int arm(void)
{
	atomic_store(&unarmed, 0);
	if (!debugger_active())
		return -ENOTCONN;
	if (debugger_pause_wanted()) {
		dbgstop_all();
		/* Only a pause the threads were asked to stop for can be
		 * held (another tool may hold the trace backend). */
		if (cpython.trace.enabled())
			debugger_pause_armed();
	}
	return 0;
}

static void pause_gil_fn(void *arg)
{
	int *rc = arg;

	*rc = arm();
}

static int arm_pending_call(void *arg)
{
	(void)arg;
	if (atomic_load(&unarmed) && !cpython.finalizing() &&
	    !pygil_is_gil_thread())
		arm();
	return 0;
}

static void arm_run(struct worker_job *job)
{
	char err[128];
	int rc = 0;

	(void)job;
	/* A worker may wait longer than a request: the GIL comes when its
	 * holder's C call returns. */
	if (atomic_load(&unarmed))
		gilcall_ours(pause_gil_fn, &rc, ARM_WAIT_MS, err, sizeof(err));
}

static void arm_done(struct worker_job *job)
{
	free(job);
	arming = 0;
}

/*
 * A pause that no thread reaches within HELD_AFTER_MS (each is in a C
 * call: a rank waiting in a collective for a rank at a breakpoint, a
 * program asleep) is a stop all the same, of held threads
 * (debugger_pause_held).  It names the main thread
 * (dbgevents_main_thread).  Once the program is resumed, a job does with
 * the GIL what a resumed thread does after a stop (none of a held stop
 * may ever resume): lets go of the frames the stop held, and of the
 * tracing it asked for.  Loop thread: `held` (a held stop not resumed
 * yet), `tidy` (its tracing to update), `tidying` (a job is out).
 */
#define HELD_AFTER_MS 1000

static int held, tidy, tidying;

struct tidy_job {
	struct worker_job j; /* first */
	int hooks;	     /* the tracing too */
	int rc;		     /* gilcall_ours()'s */
};

/* GIL held: what a thread resumed from a stop does (dbgstop.c). */
static void tidy_gil_fn(void *arg)
{
	dbgtasks_drop_stale(debugger_epoch());
	variables_reset_stale();
	if (!*(int *)arg)
		return;
	if (!debugger_pause_wanted())
		cpython.trace.set_mode(NULL, 0);
	dbghooks_update();
}

static void tidy_run(struct worker_job *job)
{
	struct tidy_job *t = (struct tidy_job *)job;
	char err[128];

	t->rc = gilcall_ours(tidy_gil_fn, &t->hooks, ARM_WAIT_MS, err,
			     sizeof(err));
}

static void tidy_done(struct worker_job *job)
{
	struct tidy_job *t = (struct tidy_job *)job;

	if (t->rc && t->hooks)
		tidy = 1; /* again at the next tick */
	free(t);
	tidying = 0;
}

static void held_tick(void)
{
	struct tidy_job *t;
	long tid;

	/* (The thread named only once a pause is waiting.) */
	if (debugger_pause_wanted() && !debugger_stopped() &&
	    debugger_pause_held(HELD_AFTER_MS, tid = dbgevents_main_thread())) {
		held = 1;
		dbgevents_stopped("pause", tid, 1, NULL, 0, "Paused in C");
	}
	if (held && !debugger_round_held()) {
		held = 0;
		tidy = 1;
	}
	if (tidying || (!tidy && !dbgtasks_stale(debugger_epoch())) ||
	    !(t = calloc(1, sizeof(*t))))
		return;
	t->j.run = tidy_run;
	t->j.done = tidy_done;
	t->hooks = tidy;
	tidying = 1;
	if (worker_submit(&t->j)) {
		tidying = 0;
		free(t);
		return;
	}
	tidy = 0;
}

void dbgcontrol_tick(void)
{
	struct worker_job *j;

	held_tick();
	if (!atomic_load(&unarmed) || arming)
		return;
	if (!debugger_active() || !debugger_pause_wanted()) {
		atomic_store(&unarmed, 0);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->run = arm_run;
	j->done = arm_done;
	arming = 1;
	if (worker_submit(j)) {
		arming = 0;
		free(j);
	}
}

int dbgcontrol_pause(char *err, size_t errlen)
{
	int rc = debugger_pause_begin(), grc;

	if (rc == -ENOTCONN) {
		snprintf(err, errlen, "no debugger is attached");
		return -ENOTCONN;
	}
	if (rc == 1)
		return 0; /* already paused */
	grc = with_gil(pause_gil_fn, &rc, err, errlen);
	if (grc == -ETIMEDOUT && !rc) {
		/* A thread holds the GIL in C: it stops when it returns to
		 * Python, the others at their next line once armed. */
		atomic_store(&unarmed, 1);
		/* The tick's job arms it if the call cannot be queued. */
		(void)Py_AddPendingCall(arm_pending_call, NULL);
		return 0;
	}
	if (grc || rc) {
		debugger_pause_cancel();
		if (rc == -ENOTCONN)
			snprintf(err, errlen, "no debugger is attached");
		return grc ? grc : rc;
	}
	return 0;
}

void dbgcontrol_atfork_child(void)
{
	atomic_store(&unarmed, 0);
	arming = 0;
	held = tidy = tidying = 0;
}
