/*
 * dbghooks: the trace backend, the exception filters and the audit hook.
 * See dbghooks.h.
 *
 * State (GIL): the filters, whether the audit hook is registered;
 * audit_on and the status mirrors are atomics.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "breakpoints.h"
#include "cpython/cpython.h"
#include "dbgevents.h"
#include "dbghooks.h"
#include "dbgstep.h"
#include "debugger.h"
#include "python/excepthooks.h"
#include "python/pygil.h"

static int exc_raised, exc_uncaught;
static void (*uncaught_fn)(PyObject *value, PyObject *tb);
static int audit_registered;
static atomic_int audit_on;
static atomic_int backend_on;	  /* status mirror */
static atomic_int filters_mirror; /* status mirror: 1 raised | 2 uncaught */

/* The backend's last refusal, said once (as an `output` event) until it
 * changes. */
static int enable_refused;

int dbghooks_enable(void)
{
	char err[256] = "", msg[320];
	int rc = cpython.trace.enable(err, sizeof(err));

	if (rc && rc != enable_refused) {
		snprintf(msg, sizeof(msg),
			 "Probing: breakpoints and stepping cannot work: %s",
			 err);
		dbgevents_output("important", msg, NULL, 0);
	}
	enable_refused = rc;
	return rc;
}

static void mirror(void)
{
	atomic_store(&backend_on, cpython.trace.enabled());
	atomic_store(&filters_mirror, exc_raised | exc_uncaught << 1);
}

void dbghooks_init(void (*uncaught)(PyObject *value, PyObject *tb))
{
	uncaught_fn = uncaught;
}

void dbghooks_update(void)
{
	int loaded = 0, pending = 0, funcs = 0, need;

	dbgstep_prune();

	breakpoints_counts(&loaded, &pending, &funcs);
	need = debugger_active() &&
	       (loaded || funcs || exc_raised || debugger_pause_wanted() ||
		dbgstep_count());
	atomic_store(&audit_on, debugger_active() && pending > 0);
	cpython.trace.exception_events(exc_raised && debugger_active());
	if (need) {
		dbghooks_enable();
		cpython.trace.retrace_all(pygil_is_own_thread);
	} else if (cpython.trace.enabled()) {
		cpython.trace.disable();
	}
	mirror();
}

/* Never fails the audited operation.  Costs a flag test when no
 * breakpoint waits for its file. */
static int audit_hook(const char *event, PyObject *args, void *data)
{
	PyObject *name = NULL, *et, *ev, *etb;
	int ids[BREAKPOINTS_LOADED_MAX], lines[BREAKPOINTS_LOADED_MAX], k;

	(void)data;
	if (!atomic_load_explicit(&audit_on, memory_order_relaxed))
		return 0;
	if (strcmp(event, "exec") && strcmp(event, "compile"))
		return 0;
	if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1 ||
	    cpython.finalizing())
		return 0;
	if (event[0] == 'e') {
		PyObject *code = PyTuple_GET_ITEM(args, 0);
		if (PyCode_Check(code))
			name = ((PyCodeObject *)code)->co_filename;
	} else if (PyTuple_GET_SIZE(args) >= 2) {
		name = PyTuple_GET_ITEM(args, 1);
	}
	if (!name || !PyUnicode_Check(name))
		return 0;
	PyErr_Fetch(&et, &ev, &etb);
	k = breakpoints_file_loaded(name, ids, lines, BREAKPOINTS_LOADED_MAX);
	if (k) {
		cpython.trace.invalidate();
		dbghooks_update();
		dbgevents_verified(ids, lines, k);
	}
	PyErr_Clear();
	PyErr_Restore(et, ev, etb);
	return 0;
}

void dbghooks_set_filters(int raised, int uncaught)
{
	exc_raised = raised;
	exc_uncaught = uncaught;
	excepthooks_set(uncaught ? uncaught_fn : NULL);
	dbghooks_update();
}

int dbghooks_raised(void)
{
	return exc_raised;
}

int dbghooks_uncaught(void)
{
	return exc_uncaught;
}

void dbghooks_watch_loads(void)
{
	if (!audit_registered && PySys_AddAuditHook(audit_hook, NULL) == 0)
		audit_registered = 1;
}

void dbghooks_enabled_now(void)
{
	atomic_store(&backend_on, 1);
}

void dbghooks_reset(void)
{
	atomic_store(&audit_on, 0);
	exc_raised = exc_uncaught = 0;
	excepthooks_set(NULL);
	cpython.trace.disable();
	mirror();
}

void dbghooks_status(int *backend, int *raised, int *uncaught)
{
	int f = atomic_load(&filters_mirror);

	*backend = atomic_load(&backend_on);
	*raised = f & 1;
	*uncaught = (f >> 1) & 1;
}

void dbghooks_atfork_child(void)
{
	atomic_store(&audit_on, 0);
}
