/*
 * native: capture in a signal handler, symbolization later.  See
 * native.h.
 *
 * libunwind's signal safety (Debian's 1.6.2, checked in its code): the
 * unw_init_local2 + unw_step path takes no lock of its own without
 * blocking signals first, allocates with mmap only, validates memory
 * before reading it (conservative checks: a write() to a pipe, made
 * through native_fds.h out of the program's numbers; 1.8 makes it at its
 * first check, in a handler, which those calls allow) and uses no
 * thread-local storage; unw_backtrace() is avoided because its trace
 * cache does (pthread keys, __tls_get_addr, which may malloc on a
 * thread's first use).  Finding unwind tables calls dl_iterate_phdr,
 * whose lock is recursive.  libunwind is initialised once, on the
 * sampler thread, before the handler is installed.
 */
#define UNW_LOCAL_ONLY
#include "native.h"
#include "native_fds.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
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


enum { E_FREE, E_BUSY, E_READY };

/* A request: which thread, and what its hook gets.  tid 0: free.  Filled
 * by the sampler (tid stored last), freed by the handler that serves it
 * (or by the sampler once its thread is gone). */
struct req {
	_Atomic long tid;
	uintptr_t arg;
	uint64_t tag;
};

/* A capture: taken by one handler (FREE -> BUSY), published (READY),
 * copied out and freed by the sampler. */
struct entry {
	_Atomic int state;
	long tid;
	uint64_t tag;
	int64_t ts_ns;
	size_t n, extra_len;
	uintptr_t ips[NATIVE_DEPTH_MAX];
	uint64_t extra[NATIVE_EXTRA_MAX / 8];
};

static struct req reqs[NATIVE_REQ_MAX];
static struct entry ring[NATIVE_RING];
static _Atomic unsigned ring_next; /* where the next handler looks first */
static _Atomic unsigned ring_used; /* entries BUSY or READY */
static _Atomic int ready_word;	   /* futex: bumped per published entry */
static _Atomic int waiting;	   /* the consumer sleeps on ready_word */

static struct sigaction prev_action;
static _Atomic int installed; /* our handler was installed (it stays) */
static _Atomic int active;    /* requests allowed */
static _Atomic native_serve_fn other; /* the hang watchdog's serve */
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
static native_hook_fn hook;
static pid_t my_pid;
static uintptr_t eval_lo, eval_hi;
/* native_learn_eval's range (0, 0: none), set once before it is read. */
static _Atomic uintptr_t loop_lo, loop_hi;
static struct native_stats stats;

static long sys_futex(_Atomic int *word, int op, int val,
		      const struct timespec *ts)
{
	return syscall(SYS_futex, (int *)word, op, val, ts, NULL, 0);
}

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void count(uint64_t *c, uint64_t v)
{
	__atomic_add_fetch(c, v, __ATOMIC_RELAXED);
}

/* ---- the handler (async-signal-safe from here to on_signal) ----------- */

/* Unwinds the interrupted context uc into ips. */
static size_t unwind(void *uc, uintptr_t *ips)
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
		ips[n] = n ? (uintptr_t)ip : (uintptr_t)ip + 1;
		n++;
	} while (n < NATIVE_DEPTH_MAX && unw_step(&cur) > 0);
	return n;
}

/* Hands a signal that is not ours to whoever had it before us.
 * SIG_DFL and SIG_IGN: nothing (SIGURG's default is to ignore it). */
static void chain(int sig, siginfo_t *si, void *uc)
{
	if (prev_action.sa_flags & SA_SIGINFO) {
		if (prev_action.sa_sigaction)
			prev_action.sa_sigaction(sig, si, uc);
		return;
	}
	if (prev_action.sa_handler == SIG_IGN ||
	    prev_action.sa_handler == SIG_DFL)
		return;
	prev_action.sa_handler(sig);
}

/* The request a signal of ours carries, NULL when it is not ours. */
static struct req *ours(const siginfo_t *si)
{
	uintptr_t p, lo = (uintptr_t)reqs;

