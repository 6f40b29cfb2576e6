/*
 * worker: the request thread pool.  See worker.h.
 */
#include "worker.h"

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/wake.h"
#include "core/thread.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct worker_job *todo_head, *todo_tail;  /* waiting to run */
static struct worker_job *done_head, *done_tail;  /* waiting for done() */
static int ntodo, stopping, started;
static pthread_t threads[WORKER_THREADS];
static int nthreads;
static struct ev_loop *loop;
static struct wake wakeup;

static void push(struct worker_job **head, struct worker_job **tail,
		 struct worker_job *job)
{
	job->next = NULL;
	if (*tail)
		(*tail)->next = job;
	else
		*head = job;
	*tail = job;
}

static void *worker_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		while (!todo_head && !stopping)
			pthread_cond_wait(&cond, &lock);
		if (stopping)
			break;
		struct worker_job *job = todo_head;
		todo_head = job->next;
		if (!todo_head)
			todo_tail = NULL;
		ntodo--;
		pthread_mutex_unlock(&lock);

		job->run(job);

		pthread_mutex_lock(&lock);
		if (stopping)
			break;
		push(&done_head, &done_tail, job);
		wake_send(&wakeup);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Loop thread: hand finished jobs back to their owners. */
static void on_wakeup(void *data)
{
	struct worker_job *job, *next;

	(void)data;
	pthread_mutex_lock(&lock);
	job = done_head;
	done_head = done_tail = NULL;
	pthread_mutex_unlock(&lock);
	for (; job; job = next) {
		next = job->next;
		job->done(job);
	}
}

int worker_start(struct ev_loop *l, char *err, size_t errlen)
{
	int rc = 0;

	if (started)
		return 0;
	loop = l;
	stopping = 0;
	rc = wake_init(&wakeup, loop, on_wakeup, NULL);
	if (rc) {
		snprintf(err, errlen, "worker: cannot make a wake-up pipe: %s",
			 strerror(-rc));
		return rc;
	}

	for (nthreads = 0; nthreads < WORKER_THREADS; nthreads++) {
		rc = -agent_thread_start(&threads[nthreads], "probing-worker",
					 worker_main, NULL);
		if (rc) {
			snprintf(err, errlen, "worker: pthread_create: %s",
				 strerror(rc));
			break;
		}
	}
	started = nthreads > 0;
	return started ? 0 : -rc;
}

int worker_submit(struct worker_job *job)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (!started || stopping)
		rc = -ESHUTDOWN;
	else if (ntodo >= WORKER_QUEUE_MAX)
		rc = -EAGAIN;
	else {
		push(&todo_head, &todo_tail, job);
		ntodo++;
		pthread_cond_signal(&cond);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void worker_stop(int timeout_ms)
{
	struct timespec dl;

	pthread_mutex_lock(&lock);
	if (!started || stopping) {
		pthread_mutex_unlock(&lock);
		return;
	}
	stopping = 1;
	todo_head = todo_tail = NULL;
	ntodo = 0;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);

	agent_deadline(&dl, CLOCK_REALTIME, timeout_ms);
	for (int i = 0; i < nthreads; i++)
		agent_thread_join_by(threads[i], &dl);
	wake_release(&wakeup);
	started = 0;
}

void worker_atfork_child(void)
{
	if (started)
		wake_atfork_child(&wakeup);
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&cond, NULL);
	todo_head = todo_tail = done_head = done_tail = NULL;
	ntodo = 0;
	stopping = 0;
	started = 0;
	nthreads = 0;
	loop = NULL;
}
