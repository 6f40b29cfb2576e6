/*
 * dbgcleanup: the cleanup after a detach.  See dbgcleanup.h.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "breakpoints.h"
#include "dbgcleanup.h"
#include "dbghooks.h"
#include "dbgoutput.h"
#include "dbgstep.h"
#include "dbgtasks.h"
#include "debugger.h"
#include "python/gilcall.h"
#include "python/variables.h"
#include "server/worker.h"

#define SUBMIT_TRIES 20 /* a worker's tries for the GIL */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int pending;

void dbgcleanup_arm(void)
{
	pthread_mutex_lock(&lock);
	pending = 1;
	pthread_mutex_unlock(&lock);
}

int dbgcleanup_pending(void)
{
	int p;

	pthread_mutex_lock(&lock);
	p = pending;
	pthread_mutex_unlock(&lock);
	return p;
}

/* Takes the pending cleanup when no debugger is active. */
static int take(void)
{
	int todo;

	pthread_mutex_lock(&lock);
	todo = pending && !debugger_active();
	if (todo)
		pending = 0;
	pthread_mutex_unlock(&lock);
	return todo;
}

void dbgcleanup_now(void)
{
	if (!take())
		return;
	dbghooks_reset();
	dbgoutput_remove();
	breakpoints_clear();
	dbgstep_reset();
	variables_reset();
	dbgtasks_release();
}

static void now_gil_fn(void *arg)
{
	(void)arg;
	dbgcleanup_now();
}

int dbgcleanup_run(char *err, size_t errlen)
{
	if (!dbgcleanup_pending())
		return 0;
	return gilcall_ours(now_gil_fn, NULL, 0, err, errlen);
}

static void job_run(struct worker_job *job)
{
	char err[128];

	(void)job;
	/* Retry while the GIL is held elsewhere; a traced line or a
	 * resumed thread may well do it first. */
	for (int i = 0; i < SUBMIT_TRIES; i++)
		if (dbgcleanup_run(err, sizeof(err)) != -ETIMEDOUT)
			break;
}

static void job_done(struct worker_job *job)
{
	free(job);
}

void dbgcleanup_submit(void)
{
	struct worker_job *j = calloc(1, sizeof(*j));

	if (!j)
		return;
	j->run = job_run;
	j->done = job_done;
	if (worker_submit(j))
		free(j);
}

void dbgcleanup_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	pending = 0;
}
