/*
 * thread: starting and stopping the agent's threads.  See thread.h.
 */
#include "thread.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

int agent_thread_start(pthread_t *t, const char *name, void *(*fn)(void *),
		       void *arg)
{
	char cut[AGENT_THREAD_NAME_MAX + 1];
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return -rc;
	snprintf(cut, sizeof(cut), "%s", name);
	pthread_setname_np(*t, cut);
	return 0;
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