	if (!si || si->si_code != SI_QUEUE || si->si_pid != my_pid)
		return NULL;
	p = (uintptr_t)si->si_value.sival_ptr;
	if (p < lo || p >= lo + sizeof(reqs) || (p - lo) % sizeof(reqs[0]))
		return NULL;
	return (struct req *)p;
}

/* A free entry of the ring, now BUSY; NULL when all are taken. */
static struct entry *entry_take(void)
{
	unsigned start = atomic_fetch_add(&ring_next, 1), used, max;

	for (unsigned k = 0; k < NATIVE_RING; k++) {
		struct entry *e = &ring[(start + k) % NATIVE_RING];
		int expect = E_FREE;

		if (atomic_compare_exchange_strong(&e->state, &expect,
						   E_BUSY)) {
			used = atomic_fetch_add(&ring_used, 1) + 1;
			max = __atomic_load_n(&stats.ring_max,
					      __ATOMIC_RELAXED);
			while (used > max &&
			       !__atomic_compare_exchange_n(
				       &stats.ring_max, &max, used, 0,
				       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				;
			return e;
		}
	}
	return NULL;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	struct req *r = ours(si);
	struct entry *e;
	long tid;
	int64_t t0, t1;

	if (!r) {
		native_serve_fn serve = atomic_load(&other);

		if (!serve || !serve(si, uc)) {
			count(&stats.chained, 1);
			chain(sig, si, uc);
		}
		errno = saved;
		return;
	}
	tid = syscall(SYS_gettid);
	/* The request must be for this thread (a slot freed because its
	 * thread looked gone, then reused, names another). */
	if (atomic_load(&r->tid) != tid) {
		count(&stats.stray, 1);
		errno = saved;
		return;
	}
	e = entry_take();
	if (!e) {
		count(&stats.dropped, 1);
		atomic_store(&r->tid, 0);
		errno = saved;
		return;
	}
	e->tid = tid;
	e->tag = r->tag;
	t0 = clock_ns(CLOCK_MONOTONIC);
	e->ts_ns = clock_ns(CLOCK_REALTIME);
	e->n = unwind(uc, e->ips);
	t1 = clock_ns(CLOCK_MONOTONIC);
	e->extra_len = hook ? hook(tid, r->arg, e->extra, sizeof(e->extra))
			    : 0;
	if (e->extra_len > sizeof(e->extra))
		e->extra_len = 0;
	count(&stats.unwind_ns, (uint64_t)(t1 - t0));
	count(&stats.hook_ns, (uint64_t)(clock_ns(CLOCK_MONOTONIC) - t1));
	count(&stats.captured, 1);
	atomic_store(&e->state, E_READY);
	/* The thread may be asked again from now on. */
	atomic_store(&r->tid, 0);
	atomic_fetch_add(&ready_word, 1);
	if (atomic_load(&waiting))
		sys_futex(&ready_word, FUTEX_WAKE_PRIVATE, 1, NULL);
	errno = saved;
}

/* ---- the sampler's side ----------------------------------------------- */

/* The address range of _PyEval_EvalFrameDefault, from its symbol. */
/* The range [*lo, *hi) of _PyEval_EvalFrameDefault's symbol (a size of
 * 0 taken as 1); 0, 0 when there is none. */
static void eval_symbol(uintptr_t *lo, uintptr_t *hi)
{
	void *f = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
	const ElfW(Sym) *sym = NULL;
	Dl_info info;

	*lo = *hi = 0;
	if (!f || !dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym)
		return;
	*lo = (uintptr_t)f;
	*hi = *lo + (sym->st_size ? sym->st_size : 1);
}


/* Frees the requests of threads that are gone (their pending signal went
 * with them).  Returns how many requests remain outstanding. */
static int reap(void)
{
	int left = 0;

	for (int i = 0; i < NATIVE_REQ_MAX; i++) {
		long t = atomic_load(&reqs[i].tid);

		if (!t)
			continue;
		if (syscall(SYS_tgkill, my_pid, (pid_t)t, 0) < 0 &&
		    errno == ESRCH) {
			long expect = t;

			atomic_compare_exchange_strong(&reqs[i].tid, &expect,
						       0);
			continue;
		}
		left++;
	}
	return left;
}

/* Discards the captures waiting in the ring. */
static void ring_clear(void)
{
	for (int i = 0; i < NATIVE_RING; i++) {
		int expect = E_READY;

		if (atomic_compare_exchange_strong(&ring[i].state, &expect,
						   E_FREE))
			atomic_fetch_sub(&ring_used, 1);
	}
}

int native_signal_install(native_serve_fn serve, char *err, size_t errlen)
{
	struct sigaction sa;
	unw_context_t ctx;
	unw_cursor_t cur;
	native_serve_fn none = NULL;
	int rc = 0;

	pthread_mutex_lock(&install_lock);
	if (serve && !atomic_compare_exchange_strong(&other, &none, serve) &&
	    none != serve) {
		snprintf(err, errlen, "the signal's other user is set already");
		rc = -EBUSY;
		goto out;
	}
	if (atomic_load(&installed))
		goto out;
	my_pid = getpid();
	/* Before libunwind first runs: its pipe is not to take the
	 * program's numbers (native_fds.h). */
	rc = native_fds_guard(err, errlen);
	if (rc)
		goto out;
	/* libunwind's own set-up, here rather than in a handler. */
	if (unw_getcontext(&ctx) < 0 || unw_init_local(&cur, &ctx) < 0) {
		snprintf(err, errlen, "libunwind cannot unwind here");
		rc = -ENOTSUP;
		goto out;
	}
	while (unw_step(&cur) > 0)
		;
	eval_symbol(&eval_lo, &eval_hi);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	if (sigaction(NATIVE_SIGNAL, &sa, &prev_action) < 0) {
		rc = -errno;
		snprintf(err, errlen, "sigaction: %s", strerror(errno));
		goto out;
	}
	atomic_store(&installed, 1);
out:
	pthread_mutex_unlock(&install_lock);
	return rc;
}

int native_signal_held(void)
{
	struct sigaction cur;

	return atomic_load(&installed) &&
	       sigaction(NATIVE_SIGNAL, NULL, &cur) == 0 &&
	       (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_signal;
}

int native_start(native_hook_fn fn, char *err, size_t errlen)
{
	int rc;

	my_pid = getpid();
	hook = fn;
	rc = native_signal_install(NULL, err, errlen);
	if (rc)
		return rc;
	if (!native_signal_held()) {
		snprintf(err, errlen,
			 "native stacks need SIGURG, which the program "
			 "handles itself now (its action replaced the "
			 "agent's): profile without native stacks");
		return -EPERM;
	}
	ring_clear();
	atomic_store(&active, 1);
	return 0;
}

/* SIG_IGN discards the pending instances of a signal on every thread
 * (POSIX, sigaction(2)); then ours is put back.  Only while ours holds the
 * signal: the program's action is never touched. */
void native_signal_discard(void)
{
	struct sigaction ign, cur, now;

	/* The sampler's thread and the hang watchdog's may both discard:
	 * one at a time, or the second would take the first's SIG_IGN for
	 * the action to put back, and leave it for good. */
	pthread_mutex_lock(&install_lock);
	if (!native_signal_held()) {
		pthread_mutex_unlock(&install_lock);
		return;
	}
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	if (sigaction(NATIVE_SIGNAL, &ign, &cur) < 0) {
		pthread_mutex_unlock(&install_lock);
		return;
	}
	/* Put back what was there, unless the program set an action of
	 * its own meanwhile (then SIG_IGN is no longer there: theirs
	 * stays). */
	if (sigaction(NATIVE_SIGNAL, NULL, &now) == 0 &&
	    !(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN)
		sigaction(NATIVE_SIGNAL, &cur, NULL);
	pthread_mutex_unlock(&install_lock);
	/* The requests' signals are gone: their slots are free (a handler
	 * that was already running finds its slot emptied and counts
	 * itself stray, or finishes into the ring, which the next start
	 * clears). */
	for (int i = 0; i < NATIVE_REQ_MAX; i++)
		if (atomic_exchange(&reqs[i].tid, 0))
			count(&stats.discarded, 1);
}

void native_stop(void)
{
	atomic_store(&active, 0);
	if (!atomic_load(&installed))
		return;
	if (reap())
		native_signal_discard();
}

int native_request(long tid, uintptr_t arg, uint64_t tag)
{
	struct req *r = NULL;
	siginfo_t si;

	if (!atomic_load(&active))
		return -EBUSY;
	/* The program's action comes first: once it replaced ours, the
	 * signal is its own (native.h). */
	if (!native_signal_held()) {
		atomic_store(&active, 0);
		return -EPERM;
	}
	for (int i = 0; i < NATIVE_REQ_MAX; i++) {
		long t = atomic_load(&reqs[i].tid);

		if (t == tid)
			return -EINPROGRESS;
		if (!t && !r)
			r = &reqs[i];
	}
	if (!r && reap() < NATIVE_REQ_MAX) {
		for (int i = 0; i < NATIVE_REQ_MAX && !r; i++)
			if (!atomic_load(&reqs[i].tid))
				r = &reqs[i];
	}
	if (!r)
		return -EAGAIN;
	/* Only we fill free slots; the thread's handler reads arg and tag
	 * once it sees its tid (stored last). */
	r->arg = arg;
	r->tag = tag;
	atomic_store(&r->tid, tid);
	memset(&si, 0, sizeof(si));
	si.si_signo = NATIVE_SIGNAL;
	si.si_code = SI_QUEUE;
	si.si_pid = my_pid;
	si.si_uid = getuid();
	si.si_value.sival_ptr = (void *)r;
	if (syscall(SYS_rt_tgsigqueueinfo, my_pid, (pid_t)tid, NATIVE_SIGNAL,
		    &si) < 0) {
		int e = errno;

		atomic_store(&r->tid, 0);
		return e == ESRCH ? -ESRCH : -e;
	}
	count(&stats.requested, 1);
	return 0;
}

int native_collect(struct native_capture *out)
{
	if (!atomic_load(&ring_used))
		return -EAGAIN;
	for (int i = 0; i < NATIVE_RING; i++) {
		struct entry *e = &ring[i];

		if (atomic_load(&e->state) != E_READY)
			continue;
		out->tid = e->tid;
		out->tag = e->tag;
		out->ts_ns = e->ts_ns;
		out->n = e->n;
		memcpy(out->ips, e->ips, e->n * sizeof(e->ips[0]));
		out->extra_len = e->extra_len;
		memcpy(out->extra, e->extra, e->extra_len);
		atomic_store(&e->state, E_FREE);
		atomic_fetch_sub(&ring_used, 1);
		return 0;
	}
	return -EAGAIN;
}

static int any_ready(void)
{
	if (!atomic_load(&ring_used))
		return 0;
	for (int i = 0; i < NATIVE_RING; i++)
		if (atomic_load(&ring[i].state) == E_READY)
			return 1;
	return 0;
}

int native_wait(int64_t deadline_ns)
{
	for (;;) {
		int v = atomic_load(&ready_word);
		int64_t left;
		struct timespec ts;

		/* waiting is set before looking, and the handler bumps the
		 * word before it looks at waiting: either we see its entry
		 * or it sees us (and the word moved: the wait returns). */
		atomic_store(&waiting, 1);
		if (any_ready()) {
			atomic_store(&waiting, 0);
			return 0;
		}
		left = deadline_ns - clock_ns(CLOCK_MONOTONIC);
		if (left <= 0) {
			atomic_store(&waiting, 0);
			return -ETIMEDOUT;
		}
		ts.tv_sec = (time_t)(left / 1000000000);
		ts.tv_nsec = (long)(left % 1000000000);
		sys_futex(&ready_word, FUTEX_WAIT_PRIVATE, v, &ts);
		atomic_store(&waiting, 0);
	}
}

int native_is_eval(uintptr_t ip)
{
	uintptr_t lo = atomic_load_explicit(&loop_lo, memory_order_relaxed);

	return (ip - 1 >= eval_lo && ip - 1 < eval_hi) ||
	       (ip - 1 >= lo &&
		ip - 1 < atomic_load_explicit(&loop_hi, memory_order_relaxed));
}

/* ---- where the evaluation loop is (native_learn_eval) ------------------ */

#define LEARN_FRAMES 16		/* frames looked at above the probe */
#define LOOP_MIN (16u << 10)	/* bytes: no helper of the loop is as big */

int native_eval_symbol_whole(void)
{
	uintptr_t lo, hi;

	eval_symbol(&lo, &hi);
	return hi - lo >= LOOP_MIN;
}

int native_eval_loop(uintptr_t *lo, uintptr_t *hi)
{
	*lo = atomic_load(&loop_lo);
	*hi = atomic_load(&loop_hi);
	return *hi > *lo;
}

void native_learn_eval_here(void)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	unw_proc_info_t pi;
	unw_word_t ip;
	uintptr_t best_lo = 0, best_hi = 0;
	Dl_info ours, here;
	int i = 0;

	if (native_fds_guard(NULL, 0) ||
	    !dladdr((void *)native_learn_eval_here, &ours) ||
	    unw_getcontext(&ctx) < 0 || unw_init_local(&cur, &ctx) < 0)
		return;
	/* Up from our caller (the probe, in our library) to the frame
	 * back in our library that ran the Python function. */
	while (i++ < LEARN_FRAMES && unw_step(&cur) > 0) {
		if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0)
			break;
		if (dladdr((void *)(uintptr_t)ip, &here) &&
		    here.dli_fbase == ours.dli_fbase) {
			if (i > 1)
				break;
			continue; /* the probe itself */
		}
		if (unw_get_proc_info(&cur, &pi) < 0 || pi.end_ip <= pi.start_ip)
			continue;
		if (pi.end_ip - pi.start_ip > best_hi - best_lo) {
			best_lo = (uintptr_t)pi.start_ip;
			best_hi = (uintptr_t)pi.end_ip;
		}
	}
	if (best_hi - best_lo >= LOOP_MIN) {
		atomic_store(&loop_hi, best_hi);
		atomic_store(&loop_lo, best_lo);
	}
}

void native_stats(struct native_stats *s)
{
	s->requested = __atomic_load_n(&stats.requested, __ATOMIC_RELAXED);
	s->captured = __atomic_load_n(&stats.captured, __ATOMIC_RELAXED);
	s->dropped = __atomic_load_n(&stats.dropped, __ATOMIC_RELAXED);
	s->chained = __atomic_load_n(&stats.chained, __ATOMIC_RELAXED);
	s->stray = __atomic_load_n(&stats.stray, __ATOMIC_RELAXED);
	s->discarded = __atomic_load_n(&stats.discarded, __ATOMIC_RELAXED);
	s->unwind_ns = __atomic_load_n(&stats.unwind_ns, __ATOMIC_RELAXED);
	s->hook_ns = __atomic_load_n(&stats.hook_ns, __ATOMIC_RELAXED);
	s->ring_max = __atomic_load_n(&stats.ring_max, __ATOMIC_RELAXED);
}

void native_atfork_child(void)
{
	/* Our handler stays installed (inherited); requests of the parent
	 * are gone with its threads (and their pending signals: a child
	 * starts with none), and so are their captures. */
	atomic_store(&active, 0);
	for (int i = 0; i < NATIVE_REQ_MAX; i++)
		atomic_store(&reqs[i].tid, 0);
	for (int i = 0; i < NATIVE_RING; i++)
		atomic_store(&ring[i].state, E_FREE);
	atomic_store(&ring_used, 0);
	atomic_store(&waiting, 0);
	my_pid = getpid();
}
