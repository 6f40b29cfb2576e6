/*
 * pytrace: cpython.trace, the debugger's trace backend (contracts in
 * cpython.h), for the version built for: pyhook.c up to 3.11 (the
 * frame-evaluation hook and the C trace function; below), pymonitor.c
 * from 3.12 (sys.monitoring, PEP 669; see there).  Private to
 * agent/cpython.
 *
 * How pyhook makes 3.9 to 3.11 trace exactly what the debugger wants:
 *
 *  - 3.10 and 3.11 turn line tracing on per C-level evaluation (the C
 *    frame's use_tracing, copied from the caller's on entry) and send line
 *    events to the thread's C trace function (PyThreadState.c_tracefunc);
 *    3.9 sends them wherever the thread has one, for frames whose
 *    f_trace_lines is set.  Tracing makes every instruction of the frame
 *    take the slow path, so it is switched on only where it is needed.
 *  - A PEP 523 frame-evaluation hook (installed while enabled) sees every
 *    new frame.  A code object is classified once per generation (the
 *    answer cached in co_extra); a frame of an unwanted code object whose
 *    caller is not traced goes straight to the default evaluator.  The
 *    cost of the hook itself is CPython's: with a hook installed, 3.11
 *    does not inline Python-to-Python calls.  The hook chains to one
 *    installed before (torch.compile's).
 *  - Frames that were running before (retrace) get tracing set on their
 *    C frame (3.9: frame) directly, so a breakpoint in a loop that is
 *    already running takes effect at its next line.
 *  - CPYTHON_TRACE_NEW traces every new frame (step in, pause),
 *    CPYTHON_TRACE_CALLERS every frame control returns into (step over and
 *    out, pause) — per thread (at most PYTRACE_MODES_MAX), or for all.
 *
 * Threads that trace or profile with their own functions (a profiler,
 * coverage, another debugger) are left alone: pyhook changes nothing on a
 * thread whose c_tracefunc is someone else's, and does not switch tracing
 * off on one that has a profile function.
 *
 * pymonitor instead asks sys.monitoring for PY_START everywhere and LINE
 * events only in code with breakpoints, answering DISABLE for the rest
 * (pymonitor.c says how, and how it shares sys.monitoring).
 *
 * Every function takes the GIL for granted (the hook, the trace function
 * and monitoring callbacks run with it); the state is guarded by it
 * (pytrace_state.h).  pyhook allocates, blocks and runs Python code
 * nowhere but in the classify callback; pymonitor calls sys.monitoring's
 * functions.
 */
#ifndef PYTRACE_H
#define PYTRACE_H

#include "cpython.h"

#define PYTRACE_MODES_MAX 64 /* threads with a mode of their own */

void pytrace_init(cpython_classify_fn classify, cpython_trace_fn trace,
		  cpython_line_fn line);
int pytrace_enable(char *err, size_t errlen);
int pytrace_enabled(void);
void pytrace_disable(void);
void pytrace_invalidate(void);
void pytrace_set_exception_events(int on);
int pytrace_set_mode(struct _ts *ts, int mode);
int pytrace_mode(struct _ts *ts);
void pytrace_retrace(struct _ts *ts);
void pytrace_retrace_all(int (*skip)(long native_id));
int pytrace_code_wanted(struct _object *code);
void pytrace_forget(struct _ts *ts);
void pytrace_atfork_child(void);

#endif
