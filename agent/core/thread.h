/*
 * thread: how the agent starts and stops its threads, all of them alike.
 *
 * Every agent thread is named "probing-<role>" (what `top -H`, gdb and
 * crash reports show), and blocks every signal: the target's signals
 * are the target's.  Stopping one is the owner's flag and wake-up (they
 * differ: a condition variable, a wake on the loop, an eventfd), then
 * agent_thread_join: a join bounded in time, and a detach when the
 * thread is late — it ends on its own later, and whatever it uses is
 * leaked rather than freed under it.
 *
 * Threads: any.
 */
#ifndef AGENT_THREAD_H
#define AGENT_THREAD_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Names are cut to 15 characters (the kernel's limit). */
#define AGENT_THREAD_NAME_MAX 15

/* Starts fn(arg) on a new thread named name, every signal blocked.
 * Returns 0 or -errno (pthread_create's error, -ENOMEM). */
int agent_thread_start(pthread_t *t, const char *name, void *(*fn)(void *),
		       void *arg);

/* How many agent threads are alive now (started by agent_thread_start
 * and not ended), those left detached by a late join included. */
int agent_threads_live(void);

/* In a forked child: none of the parent's threads is there. */
void agent_threads_atfork_child(void);

/* Waits up to timeout_ms for t to end; when it does not, detaches it.
 * Returns 0 (joined) or -ETIMEDOUT (detached). */
int agent_thread_join(pthread_t t, int timeout_ms);

/* The same with a deadline (CLOCK_REALTIME, agent_deadline), for several
 * threads that share one wait. */
int agent_thread_join_by(pthread_t t, const struct timespec *deadline);

/* *dl = now on clock (CLOCK_REALTIME for pthread_cond_timedwait's
 * default and the joins here, CLOCK_MONOTONIC for a condition variable
 * set to it) + ms (>= 0). */
void agent_deadline(struct timespec *dl, clockid_t clock, int64_t ms);

/* Milliseconds on CLOCK_MONOTONIC, for intervals. */
int64_t agent_now_ms(void);

#endif
