/*
 * config: the agent's settings, a fixed table of named values.
 *
 * Names are dotted ("query.max_rows").  Every setting has a default, a
 * one-line doc and a parser that validates a new value.  Sources, later
 * ones winning: defaults; the environment the agent was loaded into
 * (env.h: PROBING_<NAME> with dots and
 * letters upper-cased to '_', e.g. PROBING_QUERY_MAX_ROWS, plus the
 * shorthands PROBING_PORT, PROBING_LISTEN and PROBING_READONLY, and the
 * original Probing's names: config_compat.h);
 * probing.init(...) and `probing config k=v` at run time.  A latch
 * (server.readonly) goes on and never off again.
 *
 * Threads: all functions are safe from any thread (one mutex); readers get
 * copies.  Not async-signal-safe.
 */
#ifndef CONFIG_H
#define CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CONFIG_VALUE_MAX 256

/* Loads the environment over the defaults.  Bad values in the environment
 * are reported through err (first one) but do not stop the others. */
int config_load_env(char *err, size_t errlen);

/* Sets name to value (text).  Returns 0, -ENOENT (unknown name), -EINVAL
 * (bad value, reason in err) or -EPERM (read-only, or a latch that is on
 * set off).
 *
 * Switches (torch.profiling) take "on", "off" or "on,key=value,...": each
 * option sets the setting it names as well (exprs=... sets torch.watch,
 * step_rate=N torch.step_rate, ...), all or nothing; the switch itself
 * reads "on" or "off" afterwards.  The environment form works the same:
 * PROBING_TORCH_PROFILING="on,exprs=loss@train;acc1@train". */
int config_set(const char *name, const char *value, char *err, size_t errlen);

/* Validates without setting (for all-or-nothing updates). */
int config_check(const char *name, const char *value, char *err,
		 size_t errlen);

/*
 * What changing a setting lets a client do to the target; read-only mode
 * refuses to change a setting with any of them (readonly.h):
 *
 * CONFIG_RUNS_CODE: the target runs code of the client's choosing
 *   (torch.watch: reprs of locals at every traced step).
 * CONFIG_WRITES: the agent writes or deletes files as the target's user
 *   where the client says, or fills the target's disk (data.dir,
 *   data.min_free_*, retention.*, crash.*, hang.timeout: reports).
 * CONFIG_SIGNALS: the agent sends signals to the program's threads that
 *   it would not send otherwise (profile.native_idle: idle threads'
 *   system calls interrupted; hang.native: one SIGURG per thread).
 */
#define CONFIG_RUNS_CODE 1u
#define CONFIG_WRITES 2u
#define CONFIG_SIGNALS 4u

/* The CONFIG_* flags of what setting name to value changes: the
 * setting's own, and those of the settings a switch's options set
 * (torch.profiling's exprs=).  0 for an unknown name. */
unsigned config_effects(const char *name, const char *value);

/* config_effects(name, value) & CONFIG_RUNS_CODE, as 0 or 1. */
int config_runs_code(const char *name, const char *value);

/* Copies the current text of name into out.  Returns 0 or -ENOENT. */
int config_get(const char *name, char *out, size_t outlen);

/* Typed readers for the agent's own use; return the default when unset. */
int64_t config_int(const char *name);
int config_bool(const char *name);

/* The environment variable of setting name: "query.max_rows" ->
 * "PROBING_QUERY_MAX_ROWS". */
void config_env_name(const char *name, char *out, size_t outlen);

/* Iterates: for i from 0 while config_entry(i, ...) == 0. */
int config_entry(size_t i, const char **name, char *value, size_t valuelen,
		 const char **doc);

/* Sets a read-only informational value (e.g. "agent.address"). */
void config_set_info(const char *name, const char *value);

/*
 * Calls fn(name) after any setting whose name starts with prefix was set
 * (by config_set, the environment, probing.init or probing/config), on
 * the thread that set it, with no lock held: fn must be quick and must
 * not wait for the GIL (the setter may hold it, or be the server loop).
 * At most 8 listeners.  Returns 0 or -ENOSPC.
 */
typedef void (*config_change_fn)(const char *name);
int config_on_change(const char *prefix, config_change_fn fn);

/* In a forked child: makes the lock usable again (it may have been held
 * by a thread that does not exist in the child). */
void config_atfork_child(void);

#endif
