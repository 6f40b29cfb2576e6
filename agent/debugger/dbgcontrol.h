/*
 * dbgcontrol: the debugger's requests that need the GIL — breakpoint
 * configuration, exception filters, pause.
 *
 * The request functions run on a worker thread and take the GIL through
 * pygil (bounded by python.gil_timeout_ms; our code only, never
 * interrupted).  When the GIL does not come, nothing changed and the
 * error names the thread holding it.  Each first finishes a detach's
 * cleanup if one is pending (dbgcleanup.h).
 */
#ifndef DBGCONTROL_H
#define DBGCONTROL_H

#include <stddef.h>

#include "breakpoints.h"

/*
 * Breakpoint configuration; worker thread.  Same contracts as
 * breakpoints_set_file / _set_functions, plus -ETIMEDOUT when the GIL did
 * not come and -ENOTCONN when no debugger is attached.  Afterwards frames
 * of the files concerned that are running already are traced, so a
 * breakpoint in a running loop takes effect at its next line.
 */
int dbgcontrol_set_breakpoints(const char *path, const struct bp_spec *specs,
			       size_t n, struct bp_result *out, char *err,
			       size_t errlen);
int dbgcontrol_set_function_breakpoints(const struct bp_spec *specs, size_t n,
					struct bp_result *out, char *err,
					size_t errlen);

/* Exception breakpoints: stop where an exception is raised (raised), or
 * when one is about to end a thread or the program (uncaught).  Worker
 * thread. */
int dbgcontrol_set_exception_filters(int raised, int uncaught, char *err,
				     size_t errlen);

/*
 * Asks every thread to stop at its next Python line; the `stopped` event
 * follows when the first one does.  Worker thread.  Returns 0 (also when
 * a stop is in progress already), -ENOTCONN (no debugger attached), or
 * another error of pygil.  When a thread holds the GIL in C past
 * python.gil_timeout_ms the pause stays asked for and is armed as soon as
 * the GIL comes (a pending call in the main thread, or a worker job that
 * dbgcontrol_tick() submits): 0 then too.
 */
int dbgcontrol_pause(char *err, size_t errlen);

/* Loop thread, from the debugger's periodic tick: a pause waiting to be
 * armed gets a worker job that tries once more to take the GIL. */
void dbgcontrol_tick(void);

/* In a forked child: no pause waits to be armed. */
void dbgcontrol_atfork_child(void);

#endif
