/*
 * env: the environment the agent was loaded into, copied once.
 *
 * The program's threads may setenv() and unsetenv() while the agent's
 * threads read the environment (Python's os.environ does; the probing
 * package's autostart takes PROBING out while the agent starts): glibc
 * shifts the entries of environ in place, or moves them to a new array,
 * so a concurrent getenv() can miss a variable or read freed memory.  So
 * the agent reads its variables (PROBING_*, RANK, MASTER_ADDR, ...) from
 * a copy made when the library is loaded, before its threads exist.
 *
 * env_snapshot() copies with neither locks nor allocation (it runs where
 * the constructor runs, possibly in a thread stopped anywhere by ptrace):
 * into static storage, up to ENV_SNAPSHOT_BYTES of strings and
 * ENV_SNAPSHOT_MAX entries; an environment larger than that is marked
 * incomplete and env_get() then falls back to getenv() for a name it
 * did not copy.
 */
#ifndef ENV_H
#define ENV_H

#define ENV_SNAPSHOT_BYTES (256u << 10)
#define ENV_SNAPSHOT_MAX 4096

/* Copies environ, once (later calls do nothing).  Async-signal-safe. */
void env_snapshot(void);

/* The value of name in the copy (getenv() before any snapshot, or for a
 * name beyond an incomplete one), or NULL. */
const char *env_get(const char *name);

/* Entry i of the copy ("NAME=value"), or NULL past the last. */
const char *env_entry(unsigned i);

#endif
