/*
 * pyhook: which Python frames are traced — a PEP 523 frame-evaluation hook
 * and per-thread tracing switches, for CPython 3.11.
 *
 * The second file of the version-specific layer (pyframes.c reads without
 * the GIL; this one changes interpreter state with it).  The debugger
 * (debugger.h) decides *what* must be traced; pyhook makes exactly that
 * traced and leaves everything else on CPython's fast path:
 *
 *  - 3.11 turns line tracing on per C-level evaluation (_PyCFrame
 *    use_tracing, copied from the caller's on entry) and sends line events
 *    to the thread's C trace function (PyThreadState.c_tracefunc).
 *    Tracing makes every instruction of the frame take the slow,
 *    unspecialised path, so it is switched on only where it is needed.
 *  - The hook (installed while pyhook_enable()d) sees every new frame.
 *    A code object is classified once per generation (the classify
 *    callback, e.g. "has a breakpoint"; the answer cached in co_extra); a
 *    frame of an unwanted code object whose caller is not traced goes
 *    straight to the default evaluator.  The cost of the hook itself is
 *    CPython's: with a hook installed, 3.11 does not inline
 *    Python-to-Python calls.
 *  - Frames that were running before (pyhook_retrace*) get tracing set on
 *    their _PyCFrame directly, so a breakpoint in a loop that is already
 *    running takes effect at its next line.
 *  - Modes ask for more: PYHOOK_NEW traces every new frame (step in,
 *    pause), PYHOOK_CALLERS every frame control returns into (step over
 *    and out, pause) — per thread, or for all threads at once.
 *
 * Threads that trace or profile with their own functions (a profiler,
 * coverage, another debugger) are left alone: pyhook changes nothing on a
 * thread whose c_tracefunc is someone else's, and does not switch tracing
 * off on one that has a profile function.
 *
 * Threads and locks: every function takes the GIL for granted (the hook
 * and the trace function run with it); the state is guarded by it.
 * Nothing here allocates, blocks or runs Python code, except the
 * classify callback.
 */
#ifndef PYHOOK_H
#define PYHOOK_H

#include <stdint.h>

struct _object; /* PyObject */
struct _ts;	/* PyThreadState */
struct _frame;	/* PyFrameObject */

#define PYHOOK_NEW 0x1	    /* trace every frame the thread starts */
#define PYHOOK_CALLERS 0x2  /* trace every frame control returns into */
#define PYHOOK_MODES_MAX 64 /* threads with a mode of their own */

/* The debugger's side.  classify(code) returns 1 when frames of code
 * must be traced (GIL held; may run Python, must not raise).  trace is
 * the C trace function set on threads that trace. */
typedef int (*pyhook_classify_fn)(struct _object *code);
typedef int (*pyhook_trace_fn)(struct _object *obj, struct _frame *frame,
			       int what, struct _object *arg);

/* Records the debugger's callbacks (before anything else).  Idempotent. */
void pyhook_init(pyhook_classify_fn classify, pyhook_trace_fn trace);

/*
 * Installs the frame-evaluation hook in the main interpreter (chaining
 * to one installed before, e.g. torch.compile's) and starts a new
 * classification generation.  Returns 0, or -ENOSPC when no co_extra
 * slot could be had.  Idempotent.
 */
int pyhook_enable(void);

/* Is the hook installed (enabled)? */
int pyhook_enabled(void);

/*
 * Removes the hook (when it is still the interpreter's) and turns off
 * every trace switch it set: on every thread whose trace function is ours
 * the trace function is removed and tracing switched off.  Hook calls
 * still on some thread's C stack find the hook disabled and only undo
 * their own changes.
 */
void pyhook_disable(void);

/* The classification of every code object is stale: classify() will be
 * asked again (after breakpoints changed). */
void pyhook_invalidate(void);

/* Keep the trace function on every managed thread even where no frame is
 * traced, so that raised exceptions reach it (PyTrace_EXCEPTION is sent to
 * c_tracefunc whether or not the frame is traced). */
void pyhook_set_exception_events(int on);

/* Sets the mode (PYHOOK_* bits, 0 to clear) of one thread, or of every
 * thread (ts NULL).  Returns 0 or -ENOSPC (PYHOOK_MODES_MAX). */
int pyhook_set_mode(struct _ts *ts, int mode);

/* The mode of thread ts: its own ORed with the global one. */
int pyhook_mode(struct _ts *ts);

/*
 * Recomputes the tracing switches of every running frame of thread ts
 * (one _PyCFrame at a time: traced when the thread's mode asks, or when a
 * frame evaluated there is of a wanted code object) and sets or removes
 * the trace function accordingly.  When the hook is disabled it switches
 * everything of ours off.  pyhook_retrace_all() does it for every thread
 * but the agent's own (skip(native_id) returns 1 for those; may be NULL).
 */
void pyhook_retrace(struct _ts *ts);
void pyhook_retrace_all(int (*skip)(long native_id));

/* Is code wanted (classify's cached answer this generation)? */
int pyhook_code_wanted(struct _object *code);

/* The number of complete frames from f to the bottom of its thread's
 * stack (f counted): 1 for a thread's outermost frame. */
int pyhook_frame_depth(struct _frame *f);

/* Has frame f just started (not resumed: a generator's frame that
 * continues after a yield is not starting)? */
int pyhook_frame_starting(struct _frame *f);

/* In a forked child: the hook is considered disabled (the parent's
 * debugger session does not exist here); it removes itself when called. */
void pyhook_atfork_child(void);

#endif
