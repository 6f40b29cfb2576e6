/*
 * pyhook: cpython.trace and cpython.frame's depth/starting for CPython
 * 3.11 (contracts in cpython.h).  Private to agent/cpython.
 *
 * How 3.11 is made to trace exactly what the debugger wants:
 *
 *  - 3.11 turns line tracing on per C-level evaluation (_PyCFrame
 *    use_tracing, copied from the caller's on entry) and sends line events
 *    to the thread's C trace function (PyThreadState.c_tracefunc).
 *    Tracing makes every instruction of the frame take the slow,
 *    unspecialised path, so it is switched on only where it is needed.
 *  - A PEP 523 frame-evaluation hook (installed while enabled) sees every
 *    new frame.  A code object is classified once per generation (the
 *    answer cached in co_extra); a frame of an unwanted code object whose
 *    caller is not traced goes straight to the default evaluator.  The
 *    cost of the hook itself is CPython's: with a hook installed, 3.11
 *    does not inline Python-to-Python calls.  The hook chains to one
 *    installed before (torch.compile's).
 *  - Frames that were running before (retrace) get tracing set on their
 *    _PyCFrame directly, so a breakpoint in a loop that is already running
 *    takes effect at its next line.
 *  - CPYTHON_TRACE_NEW traces every new frame (step in, pause),
 *    CPYTHON_TRACE_CALLERS every frame control returns into (step over and
 *    out, pause) — per thread (at most PYHOOK_MODES_MAX), or for all.
 *
 * Threads that trace or profile with their own functions (a profiler,
 * coverage, another debugger) are left alone: pyhook changes nothing on a
 * thread whose c_tracefunc is someone else's, and does not switch tracing
 * off on one that has a profile function.
 *
 * Every function takes the GIL for granted (the hook and the trace
 * function run with it); the state is guarded by it.  Nothing here
 * allocates, blocks or runs Python code, except the classify callback.
 */
#ifndef PYHOOK_H
#define PYHOOK_H

#include "cpython.h"

#define PYHOOK_MODES_MAX 64 /* threads with a mode of their own */

void pyhook_init(cpython_classify_fn classify, cpython_trace_fn trace);
int pyhook_enable(void);
int pyhook_enabled(void);
void pyhook_disable(void);
void pyhook_invalidate(void);
void pyhook_set_exception_events(int on);
int pyhook_set_mode(struct _ts *ts, int mode);
int pyhook_mode(struct _ts *ts);
void pyhook_retrace(struct _ts *ts);
void pyhook_retrace_all(int (*skip)(long native_id));
int pyhook_code_wanted(struct _object *code);
int pyhook_frame_depth(struct _frame *f);
int pyhook_frame_starting(struct _frame *f);
void pyhook_atfork_child(void);

#endif
