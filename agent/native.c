/*
 * native: capture in a signal handler, symbolization later.  See
 * native.h.
 *
 * libunwind's signal safety (Debian's 1.6.2, checked in its code): the
 * unw_init_local2 + unw_step path takes no lock of its own without
 * blocking signals first, allocates with mmap only, validates memory
 * before reading it (conservative checks: a write() to a pipe) and uses
 * no thread-local storage; unw_backtrace() is avoided because its trace
 * cache does (pthread keys, __tls_get_addr, which may malloc on a
 * thread's first use).  Finding unwind tables calls dl_iterate_phdr,
 * whose lock is recursive.  libunwind is initialised once, on the
 * sampler thread, before the handler is installed.
 */
#define UNW_LOCAL_ONLY
#include "native.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>


enum { SLOT_FREE, SLOT_ASKED, SLOT_BUSY, SLOT_READY, SLOT_RELEASED };

/* The one request in flight; preallocated, touched by the handler only
 * between ASKED and FREE. */
static struct {
	_Atomic int state; /* also the futex word both sides wait on */
	_Atomic long tid;  /* the thread asked */
	uintptr_t ips[NATIVE_DEPTH_MAX];
	_Atomic size_t n;
} slot;

static struct sigaction prev_action;
static _Atomic int installed; /* our handler is in place */
static _Atomic int active;    /* captures allowed */
/* Threads with a signal of ours pending (sent, not yet handled): a
 * standard signal sent again while one is pending is merged into it, so
 * such a thread is never sent another; its pending one serves the next
 * request.  Slots are claimed by the sampler and freed by the handler. */
#define PENDING_MAX 64
static _Atomic long pending[PENDING_MAX];
static pid_t my_pid;
static uintptr_t eval_lo, eval_hi;
static struct native_stats stats;

static long sys_futex(_Atomic int *word, int op, int val,
		      const struct timespec *ts)
{
	return syscall(SYS_futex, (int *)word, op, val, ts, NULL, 0);
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits while *word == val, at most until deadline (CLOCK_MONOTONIC ns).
 * Async-signal-safe. */
static void wait_while(_Atomic int *word, int val, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ns();
		struct timespec ts;

		if (atomic_load(word) != val || left <= 0)
			return;
		ts.tv_sec = (time_t)(left / 1000000000);
		ts.tv_nsec = (long)(left % 1000000000);
		sys_futex(word, FUTEX_WAIT_PRIVATE, val, &ts);
	}
}

/* ---- the handler (async-signal-safe from here to on_signal) ----------- */

static void pending_clear(long tid)
{
	for (int i = 0; i < PENDING_MAX; i++) {
		long t = tid;

		if (atomic_compare_exchange_strong(&pending[i], &t, 0))
			return;
	}
}

