/*
 * gilcall: see gilcall.h.
 */
#include "cpython/pycompat.h"

#include "gilcall.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "pygil.h"
#include "pystack.h"

static void unref(struct gilcall *c)
{
	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
		c->release(c);
}

static void trampoline(void *arg)
{
	struct gilcall *c = arg;

	c->run(c);
	unref(c);
}

int gilcall_run(struct gilcall *c, int run_ms, volatile int *cancel, char *err,
		size_t errlen)
{
	struct pygil_limits lim = {0};
	int rc;

	c->refs = 2;
	lim.start_ms = (int)config_int("python.gil_timeout_ms");
	lim.run_ms = run_ms;
	lim.cancel = cancel;
	lim.kind = c->kind ? c->kind : PYGIL_REPR;
	lim.what = c->what;
	rc = pygil_run(trampoline, c, &lim, NULL);
	switch (rc) {
	case 0:
	case -EINPROGRESS:
		break;
	default:
		/* The function never ran: only our reference is left. */
		c->refs = 1;
		break;
	}
	if (rc == -EINPROGRESS && run_ms <= 0)
		snprintf(err, errlen,
			 "cancelled but still running (blocked in C?)");
	else if (rc == -EINPROGRESS)
		snprintf(err, errlen,
			 "interrupted after %d ms but still "
			 "running (blocked in C?)",
			 run_ms);
	else if (rc)
		gilcall_explain(rc, lim.start_ms, err, errlen);
	return rc;
}

int gilcall_ours(void (*fn)(void *arg), void *arg, int start_ms, char *err,
		 size_t errlen)
{
	struct pygil_limits lim = {0};
	int rc;

	lim.start_ms = start_ms > 0 ? start_ms
				    : (int)config_int("python.gil_timeout_ms");
	rc = pygil_run(fn, arg, &lim, NULL);
	if (rc)
		gilcall_explain(rc, lim.start_ms, err, errlen);
	return rc;
}

void gilcall_explain(int rc, int start_ms, char *err, size_t errlen)
{
	long holder = 0;
	char what[PYGIL_WHAT_MAX + 64];

	switch (rc) {
	case -ETIMEDOUT:
		if (!pystack_gil_holder(&holder))
			snprintf(err, errlen,
				 "the GIL did not come within %d ms", start_ms);
		else if (pygil_thread_what(holder, what, sizeof(what)))
			/* Not a thread of the program: say whose call, and
			 * what it runs (its thread is no program's). */
			snprintf(err, errlen,
				 "the GIL is held by the agent's own call (%s) "
				 "and did not come within %d ms",
				 what, start_ms);
		else
			snprintf(err, errlen,
				 "the GIL is held by thread %ld and did not "
				 "come within %d ms; see `probing backtrace`",
				 holder, start_ms);
		break;
	case -EBUSY:
		pygil_busy_explain(err, errlen);
		break;
	case -EINPROGRESS:
		snprintf(err, errlen, "it did not end in time (blocked in C?)");
		break;
	case -ECANCELED:
		snprintf(err, errlen, "cancelled");
		break;
	case -EAGAIN:
		snprintf(err, errlen, "agent busy: too many Python calls queued");
		break;
	default:
		snprintf(err, errlen, "cannot run Python: %s", strerror(-rc));
		break;
	}
}

void gilcall_done(struct gilcall *c)
{
	unref(c);
}

int gilcall_fail_from_exc(int rc, const char *what, char *err, size_t errlen)
{
	PyObject *t, *v, *tb, *s = NULL;
	int kb;

	PyErr_Fetch(&t, &v, &tb);
	PyErr_NormalizeException(&t, &v, &tb);
	kb = t && PyErr_GivenExceptionMatches(t, PyExc_KeyboardInterrupt);
	if (v)
		s = PyObject_Str(v);
	snprintf(err, errlen, "%s: %s%s%s", what,
		 t && PyType_Check(t) ? _PyType_Name((PyTypeObject *)t)
				      : "error",
		 s && PyUnicode_Check(s) ? ": " : "",
		 s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : "");
	PyErr_Clear();
	Py_XDECREF(s);
	Py_XDECREF(t);
	Py_XDECREF(v);
	Py_XDECREF(tb);
	return kb ? -EINTR : rc;
}
