/*
 * inject: load a shared library into a running CPython process (a version
 * this install has an agent for: cpython/runtime_offsets.h) with ptrace — the
 * way `probing -t PID inject` puts the agent in.
 *
 * The sequence (docs/injection.md tells it for users):
 *   1. Checks, touching nothing: the process exists and runs (not stopped
 *      by job control, not traced), is a CPython with Python
 *      initialised (_PyRuntime.initialized read through /proc/PID/mem),
 *      maps a libc with dlopen, dlerror and __errno_location, and has a
 *      code cave and a data cave (layout.h); the library is readable and
 *      visible in the process's mount namespace (proc.h).
 *   2. PTRACE_SEIZE + PTRACE_INTERRUPT of one thread — the main thread
 *      unless it keeps stopping in an unsafe place (inside libc or the
 *      loader, where it may hold the malloc or loader lock; see
 *      safe_point() in inject.c), then the others.  A thread gets
 *      INJECT_TRIES_* stops and 1 s to make them (the last candidate gets
 *      the whole deadline); one that did not stop in time is detached as
 *      soon as it does, before inject_library returns (waiting up to 2 s
 *      for it), so that no thread is left stopped.
 *   3. R', the registers that continue the thread as the kernel would
 *      have (the interrupted system call restarted: no EINTR, no errno
 *      512-516), computed by the architecture (arch.h).
 *   4. The shellcode (with R' as literals) goes into the code cave, a
 *      zeroed result area into the data cave, through /proc/PID/mem.
 *   5. One register write sends the thread into the shellcode; detach.
 *      The thread calls dlopen, restores everything and goes on by
 *      itself.  We poll the result area for done, with a deadline.
 * A process that has an agent library mapped already (a forked child of
 * a process with the agent: the mapping is inherited, the agent's threads
 * are not) gets the same sequence with the library's restart function
 * called in dlopen's place (layout.h): the agent is never loaded twice.
 *
 * The target is never in a state it cannot leave alone: before step 5 its
 * registers are untouched (a dead injector's thread is detached by the
 * kernel and goes on, its syscall restarted as usual); after step 5 the
 * shellcode needs no injector.  On aarch64, step 5 is two ptrace calls at
 * a syscall-entry stop; see inject_aarch64.c for why the gap is safe.
 *
 * What stays in the target: the library; the shellcode and the result
 * area in the caves (a few hundred bytes in pages the program does not
 * use); one copied-on-write code page.  Nothing is unmapped.
 *
 * Threads: call from one thread; blocks up to opts->timeout_ms.
 */
#ifndef INJECT_H
#define INJECT_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#define INJECT_TIMEOUT_DEFAULT 10000 /* ms */
#define INJECT_TRIES_MAIN 50	     /* interrupts of the main thread */
#define INJECT_TRIES_OTHER 10	     /* of each other thread */
#define INJECT_TRY_GAP_US 1000	     /* it runs this long between tries */

struct inject_opts {
	int timeout_ms; /* the whole injection; 0: INJECT_TIMEOUT_DEFAULT */
	/* Test hook: sleep this long at each step boundary (never inside
	 * the one register write of step 5). */
	int step_delay_us;
	/* Called at each step boundary with its name, before the delay:
	 * "check" (nothing done yet), "attach" (a thread is stopped),
	 * "write" (the caves are written), "enter" (the thread's registers
	 * point at the shellcode), "detach" (released; next: wait for
	 * done).  May be NULL. */
	void (*step)(void *arg, const char *name);
	void *step_arg;
};

struct inject_result {
	pid_t tid;	     /* the thread that ran dlopen */
	char where[160];     /* where it was stopped, in words */
	int attempts;	     /* interrupts before a safe stop */
	uint64_t handle;     /* what dlopen returned */
	uint64_t code, data; /* the caves used */
	char code_file[48], data_file[48];
	char target_path[PATH_MAX]; /* what dlopen was given */
	int restarted; /* an agent mapped already was started again, in
			* dlopen's place (layout.h); target_path is it */
	char note[512];		    /* mount namespace note, or "" */
	double stopped_ms;	    /* the thread was stopped this long */
	double dlopen_ms;	    /* release to done */
	double total_ms;
};

/*
 * Loads the shared library at path (ours; made absolute here) into
 * process pid and runs its constructors there, on one of its threads.
 * Fills *res (also partly on failure).  Returns 0, or with a sentence in
 * err:
 *   -ESRCH      no such process, or it exited meanwhile
 *   -EPERM      ptrace refused: err says why (uid, CAP_SYS_PTRACE, yama
 *               ptrace_scope, another tracer) and what to do
 *   -ENOEXEC    not CPython, or a version without an agent (err lists
 *               those this install has), another architecture, no dlopen
 *   -EAGAIN     Python not initialised yet or finalising; the process is
 *               stopped (job control)
 *   -ENOENT     the library is not there or not visible in the target
 *   -EALREADY   the library is loaded in the process already, without
 *               the restart function (an agent mapped already that has
 *               it is started again instead: res->restarted)
 *   -ELIBBAD    dlopen failed in the target: err has dlerror()'s text
 *   -EBUSY      no thread stopped at a safe point in time
 *   -ETIMEDOUT  a thread did not stop, or dlopen did not finish, in time
 *               (the target is unaffected; err says what stays)
 *   -ENOSPC     no cave for the shellcode
 *   other -errno (I/O on /proc, ptrace)
 */
int inject_library(pid_t pid, const char *path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen);

/*
 * The CPython version of process pid (major << 8 | minor: 0x030c for
 * 3.12) into *version, found as inject_library's checks find it, touching
 * nothing: so that the caller can choose the library built for it.  0, or
 * those checks' errors with a message: -ESRCH, -EPERM, -ENOEXEC (not
 * CPython, or a version this install has no agent for), -EAGAIN.
 */
int inject_python_version(pid_t pid, unsigned *version, char *err,
			  size_t errlen);

#endif
