/*
 * tracee: ptrace plumbing with deadlines; see tracee.h.
 */
#include "tracee.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POLL_FIRST_NS 20000L	 /* first sleep between waitpid polls */
#define POLL_MAX_NS 1000000L	 /* longest sleep between polls */
#define CLOSE_GRACE_NS 200000000 /* close: wait this long for a stop */

int64_t inject_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int inject_tracee_open(struct inject_tracee *t, pid_t pid, int64_t deadline,
		       char *err, size_t errlen)
{
	char path[64];

	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->deadline = deadline;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	t->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (t->memfd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
		return e == ENOENT ? -ESRCH : -e;
	}
	return 0;
}

/* Reads a wait status into t->stop. */
static void classify(struct inject_tracee *t, int status)
{
	int sig, event;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		t->stop = INJECT_STOP_GONE;
		t->tid = 0;
		return;
	}
	sig = WSTOPSIG(status);
	event = (unsigned)status >> 16;
	t->sig = 0;
	if (event == PTRACE_EVENT_STOP) {
		t->stop =
			sig == SIGTRAP ? INJECT_STOP_EVENT : INJECT_STOP_GROUP;
		t->sig = sig;
	} else if (event) {
		t->stop = INJECT_STOP_OTHER;
	} else if (sig == (SIGTRAP | 0x80)) {
		t->stop = t->next_exit ? INJECT_STOP_SYSCALL_EXIT
				       : INJECT_STOP_SYSCALL_ENTRY;
		t->next_exit = !t->next_exit;
	} else {
		t->stop = INJECT_STOP_SIGNAL;
		t->sig = sig;
	}
}

/* Waits for the next stop of t->tid until t->deadline, or until when
 * that is not 0. */
static int wait_until(struct inject_tracee *t, int64_t until, char *err,
		      size_t errlen)
{
	long sleep_ns = POLL_FIRST_NS;

	if (!until)
		until = t->deadline;
	for (;;) {
		int status;
		pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);
		int64_t left;

		if (r == t->tid) {
			classify(t, status);
			if (t->stop == INJECT_STOP_GONE) {
				snprintf(err, errlen, "the process exited");
				return -ESRCH;
			}
			return 0;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			snprintf(err, errlen, "waitpid(%d): %s", (int)t->tid,
				 strerror(e));
			t->stop = INJECT_STOP_GONE;
			t->tid = 0;
			return e == ECHILD ? -ESRCH : -e;
		}
		left = until - inject_now_ns();
		if (left <= 0) {
			snprintf(err, errlen,
				 "thread %d did not stop in time (it may be "
				 "in uninterruptible sleep, state D)",
				 (int)t->tid);
			return -ETIMEDOUT;
		}
		struct timespec ts = {0, sleep_ns < left ? sleep_ns : left};
		nanosleep(&ts, NULL);
		if (sleep_ns < POLL_MAX_NS)
			sleep_ns *= 2;
	}
}

static int ptrace_fail(struct inject_tracee *t, const char *what, char *err,
		       size_t errlen)
{
	int e = errno;

	snprintf(err, errlen, "%s(%d): %s", what, (int)t->tid, strerror(e));
	if (e == ESRCH)
		t->stop = INJECT_STOP_GONE;
	return -e;
}

/* Waits for the interrupt stop that a PTRACE_INTERRUPT promised. */
static int wait_event_stop(struct inject_tracee *t, char *err, size_t errlen)
{
	for (;;) {
		int rc = wait_until(t, 0, err, errlen);

		if (rc)
			return rc;
		switch (t->stop) {
		case INJECT_STOP_EVENT:
			return 0;
		case INJECT_STOP_GROUP:
			/* Stopped by job control: running code in it would
			 * break the stop.  Detaching leaves it stopped. */
			inject_tracee_detach(t, 0);
			snprintf(err, errlen,
				 "the process is stopped (job control, "
				 "signal %d); continue it first (kill -CONT)",
				 t->sig);
			return -EAGAIN;
		case INJECT_STOP_SIGNAL:
			/* Pass it on now; the interrupt stop still comes. */
			if (ptrace(PTRACE_CONT, t->tid, 0, t->sig) < 0)
				return ptrace_fail(t, "PTRACE_CONT", err,
						   errlen);
			t->stop = INJECT_STOP_RUNNING;
			break;
		default:
			if (ptrace(PTRACE_CONT, t->tid, 0, 0) < 0)
				return ptrace_fail(t, "PTRACE_CONT", err,
						   errlen);
			t->stop = INJECT_STOP_RUNNING;
			break;
		}
	}
}

int inject_tracee_seize(struct inject_tracee *t, pid_t tid, char *err,
			size_t errlen)
{
	t->tid = tid;
	t->stop = INJECT_STOP_RUNNING;
	t->next_exit = 0;
	if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACESYSGOOD) < 0) {
		int rc = ptrace_fail(t, "PTRACE_SEIZE", err, errlen);
		t->tid = 0;
		return rc;
	}
	return inject_tracee_interrupt(t, err, errlen);
}

int inject_tracee_interrupt(struct inject_tracee *t, char *err, size_t errlen)
{
	if (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0)
		return ptrace_fail(t, "PTRACE_INTERRUPT", err, errlen);
	return wait_event_stop(t, err, errlen);
}

