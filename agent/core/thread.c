/*
 * thread: starting and stopping the agent's threads.  See thread.h.
 */
#include "thread.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Agent threads alive: counted from before pthread_create to the end of
 * their function (or pthread_exit), so a count taken at any time covers
 * every thread of ours that the kernel may list. */
static _Atomic int live;

struct start {
	void *(*fn)(void *);
	void *arg;
};

static void thread_ended(void *unused)
{
	(void)unused;
	atomic_fetch_sub(&live, 1);
}

static void *thread_main(void *p)
{
	struct start s = *(struct start *)p;
	void *r;

	free(p);
	pthread_cleanup_push(thread_ended, NULL);
	r = s.fn(s.arg);
	pthread_cleanup_pop(1);
	return r;
}

int agent_thread_start(pthread_t *t, const char *name, void *(*fn)(void *),
		       void *arg)
{
	char cut[AGENT_THREAD_NAME_MAX + 1];
	struct start *s = malloc(sizeof(*s));
	sigset_t all, old;
	int rc;

	if (!s)
		return -ENOMEM;
	s->fn = fn;
	s->arg = arg;
	atomic_fetch_add(&live, 1);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, thread_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		atomic_fetch_sub(&live, 1);
		free(s);
		return -rc;
	}
	snprintf(cut, sizeof(cut), "%s", name);
	pthread_setname_np(*t, cut);
	return 0;
}

int agent_threads_live(void)
{
	return atomic_load(&live);
}

void agent_threads_atfork_child(void)
{
	atomic_store(&live, 0);
}

void agent_deadline(struct timespec *dl, clockid_t clock, int64_t ms)
{
	clock_gettime(clock, dl);
	dl->tv_sec += ms / 1000;
	dl->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}

int64_t agent_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int agent_thread_join_by(pthread_t t, const struct timespec *deadline)
{
	if (pthread_timedjoin_np(t, NULL, deadline) == 0)
		return 0;
	pthread_detach(t);
	return -ETIMEDOUT;
}

int agent_thread_join(pthread_t t, int timeout_ms)
{
	struct timespec dl;

	agent_deadline(&dl, CLOCK_REALTIME, timeout_ms);
	return agent_thread_join_by(t, &dl);
}
