/*
 * pytrace_state: the trace backends' shared state.  See pytrace_state.h.
 */
#include "pycompat.h"

#include <errno.h>

#include "pytrace.h"
#include "pytrace_state.h"

struct thread_mode {
	PyThreadState *ts;
	unsigned long ident; /* ts->thread_id: a reused ts is another thread */
	int mode;
};

uintptr_t pytrace_state_gen = 1;
int pytrace_state_modes_any;
Py_ssize_t pytrace_state_extra = -1;

static cpython_classify_fn classify_cb;
static cpython_trace_fn trace_cb;
static cpython_line_fn line_cb;
static int enabled;
static int exc_events;
static int global_mode;
static struct thread_mode modes[PYTRACE_MODES_MAX];
static int nmodes;

void pytrace_state_init(cpython_classify_fn classify, cpython_trace_fn trace,
			cpython_line_fn line)
{
	classify_cb = classify;
	trace_cb = trace;
	line_cb = line;
}

cpython_trace_fn pytrace_state_trace(void)
{
	return trace_cb;
}

int pytrace_state_line_wanted(PyObject *code, int line)
{
	return line_cb ? line_cb(code, line) != 0 : 1;
}

Py_ssize_t pytrace_state_slot(void)
{
	if (pytrace_state_extra < 0) {
		pytrace_state_extra =
			PyUnstable_Eval_RequestCodeExtraIndex(NULL);
		if (pytrace_state_extra < 0) {
			PyErr_Clear();
			return -ENOSPC;
		}
	}
	return pytrace_state_extra;
}

int pytrace_state_wanted(PyCodeObject *co)
{
	void *tag = NULL;
	PyObject *et, *ev, *etb;
	int w;

	if (pytrace_state_extra < 0)
		return 0;
	PyErr_Fetch(&et, &ev, &etb);
	if (PyUnstable_Code_GetExtra((PyObject *)co, pytrace_state_extra,
				     &tag) < 0) {
		PyErr_Clear();
		tag = NULL;
	}
	if (((uintptr_t)tag >> 1) == pytrace_state_gen) {
		PyErr_Restore(et, ev, etb);
		return (int)((uintptr_t)tag & 1);
	}
	w = enabled && classify_cb && classify_cb((PyObject *)co) != 0;
	if (enabled &&
	    PyUnstable_Code_SetExtra(
		    (PyObject *)co, pytrace_state_extra,
		    (void *)((pytrace_state_gen << 1) | (uintptr_t)w)) < 0)
		PyErr_Clear();
	PyErr_Restore(et, ev, etb);
	return w;
}

void pytrace_state_invalidate(void)
{
	pytrace_state_gen++;
}

int pytrace_state_enabled(void)
{
	return enabled;
}

void pytrace_state_set_enabled(int on)
{
	enabled = on;
}

int pytrace_state_exc_events(void)
{
	return exc_events;
}

void pytrace_state_set_exc_events(int on)
{
	exc_events = on;
}

int pytrace_state_mode(PyThreadState *ts)
{
	int m = global_mode;

	if (!pytrace_state_modes_any)
		return 0;
	for (int i = 0; i < nmodes; i++)
		if (modes[i].ts == ts && modes[i].ident == ts->thread_id)
			m |= modes[i].mode;
	return m;
}

int pytrace_state_set_mode(PyThreadState *ts, int mode)
{
	if (!ts) {
		global_mode = mode;
	} else {
		int i;

		for (i = 0; i < nmodes; i++)
			if (modes[i].ts == ts)
				break;
		if (i == nmodes) {
			if (!mode)
				goto out;
			if (nmodes == PYTRACE_MODES_MAX)
				return -ENOSPC;
			nmodes++;
		}
		if (mode) {
			modes[i].ts = ts;
			modes[i].ident = ts->thread_id;
			modes[i].mode = mode;
		} else {
			modes[i] = modes[--nmodes];
		}
	}
out:
	pytrace_state_modes_any = global_mode || nmodes;
	return 0;
}

void pytrace_state_reset(void)
{
	enabled = 0;
	exc_events = 0;
	pytrace_state_gen++;
	global_mode = 0;
	nmodes = 0;
	pytrace_state_modes_any = 0;
}