int inject_tracee_cont(struct inject_tracee *t, int sig, char *err,
		       size_t errlen)
{
	if (ptrace(PTRACE_CONT, t->tid, 0, sig) < 0)
		return ptrace_fail(t, "PTRACE_CONT", err, errlen);
	t->stop = INJECT_STOP_RUNNING;
	t->next_exit = 0;
	return 0;
}

int inject_tracee_syscall(struct inject_tracee *t, char *err, size_t errlen)
{
	if (t->stop != INJECT_STOP_SYSCALL_ENTRY)
		t->next_exit = 0;
	if (ptrace(PTRACE_SYSCALL, t->tid, 0, 0) < 0)
		return ptrace_fail(t, "PTRACE_SYSCALL", err, errlen);
	t->stop = INJECT_STOP_RUNNING;
	return wait_until(t, 0, err, errlen);
}

int inject_tracee_detach(struct inject_tracee *t, int sig)
{
	int rc = 0;

	if (t->tid && ptrace(PTRACE_DETACH, t->tid, 0, sig) < 0)
		rc = -errno;
	t->tid = 0;
	t->stop = INJECT_STOP_RUNNING;
	return rc;
}

void inject_tracee_release(struct inject_tracee *t)
{
	char err[128];

	if (t->tid && t->stop == INJECT_STOP_RUNNING &&
	    ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) == 0) {
		/* Seized and running: stop it, briefly, to detach it. */
		wait_until(t, inject_now_ns() + CLOSE_GRACE_NS, err,
			   sizeof(err));
	}
	/* A signal-delivery-stop's signal goes with the detach. */
	if (t->tid && t->stop != INJECT_STOP_RUNNING)
		inject_tracee_detach(t, t->stop == INJECT_STOP_SIGNAL ? t->sig
								      : 0);
}

int inject_tracee_reap(pid_t tid)
{
	int status, sig = 0;
	pid_t r = waitpid(tid, &status, __WALL | WNOHANG);

	if (r == 0)
		return 0;
	if (r < 0)
		return errno == EINTR ? 0 : 1; /* ECHILD: not ours any more */
	if (!WIFSTOPPED(status))
		return 1; /* exited */
	if (((unsigned)status >> 16) == 0 &&
	    WSTOPSIG(status) != (SIGTRAP | 0x80))
		sig = WSTOPSIG(status);
	ptrace(PTRACE_DETACH, tid, 0, sig);
	return 1;
}

void inject_tracee_close(struct inject_tracee *t)
{
	inject_tracee_release(t);
	if (t->memfd >= 0)
		close(t->memfd);
	t->memfd = -1;
}

int inject_tracee_read(struct inject_tracee *t, uint64_t addr, void *buf,
		       size_t len, char *err, size_t errlen)
{
	ssize_t n = pread(t->memfd, buf, len, (off_t)addr);

	if (n == (ssize_t)len)
		return 0;
	snprintf(err, errlen,
		 "cannot read %zu bytes at 0x%llx in process %d: %s", len,
		 (unsigned long long)addr, (int)t->pid,
		 n < 0 ? strerror(errno) : "short read");
	return n < 0 ? -errno : -EIO;
}

/* Writes through PTRACE_PEEKDATA/POKEDATA, word by word. */
static int poke(struct inject_tracee *t, uint64_t addr, const uint8_t *buf,
		size_t len)
{
	const size_t w = sizeof(long);

	while (len > 0) {
		uint64_t at = addr & ~(uint64_t)(w - 1);
		size_t skip = addr - at;
		size_t n = w - skip < len ? w - skip : len;
		long word;

		errno = 0;
		word = ptrace(PTRACE_PEEKDATA, t->tid, (void *)at, 0);
		if (word == -1 && errno)
			return -errno;
		memcpy((uint8_t *)&word + skip, buf, n);
		if (ptrace(PTRACE_POKEDATA, t->tid, (void *)at, (void *)word) <
		    0)
			return -errno;
		addr += n;
		buf += n;
		len -= n;
	}
	return 0;
}

int inject_tracee_write(struct inject_tracee *t, uint64_t addr, const void *buf,
			size_t len, char *err, size_t errlen)
{
	ssize_t n = pwrite(t->memfd, buf, len, (off_t)addr);
	int e = n < 0 ? errno : EIO;

	if (n == (ssize_t)len)
		return 0;
	/* /proc/PID/mem may refuse read-only mappings (a kernel built or
	 * booted without FOLL_FORCE for it); ptrace itself may not. */
	if (t->tid && t->stop != INJECT_STOP_RUNNING &&
	    poke(t, addr, buf, len) == 0)
		return 0;
	snprintf(err, errlen,
		 "cannot write %zu bytes at 0x%llx in process %d: %s", len,
		 (unsigned long long)addr, (int)t->pid, strerror(e));
	return -e;
}

ssize_t inject_tracee_getregset(struct inject_tracee *t, int type, void *buf,
				size_t len, char *err, size_t errlen)
{
	struct iovec iov = {buf, len};

	if (ptrace(PTRACE_GETREGSET, t->tid, (void *)(long)type, &iov) < 0)
		return ptrace_fail(t, "PTRACE_GETREGSET", err, errlen);
	return (ssize_t)iov.iov_len;
}

int inject_tracee_setregset(struct inject_tracee *t, int type, const void *buf,
			    size_t len, char *err, size_t errlen)
{
	struct iovec iov = {(void *)buf, len};

	if (ptrace(PTRACE_SETREGSET, t->tid, (void *)(long)type, &iov) < 0)
		return ptrace_fail(t, "PTRACE_SETREGSET", err, errlen);
	return 0;
}
