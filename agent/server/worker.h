/*
 * worker: a bounded pool of threads for requests that may block (on the GIL,
 * on SQLite), so the server loop never does.
 *
 * The loop thread submits a job; a worker thread runs job->run(); then
 * job->done() runs back on the loop thread (woken through a wake, wake.h).
 * Ownership of the job stays with the submitter; the pool only links it.
 *
 * Threads: worker_submit() and worker_stop() on the loop thread only.
 * Worker threads block every signal.
 */
#ifndef WORKER_H
#define WORKER_H

#include <stddef.h>

struct ev_loop;

#define WORKER_THREADS 4
#define WORKER_QUEUE_MAX 256

struct worker_job {
	void (*run)(struct worker_job *job);   /* on a worker thread */
	void (*done)(struct worker_job *job);  /* then on the loop thread */
	struct worker_job *next;               /* private */
};

/* Starts the threads and hooks the completion watcher into loop. */
int worker_start(struct ev_loop *loop, char *err, size_t errlen);

/* Queues job.  Returns 0, or -EAGAIN when WORKER_QUEUE_MAX jobs wait
 * (done() is then never called), -ESHUTDOWN after stop. */
int worker_submit(struct worker_job *job);

/* Stops taking jobs and joins the threads for at most timeout_ms in all.
 * Queued jobs are dropped; a job still running is left to finish on its
 * own.  Neither gets done() (the loop is going away): at interpreter exit
 * their memory is left to the process. */
void worker_stop(int timeout_ms);

/* In a forked child: forget the parent's threads and queues. */
void worker_atfork_child(void);

#endif