/* Unwinds the interrupted context uc into the slot. */
static size_t unwind(void *uc)
{
	unw_cursor_t cur;
	unw_word_t ip;
	size_t n = 0;

	if (unw_init_local2(&cur, (unw_context_t *)uc,
			    UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	do {
		if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !ip)
			break;
		/* The interrupted pc is not a return address: +1 so that
		 * every entry is symbolized at ip - 1 alike. */
		slot.ips[n] = n ? (uintptr_t)ip : (uintptr_t)ip + 1;
		n++;
	} while (n < NATIVE_DEPTH_MAX && unw_step(&cur) > 0);
	return n;
}

/* Hands a signal that is not ours to whoever had it before us. */
static void chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction dfl;

	if (prev_action.sa_flags & SA_SIGINFO) {
		if (prev_action.sa_sigaction)
			prev_action.sa_sigaction(sig, si, uc);
		return;
	}
	if (prev_action.sa_handler == SIG_IGN)
		return;
	if (prev_action.sa_handler == SIG_DFL) {
		/* What would have happened without us (SIGPROF's default
		 * ends the process): the signal is blocked while we run,
		 * so it is delivered, with the default action, once we
		 * return. */
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
		raise(sig);
		return;
	}
	prev_action.sa_handler(sig);
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, expect = SLOT_ASKED;
	int64_t t0, t1;

	if (!si || si->si_code != SI_QUEUE || si->si_pid != my_pid ||
	    si->si_value.sival_ptr != (void *)&slot) {
		__atomic_add_fetch(&stats.chained, 1, __ATOMIC_RELAXED);
		chain(sig, si, uc);
		errno = saved;
		return;
	}
	pending_clear(syscall(SYS_gettid));
	/* The re-entrancy guard: only one handler owns the slot, and only
	 * for the thread it was meant for. */
	if (atomic_load(&slot.tid) != syscall(SYS_gettid) ||
	    !atomic_compare_exchange_strong(&slot.state, &expect,
					    SLOT_BUSY)) {
		__atomic_add_fetch(&stats.late, 1, __ATOMIC_RELAXED);
		errno = saved;
		return;
	}
	t0 = mono_ns();
	atomic_store(&slot.n, unwind(uc));
	t1 = mono_ns();
	atomic_store(&slot.state, SLOT_READY);
	sys_futex(&slot.state, FUTEX_WAKE_PRIVATE, 1, NULL);
	/* Hold still while the sampler reads our Python stack. */
	wait_while(&slot.state, SLOT_READY, t1 + (int64_t)NATIVE_HOLD_US * 1000);
	__atomic_add_fetch(&stats.unwind_ns, (uint64_t)(t1 - t0),
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(&stats.hold_ns, (uint64_t)(mono_ns() - t1),
			   __ATOMIC_RELAXED);
	atomic_store(&slot.state, SLOT_FREE);
	sys_futex(&slot.state, FUTEX_WAKE_PRIVATE, 1, NULL);
	errno = saved;
}

/* ---- the sampler's side ----------------------------------------------- */

/* The address range of _PyEval_EvalFrameDefault, from its symbol. */
static void find_eval(void)
{
	void *f = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	const ElfW(Sym) *sym = NULL;
	Dl_info info;

	eval_lo = eval_hi = 0;
	if (!f || !dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
		return;
	eval_lo = (uintptr_t)f;
	eval_hi = eval_lo + (sym->st_size ? sym->st_size : 1);
}

int native_start(char *err, size_t errlen)
{
	struct sigaction sa;
	unw_context_t ctx;
	unw_cursor_t cur;

	my_pid = getpid();
	if (!atomic_load(&installed)) {
		/* libunwind's own set-up, here rather than in a handler. */
		if (unw_getcontext(&ctx) < 0 || unw_init_local(&cur, &ctx) < 0) {
			snprintf(err, errlen, "libunwind cannot unwind here");
			return -ENOTSUP;
		}
		while (unw_step(&cur) > 0)
			;
		find_eval();
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_signal;
		sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
		sigfillset(&sa.sa_mask);
		if (sigaction(NATIVE_SIGNAL, &sa, &prev_action) < 0) {
			snprintf(err, errlen, "sigaction: %s", strerror(errno));
			return -errno;
		}
		atomic_store(&installed, 1);
	}
	atomic_store(&slot.state, SLOT_FREE);
	atomic_store(&active, 1);
	return 0;
}

void native_stop(void)
{
	struct sigaction cur;

	atomic_store(&active, 0);
	if (!atomic_load(&installed))
		return;
	/* A signal of ours still pending somewhere (a thread that blocks
	 * it) must find our handler, not SIGPROF's default (which ends the
	 * process): then ours stays, passing others on. */
	for (int i = 0; i < PENDING_MAX; i++) {
		long t = atomic_load(&pending[i]);

		/* A thread that ended took its pending signal with it. */
		if (t && syscall(SYS_tgkill, my_pid, (pid_t)t, 0) < 0 &&
		    errno == ESRCH)
			pending_clear(t);
		else if (t)
			return;
	}
	if (sigaction(NATIVE_SIGNAL, NULL, &cur) == 0 &&
	    cur.sa_sigaction != on_signal)
		return; /* someone replaced us: theirs stays */
	if (sigaction(NATIVE_SIGNAL, &prev_action, NULL) == 0)
		atomic_store(&installed, 0);
}

static int is_pending(long tid)
{
	for (int i = 0; i < PENDING_MAX; i++)
		if (atomic_load(&pending[i]) == tid)
			return 1;
	return 0;
}

static int pending_add(long tid)
{
	for (int i = 0; i < PENDING_MAX; i++) {
		long t = 0;

		if (atomic_compare_exchange_strong(&pending[i], &t, tid))
			return 0;
	}
	return -EBUSY; /* 64 threads that do not take signals: enough */
}

int native_capture(long tid, uintptr_t *ips, size_t max, size_t *n,
		   native_held_fn held, void *arg)
{
	siginfo_t si;
	int64_t deadline;
	int expect, st;

	*n = 0;
	if (!atomic_load(&active))
		return -EBUSY;
	/* A handler from a given-up request may still own the slot. */
	wait_while(&slot.state, SLOT_BUSY, mono_ns() + NATIVE_WAIT_US * 1000LL);
	wait_while(&slot.state, SLOT_READY, mono_ns() + NATIVE_WAIT_US * 1000LL);
	wait_while(&slot.state, SLOT_RELEASED,
		   mono_ns() + NATIVE_WAIT_US * 1000LL);
	if (atomic_load(&slot.state) != SLOT_FREE)
		return -EBUSY;
	atomic_store(&slot.n, 0);
	atomic_store(&slot.tid, tid);
	atomic_store(&slot.state, SLOT_ASKED);
	memset(&si, 0, sizeof(si));
	si.si_signo = NATIVE_SIGNAL;
	si.si_code = SI_QUEUE;
	si.si_pid = my_pid;
	si.si_uid = getuid();
	si.si_value.sival_ptr = (void *)&slot;
	if (is_pending(tid)) {
		/* Its earlier signal, still pending, answers this request. */
	} else if (pending_add(tid) < 0) {
		atomic_store(&slot.state, SLOT_FREE);
		return -EBUSY;
	} else if (syscall(SYS_rt_tgsigqueueinfo, my_pid, (pid_t)tid,
			   NATIVE_SIGNAL, &si) < 0) {
		int e = errno;

		pending_clear(tid);
		atomic_store(&slot.state, SLOT_FREE);
		return e == ESRCH ? -ESRCH : -e;
	}
	deadline = mono_ns() + NATIVE_WAIT_US * 1000LL;
	wait_while(&slot.state, SLOT_ASKED, deadline);
	expect = SLOT_ASKED;
	if (atomic_compare_exchange_strong(&slot.state, &expect, SLOT_FREE)) {
		/* Withdrawn: a late handler finds no request. */
		__atomic_add_fetch(&stats.timeouts, 1, __ATOMIC_RELAXED);
		return -ETIMEDOUT;
	}
	wait_while(&slot.state, SLOT_BUSY, deadline);
	st = atomic_load(&slot.state);
	if (st != SLOT_READY) {
		__atomic_add_fetch(&stats.timeouts, 1, __ATOMIC_RELAXED);
		return -ETIMEDOUT;
	}
	*n = atomic_load(&slot.n);
	if (*n > max)
		*n = max;
	memcpy(ips, slot.ips, *n * sizeof(*ips));
	if (held)
		held(arg);
	expect = SLOT_READY;
	if (atomic_compare_exchange_strong(&slot.state, &expect,
					   SLOT_RELEASED))
		sys_futex(&slot.state, FUTEX_WAKE_PRIVATE, 1, NULL);
	__atomic_add_fetch(&stats.captured, 1, __ATOMIC_RELAXED);
	return 0;
}

int native_is_eval(uintptr_t ip)
{
	return ip - 1 >= eval_lo && ip - 1 < eval_hi;
}

void native_stats(struct native_stats *s)
{
	s->captured = __atomic_load_n(&stats.captured, __ATOMIC_RELAXED);
	s->timeouts = __atomic_load_n(&stats.timeouts, __ATOMIC_RELAXED);
	s->chained = __atomic_load_n(&stats.chained, __ATOMIC_RELAXED);
	s->late = __atomic_load_n(&stats.late, __ATOMIC_RELAXED);
	s->unwind_ns = __atomic_load_n(&stats.unwind_ns, __ATOMIC_RELAXED);
	s->hold_ns = __atomic_load_n(&stats.hold_ns, __ATOMIC_RELAXED);
}

void native_atfork_child(void)
{
	/* Our handler stays installed (inherited); requests of the parent
	 * are gone with its threads. */
	atomic_store(&slot.state, SLOT_FREE);
	atomic_store(&active, 0);
	for (int i = 0; i < PENDING_MAX; i++)
		atomic_store(&pending[i], 0);
	my_pid = getpid();
}
