/*
 * native and native_sym: capturing another thread's stack from its signal
 * handler, symbolizing it, holding the thread while a callback runs,
 * chaining signals that are not ours to the previous handler, a thread
 * that blocks the signal (given up on; its late handler does nothing),
 * a storm of foreign signals while capturing, and restoring the previous
 * handler.
 */
#include "native.h"
#include "native_sym.h"
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop, foreign, blocked_ready;
static atomic_long spin_tid, blocked_tid;
static volatile unsigned long sink;

static void on_foreign(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	atomic_fetch_add(&foreign, 1);
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
	(void)arg;
	atomic_store(&spin_tid, syscall(SYS_gettid));
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
	/* Let the pending signal in: our handler sees a withdrawn request. */
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	atomic_store(&blocked_ready, 3);
	return NULL;
}

static int held_calls;

static void held(void *arg)
{
	unsigned long before = sink;

	/* The thread waits in the handler meanwhile: its loop stands still
	 * (it would add to sink thousands of times in 200 us). */
	(void)arg;
	usleep(200);
	CHECK(sink == before);
	held_calls++;
}

static void test_capture_and_chain(void)
{
	struct sigaction sa, cur;
	struct native_stats st;
	pthread_t th, bl;
	uintptr_t ips[NATIVE_DEPTH_MAX];
	char err[128];
	size_t n = 0;
	int found = 0, caller = 0;
	long tid;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_foreign;
	sa.sa_flags = SA_SIGINFO;
	sigaction(NATIVE_SIGNAL, &sa, NULL);
	CHECK(native_capture(1, ips, NATIVE_DEPTH_MAX, &n, NULL, NULL) ==
	      -EBUSY);
	CHECK(native_start(err, sizeof(err)) == 0);

	pthread_create(&th, NULL, spinner, NULL);
	while (!atomic_load(&spin_tid))
		usleep(1000);
	usleep(20000);
	tid = atomic_load(&spin_tid);
	/* On a loaded machine a capture may time out (the thread lost its
	 * CPU): try until one shows the spinning function. */
	for (int k = 0; k < 500 && !found; k++) {
		if (native_capture(tid, ips, NATIVE_DEPTH_MAX, &n, held,
				   &tid) != 0)
			continue;
		CHECK(n > 2);
		for (size_t i = 0; i < n; i++) {
			struct native_symbol s;

			native_sym_lookup(ips[i], &s);
			if (!strcmp(s.func, "spin_here") && i == 0) {
				found = 1;
				CHECK(strstr(s.object, "test_native") != NULL);
			}
			if (!strcmp(s.func, "spin_caller"))
				caller = 1;
		}
	}
	CHECK(found && caller);
	CHECK(held_calls > 0);
	CHECK(native_is_eval((uintptr_t)spin_here + 1) == 0);

	/* Signals from elsewhere reach the previous handler; ours never. */
	for (int i = 0; i < 20; i++) {
		kill(getpid(), NATIVE_SIGNAL);
		native_capture(tid, ips, NATIVE_DEPTH_MAX, &n, NULL, NULL);
	}
	usleep(20000);
	CHECK(atomic_load(&foreign) >= 1 && atomic_load(&foreign) <= 20);

	/* A thread blocking the signal: given up on, no harm later. */
	pthread_create(&bl, NULL, blocker, NULL);
	while (atomic_load(&blocked_ready) != 1)
		usleep(1000);
	tid = atomic_load(&blocked_tid);
	CHECK(native_capture(tid, ips, NATIVE_DEPTH_MAX, &n, held, &tid) ==
	      -ETIMEDOUT);
	CHECK(native_capture(999999, ips, NATIVE_DEPTH_MAX, &n, NULL, NULL) ==
	      -ESRCH);
	/* While its signal is pending, stopping leaves our handler in place
	 * (SIGPROF's default would end the process). */
	native_stop();
	sigaction(NATIVE_SIGNAL, NULL, &cur);
	CHECK(cur.sa_sigaction != on_foreign);
	atomic_store(&blocked_ready, 2);
	pthread_join(bl, NULL);
	for (int k = 0; k < 1000; k++) {
		native_stats(&st);
		if (st.late >= 1)
			break;
		usleep(1000);
	}
	CHECK(st.late >= 1 && st.timeouts >= 1 && st.captured >= 1);
	CHECK(st.chained >= 1);
	/* Once nothing of ours is pending, the previous handler comes
	 * back. */
	for (int k = 0; k < 1000; k++) {
		CHECK(native_start(err, sizeof(err)) == 0);
		native_stop();
		sigaction(NATIVE_SIGNAL, NULL, &cur);
		if (cur.sa_sigaction == on_foreign)
			break;
		usleep(1000);
	}
	CHECK(cur.sa_sigaction == on_foreign);

	atomic_store(&stop, 1);
	pthread_join(th, NULL);
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
	native_sym_release();
}

TEST_MAIN(test_symbolize, test_capture_and_chain)
