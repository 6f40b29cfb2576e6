/*
 * proc: what /proc says of another process, for the CLI's explanations
 * (target.c) and its view of torchrun jobs (job.c).
 */
#ifndef CLI_PROC_H
#define CLI_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* The environment process pid started with (/proc/PID/environ: its
 * NUL-separated variables), as much as fits in buf (size bytes, one kept
 * for the NUL that ends it).  Its length; -1 when unreadable (another
 * user's process, or gone), buf then empty.  size > 0. */
ssize_t cli_proc_environ(pid_t pid, char *buf, size_t size);

/* The value of the variable name ("RANK=", with its '=') in env (n bytes
 * from cli_proc_environ), or NULL. */
const char *cli_env_value(const char *env, size_t n, const char *name);

/* pid's parent, or 0 when unknown. */
pid_t cli_proc_parent(pid_t pid);

/* Processes looked at for descendants, at most. */
#define CLI_PROC_SCAN_MAX (1 << 20)

/* root's children, their children and so on (breadth first: a parent
 * before its children), at most max, into out; their number, or -1 when
 * /proc cannot be read.  Another user's processes are in too: their
 * parents are readable. */
int cli_proc_descendants(pid_t root, pid_t *out, int max);

/* pid's command name (/proc/PID/comm, as `ps` shows it), "?" when gone;
 * no ';' (a folded stack's separator) nor control character in it. */
void cli_proc_comm(pid_t pid, char *out, size_t len);

#endif
