/*
 * tracee: one thread of another process under ptrace, and that process's
 * memory — the few ptrace operations an injection needs, each bounded in
 * time.
 *
 * Contracts that keep the target safe:
 *   - Attaching is PTRACE_SEIZE with PTRACE_O_TRACESYSGOOD and never
 *     PTRACE_O_EXITKILL: when the injector dies, the kernel detaches the
 *     thread and it goes on (tracesysgood makes a syscall stop's code
 *     SIGTRAP|0x80, which the kernel cannot turn into a signal when the
 *     tracer vanishes).
 *   - Every wait has the tracee's deadline (CLOCK_MONOTONIC); no call
 *     blocks past it.  A thread that does not stop in time is reported
 *     with -ETIMEDOUT.
 *   - A signal that arrives while we wait for a stop is passed on at once
 *     (PTRACE_CONT with it), never swallowed or delayed.
 *
 * Threads: a tracee belongs to the thread that seized it (ptrace's rule).
 */
#ifndef INJECT_TRACEE_H
#define INJECT_TRACEE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum inject_stop {
	INJECT_STOP_RUNNING = 0,   /* not stopped, or not attached */
	INJECT_STOP_EVENT,	   /* PTRACE_INTERRUPT's stop */
	INJECT_STOP_GROUP,	   /* job control stop (SIGSTOP and friends) */
	INJECT_STOP_SIGNAL,	   /* signal-delivery-stop; see sig */
	INJECT_STOP_SYSCALL_ENTRY, /* after PTRACE_SYSCALL */
	INJECT_STOP_SYSCALL_EXIT,
	INJECT_STOP_OTHER, /* another ptrace event */
	INJECT_STOP_GONE,  /* the thread (or process) exited */
};

struct inject_tracee {
	pid_t pid;	       /* the process */
	pid_t tid;	       /* the thread seized; 0 when none */
	int memfd;	       /* /proc/PID/mem, read-write; -1 when closed */
	int64_t deadline;      /* CLOCK_MONOTONIC ns */
	enum inject_stop stop; /* where tid is */
	int sig;	       /* the signal of a SIGNAL or GROUP stop */
	int next_exit;	       /* the next syscall stop is an exit stop */
};

/* Nanoseconds on CLOCK_MONOTONIC. */
int64_t inject_now_ns(void);

/*
 * Opens pid's memory for reading and writing; t->deadline = deadline.
 * Returns 0, -ESRCH (gone) or -EACCES/-EPERM (not allowed) with a message.
 */
int inject_tracee_open(struct inject_tracee *t, pid_t pid, int64_t deadline,
		       char *err, size_t errlen);

/*
 * Lets go of the thread if still attached: detaches it where it is
 * stopped (passing on the signal of a signal-delivery-stop); a thread
 * seized but running is interrupted first, waiting at most 200 ms for it.
 */
void inject_tracee_release(struct inject_tracee *t);

/*
 * For a thread that was seized but did not stop (in time) and is no
 * longer in a tracee: if it has stopped by now, detaches it (passing on a
 * signal it stopped for).  Never blocks.  Returns 1 when the thread is
 * let go (or gone), 0 when it still has not stopped.
 */
int inject_tracee_reap(pid_t tid);

/* inject_tracee_release, then closes the memory file.  Safe on a tracee
 * never opened (zeroed, with memfd -1). */
void inject_tracee_close(struct inject_tracee *t);

/*
 * Seizes thread tid and waits for its interrupt stop (PTRACE_INTERRUPT).
 * Signals met on the way are passed on.  Returns 0 with t->stop EVENT;
 * -EAGAIN when the process is stopped by job control (left so, detached);
 * -EPERM/-ESRCH/-ETIMEDOUT with a message.  On failure t->tid is 0 unless
 * the thread was seized but never stopped (-ETIMEDOUT): then it stays
 * seized until it stops (the next inject_tracee_close detaches it when it
 * can) or the injector exits.
 */
int inject_tracee_seize(struct inject_tracee *t, pid_t tid, char *err,
			size_t errlen);

/* Stops the seized, running thread again (PTRACE_INTERRUPT + wait), as
 * inject_tracee_seize does after seizing. */
int inject_tracee_interrupt(struct inject_tracee *t, char *err, size_t errlen);

/* Lets the stopped thread run (PTRACE_CONT), delivering sig (0: none). */
int inject_tracee_cont(struct inject_tracee *t, int sig, char *err,
		       size_t errlen);

/*
 * Runs the stopped thread to its next system call stop (PTRACE_SYSCALL)
 * and waits.  Returns 0 with t->stop SYSCALL_ENTRY or SYSCALL_EXIT; when a
 * signal-delivery-stop comes first, 0 with t->stop SIGNAL (the caller
 * decides); -ESRCH, -ETIMEDOUT with a message.
 */
int inject_tracee_syscall(struct inject_tracee *t, char *err, size_t errlen);

/*
 * Releases the stopped thread (PTRACE_DETACH with signal sig, 0 for
 * none).  Returns 0 or -errno.  t->tid is 0 afterwards in any case.
 */
int inject_tracee_detach(struct inject_tracee *t, int sig);

/* Reads / writes len bytes at addr in the process.  Writes go through
 * /proc/PID/mem and, when that is refused (read-only mapping without
 * FOLL_FORCE), through PTRACE_POKEDATA on the stopped thread.  Returns 0
 * or -errno with a message. */
int inject_tracee_read(struct inject_tracee *t, uint64_t addr, void *buf,
		       size_t len, char *err, size_t errlen);
int inject_tracee_write(struct inject_tracee *t, uint64_t addr, const void *buf,
			size_t len, char *err, size_t errlen);

/* PTRACE_GETREGSET / SETREGSET of the stopped thread.  get: len is the
 * buffer's size; returns the bytes read (>= 0) or -errno. */
ssize_t inject_tracee_getregset(struct inject_tracee *t, int type, void *buf,
				size_t len, char *err, size_t errlen);
int inject_tracee_setregset(struct inject_tracee *t, int type, const void *buf,
			    size_t len, char *err, size_t errlen);

#endif
