/*
 * pytrace_state: what the trace backends (pyhook.c up to 3.11, pymonitor.c
 * from 3.12; pytrace.h) share: the debugger's callbacks, the
 * classification of code objects (classify()'s answer cached per
 * generation in a co_extra slot), whether tracing is on, and the threads'
 * modes (CPYTHON_TRACE_*).  Private to agent/cpython.
 *
 * Every function runs with the GIL held; the state is guarded by it.
 * The variables below are read by the backends' hot paths and written
 * here only.
 */
#ifndef PYTRACE_STATE_H
#define PYTRACE_STATE_H

#include <stdint.h>

#include "cpython.h"

/* A code object's cached class is (gen << 1 | wanted); 0 is none. */
extern uintptr_t pytrace_state_gen;
/* Some thread, or all, has a mode. */
extern int pytrace_state_modes_any;
/* The co_extra slot of the cache, -1 before pytrace_state_slot(). */
extern Py_ssize_t pytrace_state_extra;

/* The debugger's callbacks (cpython.trace.init). */
void pytrace_state_init(cpython_classify_fn classify, cpython_trace_fn trace,
			cpython_line_fn line);
cpython_trace_fn pytrace_state_trace(void);
/* The line callback: does line of code hold a breakpoint?  1 when no
 * callback was given. */
int pytrace_state_line_wanted(PyObject *code, int line);

/* The co_extra slot of the cache: its index, requested once; -ENOSPC
 * when CPython has none left. */
Py_ssize_t pytrace_state_slot(void);

/* Is code wanted (classify()'s answer this generation, asked and cached
 * when stale)?  0 when tracing is off.  Keeps a pending exception. */
int pytrace_state_wanted(PyCodeObject *co);
/* A new generation: every cached class is stale. */
void pytrace_state_invalidate(void);

int pytrace_state_enabled(void);
void pytrace_state_set_enabled(int on);
int pytrace_state_exc_events(void);
void pytrace_state_set_exc_events(int on);

/* Thread ts's mode, its own ORed with the global one. */
int pytrace_state_mode(PyThreadState *ts);
/* As cpython.trace.set_mode. */
int pytrace_state_set_mode(PyThreadState *ts, int mode);
/* Tracing off: no modes, no exception events, a new generation. */
void pytrace_state_reset(void);

#endif
