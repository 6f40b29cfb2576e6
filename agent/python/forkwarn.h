/*
 * forkwarn: the program's os.fork() warns as it would without the agent.
 *
 * From 3.12 os.fork() (and os.forkpty()) warns in the parent, "This
 * process (pid=N) is multi-threaded, use of fork() may lead to deadlocks
 * in the child." (DeprecationWarning), when the kernel counts more than
 * one thread in the process (/proc/self/stat) — the agent's threads
 * included, so a single-threaded program with the agent got the warning
 * on every fork, which it does not print without us.  The agent's threads
 * are not the program's: they take none of the program's locks, and in a
 * child the agent starts over (agent.c's at-fork-child).  So, around each
 * fork (os.register_at_fork), while the program's own threads are one,
 * a filter that ignores exactly that warning for this pid is put first in
 * the warnings filters, and taken out again after the fork: in the child
 * at once, in the parent at once up to 3.12 and, from 3.13 (which warns
 * after running the after-fork hooks), by the next fork's before hook.
 * With more threads of its own the warning is the program's, and it
 * shows.
 *
 * Before 3.12 there is no such warning and nothing is registered.
 * Threads: forkwarn_register() with the GIL, once per process (the hooks
 * are inherited by a child); the hooks run in the forking thread.
 */
#ifndef FORKWARN_H
#define FORKWARN_H

/* Registers the hooks (once; later calls do nothing).  Errors are
 * cleared: without the hooks the program only sees the warning. */
void forkwarn_register(void);

#endif
