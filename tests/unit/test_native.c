/*
 * native and native_sym: asking threads for their stacks without waiting
 * for each (requests sent at once, captures collected from the ring as
 * they come), the hook run in the handler on the sampled thread,
 * symbolizing, chaining signals that are not ours to the previous
 * handler, a thread that blocks the signal (no second signal while one is
 * pending; its capture comes once it unblocks), a full ring (dropped and
 * counted, never waited for), system calls interrupted by the signal
 * (read() restarted, nanosleep() not: the EINTR that keeps idle threads
 * unsignalled by default), and restoring the previous handler.
 */
#include "profiler/native.h"
#include "profiler/native_sym.h"
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SPINNERS 4

static atomic_int stop, foreign, blocked_ready;
static atomic_long spin_tid[SPINNERS], blocked_tid;
static volatile unsigned long sink;

static void on_foreign(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	atomic_fetch_add(&foreign, 1);
}

/* The hook: says on which thread it ran and with which argument. */
static size_t hook(long tid, uintptr_t arg, void *buf, size_t cap)
{
	uint64_t *w = buf;

	if (cap < 3 * sizeof(*w))
		return 0;
	w[0] = (uint64_t)tid;
	w[1] = (uint64_t)syscall(SYS_gettid);
	w[2] = arg;
	return 3 * sizeof(*w);
}

__attribute__((noinline)) static void spin_here(void)
{
	while (!atomic_load(&stop))
		for (int i = 0; i < 1000; i++)
			sink += (unsigned long)i * 7;
}

__attribute__((noinline)) static void spin_caller(void)
{
	spin_here();
	sink++; /* no tail call: spin_caller stays on the stack */
}

static void *spinner(void *arg)
{
	atomic_store(&spin_tid[(intptr_t)arg], syscall(SYS_gettid));
	spin_caller();
	return NULL;
}

