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
 * child the agent starts over (agent.c's at-fork-child).
 *
 * So one filter is put first in the warnings filters, once: "ignore" for
 * DeprecationWarning, whose message matcher (an object with a match()
 * method, as the warnings machinery asks of a filter's message) matches
 * only that warning for this process, and only while the program's own
 * threads — the kernel's count less agent_threads_live() — are one.  With
 * more threads of its own the warning is the program's, and it shows.
 * The filter is put in without a word to the warnings machinery (told of
 * a change, it would forget which "once" and "default" warnings each
 * module showed, and show them again); it reads the filters afresh for a
 * message it has not shown, as the fork warning (which names the pid)
 * is.  A fork's before hook puts the filter back first only when the
 * program removed it (warnings.resetwarnings()).  A program's own filter
 * put before it takes precedence, as the program asked.
 *
 * Threads: forkwarn_register() with the GIL, once per process (a child
 * inherits the filter and the hook).
 */
#ifndef FORKWARN_H
#define FORKWARN_H

/* Puts the filter in place and registers the hook (once; later calls do
 * nothing; before 3.12 nothing at all).  Errors are cleared: without the
 * filter the program only sees the warning. */
void forkwarn_register(void);

#endif
