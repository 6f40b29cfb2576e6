/*
 * hang_native: one thread's native stack on request.  See hang_native.h.
 */
#define UNW_LOCAL_ONLY
#include "hang_native.h"

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

static struct sigaction prev_action;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int install_error;
static _Atomic pid_t my_pid;

/* ---- the handler (async-signal-safe) ------------------------------------ */

static void chain(int sig, siginfo_t *si, void *uc)
{
	if (prev_action.sa_flags & SA_SIGINFO) {
		if (prev_action.sa_sigaction)
			prev_action.sa_sigaction(sig, si, uc);
	} else if (prev_action.sa_handler != SIG_DFL &&
		   prev_action.sa_handler != SIG_IGN) {
		prev_action.sa_handler(sig);
	}
	/* SIG_DFL for SIGURG ignores it, as SIG_IGN does */
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, expect = ASKED;
	unw_cursor_t cur;
	unw_word_t ip;
	size_t n = 0;

	if (!si || si->si_code != SI_QUEUE || si->si_pid != my_pid ||
	    si->si_value.sival_ptr != (void *)&slot) {
		chain(sig, si, uc);
		errno = saved;
		return;
	}
	if (atomic_load(&slot.tid) != syscall(SYS_gettid) ||
	    !atomic_compare_exchange_strong(&slot.state, &expect, BUSY)) {
		errno = saved; /* late: the request was withdrawn */
		return;
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
}

/* ---- the caller's side --------------------------------------------------- */

static void install(void)
{
	struct sigaction sa;
	unw_context_t ctx;
	unw_cursor_t cur;

	/* libunwind's set-up here, not in a handler. */
	if (unw_getcontext(&ctx) == 0 && unw_init_local(&cur, &ctx) == 0)
		while (unw_step(&cur) > 0)
			;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	if (sigaction(HANG_NATIVE_SIGNAL, &sa, &prev_action) < 0)
		install_error = errno;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits while slot.state == val, until deadline (ms). */
static void wait_while(int val, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ms();
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
	atomic_store(&my_pid, getpid()); /* a forked child's own */
	/* A handler of a withdrawn request may still be finishing. */
	wait_while(BUSY, mono_ms() + HANG_NATIVE_WAIT_MS);
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
	deadline = mono_ms() + HANG_NATIVE_WAIT_MS;
	wait_while(ASKED, deadline);
	expect = ASKED;
	if (atomic_compare_exchange_strong(&slot.state, &expect, FREE))
		return -ETIMEDOUT; /* withdrawn: a late handler does nothing */
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
