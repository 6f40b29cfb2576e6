/*
 * hang_native: one thread's native stack on request.  See hang_native.h.
 */
#define UNW_LOCAL_ONLY
#include "core/thread.h"
#include "hang_native.h"

#include "profiler/native.h"

#include <errno.h>
#include <libunwind.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { FREE, ASKED, BUSY, READY };

/* The one request; touched by the handler only between ASKED and READY. */
static struct {
	_Atomic int state; /* also the futex word */
	_Atomic long tid;
	uintptr_t ips[HANG_NATIVE_DEPTH_MAX];
	_Atomic size_t n;
} slot;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int install_error;
static _Atomic pid_t my_pid;

/* ---- the handler's part (async-signal-safe) ------------------------------ */

/* Given every NATIVE_SIGNAL that is not a sampler request (native.c's
 * handler, the one installed): 1 when it was a request of ours. */
static int serve(siginfo_t *si, void *uc)
{
	int saved = errno, expect = ASKED;
	unw_cursor_t cur;
	unw_word_t ip;
	size_t n = 0;

	if (!si || si->si_code != SI_QUEUE || si->si_pid != my_pid ||
	    si->si_value.sival_ptr != (void *)&slot)
		return 0;
	if (atomic_load(&slot.tid) != syscall(SYS_gettid) ||
	    !atomic_compare_exchange_strong(&slot.state, &expect, BUSY)) {
		errno = saved; /* late: the request was withdrawn */
		return 1;
	}
	if (unw_init_local2(&cur, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) ==
	    0) {
		do {
			if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !ip)
				break;
			slot.ips[n] = n ? (uintptr_t)ip : (uintptr_t)ip + 1;
			n++;
		} while (n < HANG_NATIVE_DEPTH_MAX && unw_step(&cur) > 0);
	}
	atomic_store(&slot.n, n);
	atomic_store(&slot.state, READY);
	syscall(SYS_futex, (int *)&slot.state, FUTEX_WAKE_PRIVATE, 1, NULL,
		NULL, 0);
	errno = saved;
	return 1;
}

/* ---- the caller's side --------------------------------------------------- */

static void install(void)
{
	char err[128];

	install_error = -native_signal_install(serve, err, sizeof(err));
}

/* Waits while slot.state == val, until deadline (ms). */
static void wait_while(int val, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - agent_now_ms();
		struct timespec ts;

		if (atomic_load(&slot.state) != val || left <= 0)
			return;
		ts.tv_sec = (time_t)(left / 1000);
		ts.tv_nsec = (long)(left % 1000) * 1000000L;
		syscall(SYS_futex, (int *)&slot.state, FUTEX_WAIT_PRIVATE, val,
			&ts, NULL, 0);
	}
}

static int capture(long tid, uintptr_t *ips, size_t max, size_t *n)
{
	siginfo_t si;
	int64_t deadline;
	int expect;

	*n = 0;
	pthread_once(&once, install);
	if (install_error)
		return -install_error;
	/* The program's action comes first: once it replaced the agent's,
	 * a signal of ours would go to its handler. */
	if (!native_signal_held())
		return -EPERM;
	atomic_store(&my_pid, getpid()); /* a forked child's own */
	/* A handler of a withdrawn request may still be finishing. */
	wait_while(BUSY, agent_now_ms() + HANG_NATIVE_WAIT_MS);
	if (atomic_load(&slot.state) == BUSY)
		return -ETIMEDOUT;
	atomic_store(&slot.n, 0);
	atomic_store(&slot.tid, tid);
	atomic_store(&slot.state, ASKED);
	memset(&si, 0, sizeof(si));
	si.si_signo = HANG_NATIVE_SIGNAL;
	si.si_code = SI_QUEUE;
	si.si_pid = my_pid;
	si.si_uid = getuid();
	si.si_value.sival_ptr = (void *)&slot;
	if (syscall(SYS_rt_tgsigqueueinfo, my_pid, (pid_t)tid,
		    HANG_NATIVE_SIGNAL, &si) < 0) {
		int e = errno;

		atomic_store(&slot.state, FREE);
		return -e;
	}
	deadline = agent_now_ms() + HANG_NATIVE_WAIT_MS;
	wait_while(ASKED, deadline);
	expect = ASKED;
	if (atomic_compare_exchange_strong(&slot.state, &expect, FREE)) {
		/* Withdrawn: a late handler does nothing; a signal still
		 * pending (the thread blocks it) is dropped, not left for a
		 * handler the program may install later (native.h). */
		native_signal_discard();
		return -ETIMEDOUT;
	}
	wait_while(BUSY, deadline + HANG_NATIVE_WAIT_MS);
	if (atomic_load(&slot.state) != READY)
		return -ETIMEDOUT;
	*n = atomic_load(&slot.n);
	if (*n > max)
		*n = max;
	memcpy(ips, slot.ips, *n * sizeof(*ips));
	atomic_store(&slot.state, FREE);
	return 0;
}

int hang_native_capture(long tid, uintptr_t *ips, size_t max, size_t *n)
{
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;
	int rc;

	pthread_mutex_lock(&one); /* one slot: one request at a time */
	rc = capture(tid, ips, max, n);
	pthread_mutex_unlock(&one);
	return rc;
}
