/*
 * readonly: read-only mode (setting server.readonly, PROBING_READONLY=1):
 * every session may look, none may run code in the target or change
 * what it does.
 *
 * What is refused is what the request's handler declares (handler.h):
 * HANDLER_RUNS_CODE (evaluate in every context — the console, hovers,
 * watches: any expression may call code —, completions, which read
 * attributes, and setVariable) and HANDLER_STOPS (attach,
 * configurationDone, the three kinds of breakpoints, pause, next,
 * stepIn, stepOut, probing/debug pause).  Among the settings
 * (probing/config), server.readonly is a latch (config.h), and a setting
 * whose change would do to the target what a looker may not is refused
 * by req_config through readonly_refuses_setting(): those flagged
 * CONFIG_RUNS_CODE (torch.watch, directly or through torch.profiling's
 * exprs= option: watched variables make the training loop compute reprs
 * of its locals at every traced step), CONFIG_WRITES (data.dir, crash.*,
 * hang.timeout, retention.*, data.min_free_*: files written or deleted
 * as the target's user, its disk filled) and CONFIG_SIGNALS
 * (profile.native_idle, hang.native: signals to the program's threads).
 * Settings given in the environment at start-up stay as the owner set
 * them.  Resuming stays allowed
 * (continue, probing/debug resume, disconnect): it only lets the program
 * run, and read-only mode switched on while a debugger holds the target
 * must not leave it stopped.
 *
 * Threads: any (reads the setting through config).
 */
#ifndef READONLY_H
#define READONLY_H

#include <stddef.h>

/* 1 while read-only mode is on. */
int readonly_on(void);

/*
 * Returns 0 when a request of command whose handler flags are flags
 * (handler_flags_of) is allowed now, or -EPERM with a sentence for the
 * client in err.
 */
int readonly_refuses(const char *command, unsigned flags, char *err,
		     size_t errlen);

/*
 * Returns 0 when setting name may be set to value now, or -EPERM with a
 * sentence for the client in err: read-only mode is on and the change
 * has one of the CONFIG_* effects above (config_effects).
 */
int readonly_refuses_setting(const char *name, const char *value, char *err,
			     size_t errlen);

#endif