static void *blocker(void *arg)
{
	sigset_t s;

	(void)arg;
	sigemptyset(&s);
	sigaddset(&s, NATIVE_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	atomic_store(&blocked_tid, syscall(SYS_gettid));
	atomic_store(&blocked_ready, 1);
	while (atomic_load(&blocked_ready) == 1)
		usleep(1000);
	/* Let the pending signal in: it answers its request. */
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	atomic_store(&blocked_ready, 3);
	return NULL;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int index_of(long tid)
{
	for (int i = 0; i < SPINNERS; i++)
		if (atomic_load(&spin_tid[i]) == tid)
			return i;
	return -1;
}

/* The capture shows the spinning function innermost, its caller below. */
static int shows_spin(const struct native_capture *c)
{
	int here = 0, caller = 0;

	for (size_t i = 0; i < c->n; i++) {
		struct native_symbol s;

		native_sym_lookup(c->ips[i], &s);
		if (!strcmp(s.func, "spin_here") && i == 0)
			here = strstr(s.object, "test_native") != NULL;
		if (!strcmp(s.func, "spin_caller"))
			caller = 1;
	}
	return here && caller;
}

static struct native_capture cap;

/* Every spinner's capture came at least n times. */
static int answered(const int *got, int n)
{
	for (int i = 0; i < SPINNERS; i++)
		if (got[i] < n)
			return 0;
	return 1;
}

static void test_requests_and_ring(void)
{
	struct sigaction sa, cur;
	struct native_stats st0, st;
	pthread_t th[SPINNERS], bl;
	int got[SPINNERS] = {0}, shown = 0, rounds = 0, rc, k0;
	char err[128];
	int64_t deadline, end;
	long tid;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_foreign;
	sa.sa_flags = SA_SIGINFO;
	sigaction(NATIVE_SIGNAL, &sa, NULL);
	CHECK(native_request(1, 0, 0) == -EBUSY);
	CHECK(native_start(hook, err, sizeof(err)) == 0);
	native_stats(&st0);

	for (intptr_t i = 0; i < SPINNERS; i++)
		pthread_create(&th[i], NULL, spinner, (void *)i);
	for (int i = 0; i < SPINNERS; i++)
		while (!atomic_load(&spin_tid[i]))
			usleep(1000);
	usleep(20000);

	/* Rounds: every spinner asked at once, the captures taken as they
	 * come.  On a loaded machine a thread may answer late: its request
	 * stays outstanding (-EINPROGRESS) and its capture comes later; so
	 * rounds go on until every spinner answered 50 times (at most 60 s,
	 * a hang guard). */
	end = mono_ns() + 60000000000LL;
	for (rounds = 0; rounds < 50 || (!answered(got, 50) && mono_ns() < end);
	     rounds++) {
		for (int i = 0; i < SPINNERS; i++) {
			rc = native_request(atomic_load(&spin_tid[i]),
					    (uintptr_t)(1000 + i), rounds);
			CHECK(rc == 0 || rc == -EINPROGRESS);
		}
		deadline = mono_ns() + 200000000LL;
		while (native_wait(deadline) == 0) {
			while (native_collect(&cap) == 0) {
				int k = index_of(cap.tid);

				CHECK(k >= 0);
				if (k < 0)
					continue;
				got[k]++;
				/* The hook ran on the thread asked, with its
				 * request's argument. */
				CHECK(cap.extra_len == 3 * sizeof(uint64_t));
				CHECK((long)cap.extra[0] == cap.tid);
				CHECK((long)cap.extra[1] == cap.tid);
				CHECK(cap.extra[2] == (uint64_t)(1000 + k));
				CHECK(cap.ts_ns > 0 && cap.n > 2);
				shown += shows_spin(&cap);
			}
			int all = 1;

			for (int i = 0; i < SPINNERS; i++)
				all &= got[i] > rounds;
			if (all)
				break;
		}
	}
	for (int i = 0; i < SPINNERS; i++)
		CHECK(got[i] >= 40);
	CHECK(shown >= 100);
	native_stats(&st);
	CHECK(st.captured - st0.captured >= 160);
	CHECK(st.dropped == st0.dropped);

	/* Signals from elsewhere reach the previous handler; ours never. */
	tid = atomic_load(&spin_tid[0]);
	for (int i = 0; i < 20; i++) {
		kill(getpid(), NATIVE_SIGNAL);
		native_request(tid, 0, 0);
		usleep(500);
	}
	usleep(20000);
	while (native_collect(&cap) == 0)
		;
	CHECK(atomic_load(&foreign) >= 1 && atomic_load(&foreign) <= 20);

	/* A full ring: captures not collected are not waited for; past
	 * NATIVE_RING they are dropped and counted. */
	native_stats(&st0);
	deadline = mono_ns() + 20000000000LL;
	for (;;) {
		native_stats(&st);
		if (st.captured - st0.captured >= NATIVE_RING &&
		    st.dropped > st0.dropped)
			break;
		if (mono_ns() > deadline)
			break;
		native_request(tid, 0, 0); /* -EINPROGRESS until answered */
		usleep(200);
	}
	CHECK(st.captured - st0.captured == NATIVE_RING);
	CHECK(st.dropped > st0.dropped);
	CHECK(st.ring_max == NATIVE_RING);
	for (int i = 0; i < NATIVE_RING; i++)
		CHECK(native_collect(&cap) == 0);
	CHECK(native_collect(&cap) == -EAGAIN);

	/* A thread blocking the signal: no capture, no second signal. */
	pthread_create(&bl, NULL, blocker, NULL);
	while (atomic_load(&blocked_ready) != 1)
		usleep(1000);
	tid = atomic_load(&blocked_tid);
	CHECK(native_request(tid, 7, 77) == 0);
	CHECK(native_wait(mono_ns() + 20000000LL) == -ETIMEDOUT);
	CHECK(native_request(tid, 7, 78) == -EINPROGRESS);
	CHECK(native_request(999999, 0, 0) == -ESRCH);
	/* Stopping while its signal is pending discards it (nothing of ours
	 * stays pending, native.h); our handler stays. */
	native_stats(&st0);
	k0 = atomic_load(&foreign);
	native_stop();
	sigaction(NATIVE_SIGNAL, NULL, &cur);
	CHECK(cur.sa_sigaction != on_foreign);
	atomic_store(&blocked_ready, 2);
	pthread_join(bl, NULL);
	CHECK(native_wait(mono_ns() + 200000000LL) == -ETIMEDOUT);
	CHECK(atomic_load(&foreign) == k0);
	native_stats(&st);
	CHECK(st.discarded > st0.discarded);
	CHECK(st.chained >= 1);
	atomic_store(&stop, 1);
	for (int i = 0; i < SPINNERS; i++)
		pthread_join(th[i], NULL);
	native_sym_release();
}

/* ---- system calls interrupted by our signal -------------------------- */

static int pipefd[2];
static atomic_long sys_tid;
static atomic_int read_result, read_errno, sleep_eintr, sleeping;

static void *reader(void *arg)
{
	char c;
	ssize_t n;

	(void)arg;
	atomic_store(&sys_tid, syscall(SYS_gettid));
	n = read(pipefd[0], &c, 1);
	atomic_store(&read_errno, n < 0 ? errno : 0);
	atomic_store(&read_result, (int)n + 10);
	return NULL;
}

static void *sleeper(void *arg)
{
	struct timespec ts = {2, 0}, left;

	(void)arg;
	atomic_store(&sys_tid, syscall(SYS_gettid));
	atomic_store(&sleeping, 1);
	if (nanosleep(&ts, &left) < 0 && errno == EINTR)
		atomic_store(&sleep_eintr, 1);
	atomic_store(&sleeping, 2);
	return NULL;
}

/* Waits for the capture of tid and says whether it shows func. */
static int captured_in(long tid, const char *func)
{
	int64_t deadline = mono_ns() + 5000000000LL;
	int seen = 0;

	while (native_wait(deadline) == 0) {
		if (native_collect(&cap) || cap.tid != tid)
			continue;
		for (size_t i = 0; i < cap.n && !seen; i++) {
			struct native_symbol s;

			native_sym_lookup(cap.ips[i], &s);
			seen = strstr(s.func, func) != NULL;
		}
		return seen ? 1 : -1;
	}
	return 0;
}

static void test_syscalls(void)
{
	struct sigaction sa;
	pthread_t th;
	char err[128];
	int r;

	CHECK(native_start(NULL, err, sizeof(err)) == 0);
	/* read() blocked on a pipe: unwound where it waits, and restarted
	 * (SA_RESTART): it returns only with the byte. */
	CHECK(pipe(pipefd) == 0);
	atomic_store(&sys_tid, 0);
	pthread_create(&th, NULL, reader, NULL);
	while (!atomic_load(&sys_tid))
		usleep(1000);
	usleep(50000);
	CHECK(native_request(atomic_load(&sys_tid), 0, 0) == 0);
	r = captured_in(atomic_load(&sys_tid), "read");
	CHECK(r == 1);
	usleep(50000);
	CHECK(atomic_load(&read_result) == 0); /* still reading */
	CHECK(write(pipefd[1], "x", 1) == 1);
	pthread_join(th, NULL);
	CHECK(atomic_load(&read_result) == 11 && atomic_load(&read_errno) == 0);
	close(pipefd[0]);
	close(pipefd[1]);

	/* nanosleep() is never restarted: it returns EINTR (what C code
	 * that does not retry would see; hence idle threads are signalled
	 * only when asked, sampler.h). */
	atomic_store(&sys_tid, 0);
	pthread_create(&th, NULL, sleeper, NULL);
	while (atomic_load(&sleeping) != 1)
		usleep(1000);
	usleep(50000);
	CHECK(native_request(atomic_load(&sys_tid), 0, 0) == 0);
	r = captured_in(atomic_load(&sys_tid), "sleep");
	CHECK(r == 1);
	pthread_join(th, NULL);
	CHECK(atomic_load(&sleep_eintr) == 1);
	native_stop();

	/* The program takes the signal over (last: it keeps it): nothing is
	 * sent any more, and a start is refused while it holds it. */
	CHECK(native_start(NULL, err, sizeof(err)) == 0);
	CHECK(native_signal_held());
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_foreign;
	sa.sa_flags = SA_SIGINFO;
	sigaction(NATIVE_SIGNAL, &sa, NULL);
	CHECK(!native_signal_held());
	CHECK(native_request(syscall(SYS_gettid), 0, 0) == -EPERM);
	CHECK(native_request(syscall(SYS_gettid), 0, 0) == -EBUSY);
	native_stop();
	CHECK(native_start(NULL, err, sizeof(err)) == -EPERM);
	native_sym_release();
}

static void test_symbolize(void)
{
	struct native_symbol s;

	CHECK(native_sym_lookup((uintptr_t)spin_caller + 4, &s) == 0);
	CHECK_STR(s.func, "spin_caller");
	CHECK(s.offset == 3);
	/* libc: a dynamic symbol at least. */
	CHECK(native_sym_lookup((uintptr_t)getpid + 1, &s) == 0);
	CHECK(strstr(s.object, "libc") != NULL);
	/* No object holds it. */
	CHECK(native_sym_lookup(16, &s) == -ENOENT);
	CHECK(!strncmp(s.func, "0x", 2));
	CHECK(native_is_eval((uintptr_t)spin_here + 1) == 0);
	native_sym_release();
}

TEST_MAIN(test_symbolize, test_requests_and_ring, test_syscalls)
