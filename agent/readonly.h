/*
 * readonly: read-only mode (setting server.readonly, PROBING_READONLY=1):
 * every session may look, none may run code in the target or change
 * what it does.
 *
 * Refused while it is on, with error id DAP_ERROR_READONLY:
 *   - evaluate, in every context (the console, hovers, watches: any
 *     expression may call code), completions (it reads attributes, and
 *     properties run), setVariable;
 *   - the debugger: attach, configurationDone, setBreakpoints,
 *     setFunctionBreakpoints, setExceptionBreakpoints, pause, next,
 *     stepIn, stepOut, and probing/debug pause;
 *   - probing/config that sets server.readonly off (it can be switched
 *     on at run time, never off), or torch.watch (directly, or as the
 *     exprs= option of torch.profiling): watched variables make the
 *     training loop compute reprs of its locals at every traced step.
 * Resuming stays allowed (continue, probing/debug resume, disconnect):
 * it only lets the program run, and read-only mode switched on while a
 * debugger holds the target must not leave it stopped.  Everything else
 * keeps working: threads, stackTrace, scopes, variables, exceptionInfo,
 * probing/backtrace, /query, /profile, /flamegraph, /memory, /config
 * (other settings), probing/debug status, cancel.
 *
 * Threads: any (reads the setting through config).
 */
#ifndef READONLY_H
#define READONLY_H

#include <stddef.h>

#include <cJSON.h>

/* 1 while read-only mode is on. */
int readonly_on(void);

/*
 * Returns 0 when request command with arguments args (may be NULL) is
 * allowed now, or -EPERM with a sentence for the client in err.
 */
int readonly_check(const char *command, const cJSON *args, char *err,
		   size_t errlen);

#endif
