/*
 * pygil: GIL threads that take the GIL on a caller's behalf.  See pygil.h.
 *
 * A call's life: QUEUED (in the queue) -> TAKEN (a GIL thread dequeued it
 * and waits for the GIL) -> RUNNING (fn runs, GIL held) -> DONE.  The caller
 * may give up on it (ABANDONED) in QUEUED (it is unlinked), TAKEN (the GIL
 * thread drops it once it has the GIL) or RUNNING past the hard limit (the
 * GIL thread frees it when fn returns).  Calls are reference counted by
 * caller and GIL thread, under `lock`, so whoever lets go last frees it.
 *
 * Places: a call of the program's code (kind != PYGIL_OURS) holds one of
 * its kind's places from the moment a GIL thread dequeues it (held[], the
 * slot's kind) until its function returns or it is dropped; a thread
 * dequeues only calls whose kind has a place free, so a kind whose calls
 * are all stuck leaves its later calls queued (refused at start_ms) and
 * every other kind's untouched.
 *
 * Interrupting: PyThreadState_SetAsyncExc needs the GIL, so the caller asks
 * another GIL thread to do it (a nested call).  That call and the ending of
 * fn are serialised by the GIL itself: the interrupter only raises while
 * the call is RUNNING, and the GIL thread marks it DONE (and clears any
 * exception raised too late) before it lets the GIL go.
 */
#include "pygil.h"
#include "core/thread.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum call_state { QUEUED, TAKEN, RUNNING, DONE, ABANDONED };

struct call {
	pygil_fn fn;
	void *arg;
	enum call_state state;
	int refs;
	int interrupted;       /* an interrupt was raised in fn */
	int stop;              /* fn should wrap up (pygil_should_stop) */
	unsigned long ident;   /* the running GIL thread's Python ident */
	int kind;	       /* enum pygil_kind */
	char what[PYGIL_WHAT_MAX];
	struct call *next;
};

/* A GIL thread's place: what its thread does now. */
enum slot_state { SLOT_EMPTY, SLOT_IDLE, SLOT_WAITING, SLOT_RUNNING };

struct slot {
	pthread_t thread;
	long tid;		/* read without the lock: atomics */
	enum slot_state state;
	struct timespec since;	/* when its call was taken, then started */
	int kind;		/* its call's, while it holds one */
	char what[PYGIL_WHAT_MAX];
};

_Static_assert(PYGIL_REPR_MAX + PYGIL_CODE_MAX + PYGIL_WALK_MAX <
		       PYGIL_THREADS_MAX,
	       "the agent's own calls must keep a thread");

/* Places of each kind (0: not capped) and its name in messages. */
static const int kind_max[PYGIL_KINDS] = {
	[PYGIL_REPR] = PYGIL_REPR_MAX,
	[PYGIL_CODE] = PYGIL_CODE_MAX,
	[PYGIL_WALK] = PYGIL_WALK_MAX,
};
static const char *const kind_name[PYGIL_KINDS] = {
	[PYGIL_OURS] = "the agent's own work",
	[PYGIL_REPR] = "reprs of the program's objects",
	[PYGIL_CODE] = "code of a client's choosing (evaluate)",
	[PYGIL_WALK] = "walks over the program's objects (memory)",
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;           /* queue and state changes */
static struct call *queue_head, *queue_tail;
static int queued, started, stopping;
static struct slot slots[PYGIL_THREADS_MAX];
static int nthreads, nidle, nwaiting, nrunning;
static int held[PYGIL_KINDS];	      /* places held, by kind */

static __thread struct call *current_call;
static __thread int is_gil_thread;
static __thread int busy_kind = -1; /* of this caller's last -EBUSY */

static void call_unref_locked(struct call *c)
{
	if (--c->refs == 0)
		free(c);
}

/* Is a later than b? */
static int later(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec > b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

static int passed(const struct timespec *ts)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return !later(ts, &now);
}

/* May a thread take c now: is a place of its kind free?  Lock held. */
static int eligible_locked(const struct call *c)
{
	return !kind_max[c->kind] || held[c->kind] < kind_max[c->kind];
}

/* The oldest queued call a thread may take, unlinked; NULL when none. */
static struct call *dequeue_locked(void)
{
	struct call **pp = &queue_head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->next) {
		struct call *c = *pp;

		if (!eligible_locked(c))
			continue;
		*pp = c->next;
		if (queue_tail == c)
			queue_tail = prev;
		c->next = NULL;
		queued--;
		return c;
	}
	return NULL;
}

/* How many queued calls a thread may take now (lock held). */
static int eligible_queued_locked(void)
{
	int n = 0;

	for (const struct call *c = queue_head; c; c = c->next)
		n += eligible_locked(c);
	return n;
}

/* Slot sl takes c's place (lock held), or gives it back (c NULL). */
static void place_locked(struct slot *sl, const struct call *c)
{
	if (c) {
		sl->kind = c->kind;
		held[c->kind]++;
		memcpy(sl->what, c->what, sizeof(sl->what));
		clock_gettime(CLOCK_MONOTONIC, &sl->since);
	} else {
		held[sl->kind]--;
		sl->kind = PYGIL_OURS;
		sl->what[0] = 0;
	}
}

static void unlink_locked(struct call *c)
{
	struct call **pp = &queue_head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			if (queue_tail == c)
				queue_tail = prev;
			queued--;
			return;
		}
	}
}

/* Moves slot sl to state st, keeping the counts (lock held). */
static void slot_set_locked(struct slot *sl, enum slot_state st)
{
	int *count[] = {NULL, &nidle, &nwaiting, &nrunning};

	if (count[sl->state])
		(*count[sl->state])--;
	sl->state = st;
	if (count[st])
		(*count[st])++;
	if (st == SLOT_RUNNING)
		clock_gettime(CLOCK_MONOTONIC, &sl->since);
}

/*
 * Whether the idle thread of sl leaves: beyond PYGIL_THREADS idle ones,
 * the extra threads (started while the others were busy) go.  Lock held;
 * on 1 the slot is already given up and the thread detached.
 */
static int slot_leave_locked(struct slot *sl)
{
	if (stopping || nidle <= PYGIL_THREADS)
		return 0;
	slot_set_locked(sl, SLOT_EMPTY);
	__atomic_store_n(&sl->tid, 0, __ATOMIC_RELAXED);
	nthreads--;
	pthread_detach(sl->thread);
	return 1;
}

/*
 * GIL held, on a GIL thread whose call was interrupted: an interrupt that
 * arrived after fn's last Python code is still pending on this thread and
 * must hit neither the next call nor anything else.  The interpreter
 * itself takes it: a line of Python run here raises it (and, up to 3.12,
 * clears the interpreter-wide signal that PyThreadState_SetAsyncExc set;
 * clearing with PyThreadState_SetAsyncExc(id, NULL) would leave that
 * signal on for good: every thread would take the slow path at each
 * check, and 3.11's tracing of lines stops reaching breakpoints).  Then
 * the exception is dropped.
 */
static void drop_pending_interrupt(void)
{
	PyObject *code, *g, *r = NULL;

	code = Py_CompileString("None", "<probing>", Py_eval_input);
	g = PyDict_New();
	if (code && g)
		r = PyEval_EvalCode(code, g, g);
	Py_XDECREF(r);
	Py_XDECREF(g);
	Py_XDECREF(code);
	PyErr_Clear();
}

static void *gil_thread_main(void *arg)
{
	struct slot *sl = arg;

	is_gil_thread = 1;
	__atomic_store_n(&sl->tid, (long)syscall(SYS_gettid), __ATOMIC_RELAXED);
	pthread_mutex_lock(&lock);
	for (;;) {
		struct call *c = NULL;

		while (!stopping && !(c = dequeue_locked()))
			pthread_cond_wait(&cond, &lock);
		if (stopping)
			break;
		c->state = TAKEN;
		place_locked(sl, c);
		slot_set_locked(sl, SLOT_WAITING);
		pthread_mutex_unlock(&lock);

		/* May block for as long as some thread holds the GIL; the
		 * caller has its own deadline.  Never hold `lock` here. */
		PyGILState_STATE g = PyGILState_Ensure();

		pthread_mutex_lock(&lock);
		if (c->state == ABANDONED || stopping) {
			call_unref_locked(c);
			place_locked(sl, NULL);
			slot_set_locked(sl, SLOT_IDLE);
			pthread_cond_broadcast(&cond);
			pthread_mutex_unlock(&lock);
			PyGILState_Release(g);
			pthread_mutex_lock(&lock);
			if (slot_leave_locked(sl))
				break;
			continue;
		}
		c->state = RUNNING;
		c->ident = PyThread_get_thread_ident();
		slot_set_locked(sl, SLOT_RUNNING);
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);

		current_call = c;
		c->fn(c->arg);
		current_call = NULL;

		pthread_mutex_lock(&lock);
		/* From DONE (or ABANDONED) on no interrupt is raised for c. */
		int was_interrupted = c->interrupted;
		if (c->state != ABANDONED)
			c->state = DONE;
		/* Its place goes back: a queued call of its kind may go. */
		place_locked(sl, NULL);
		slot_set_locked(sl, SLOT_IDLE);
		pthread_cond_broadcast(&cond);
		call_unref_locked(c);
		pthread_mutex_unlock(&lock);
		/* Outside `lock`: Python code may let the GIL go. */
		if (was_interrupted)
			drop_pending_interrupt();
		PyGILState_Release(g);
		pthread_mutex_lock(&lock);
		if (slot_leave_locked(sl))
			break;
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Starts one more GIL thread in an empty slot (lock held).  0 or the
 * pthread_create error. */
static int add_thread_locked(void)
{
	struct slot *sl = NULL;
	int rc;

	for (int i = 0; i < PYGIL_THREADS_MAX && !sl; i++)
		if (slots[i].state == SLOT_EMPTY)
			sl = &slots[i];
	if (!sl)
		return EAGAIN;
	rc = agent_thread_start(&sl->thread, "probing-gil", gil_thread_main,
				sl);
	if (rc)
		return -rc;
	slot_set_locked(sl, SLOT_IDLE);
	nthreads++;
	return 0;
}

int pygil_start(char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (started) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cond, &ca);
	pthread_condattr_destroy(&ca);
	stopping = 0;
	while (nthreads < PYGIL_THREADS && !rc)
		rc = add_thread_locked();
	if (rc)
		snprintf(err, errlen, "pygil: pthread_create: %s",
			 strerror(rc));
	started = nthreads > 0;
	pthread_mutex_unlock(&lock);
	return started ? 0 : -rc;
}

/* Runs inside a GIL thread: raise KeyboardInterrupt in the target call. */
struct interrupt_arg {
	struct call *target;
};

static void do_interrupt(void *p)
{
	struct interrupt_arg *ia = p;
	struct call *c = ia->target;

	pthread_mutex_lock(&lock);
	if (c->state == RUNNING && !c->interrupted) {
		c->interrupted = 1;
		c->stop = 1;
		PyThreadState_SetAsyncExc(c->ident, PyExc_KeyboardInterrupt);
	}
	pthread_mutex_unlock(&lock);
}

/* Called with lock held; drops it while the nested call runs. */
static void interrupt_locked(struct call *c)
{
	struct interrupt_arg ia = {c};
	struct pygil_limits lim = {.start_ms = 1000};

	c->stop = 1;
	c->refs++;
	pthread_mutex_unlock(&lock);
	pygil_run(do_interrupt, &ia, &lim, NULL);
	pthread_mutex_lock(&lock);
	call_unref_locked(c);
}

int pygil_run(pygil_fn fn, void *arg, const struct pygil_limits *lim,
	      int *interrupted)
{
	struct timespec start_dl, run_dl, hard_dl;
	int start_ms = lim && lim->start_ms > 0 ? lim->start_ms : 1000;
	int run_ms = lim ? lim->run_ms : 0;
	int hard_ms = lim ? lim->hard_ms : 0;
	volatile int *cancel = lim ? lim->cancel : NULL;
	int kind = lim ? lim->kind : PYGIL_OURS;
	int rc = 0, asked = 0;
	struct call *c;

	if (interrupted)
		*interrupted = 0;
	if (is_gil_thread)
		return -EDEADLK;
	if (kind < 0 || kind >= PYGIL_KINDS)
		return -EINVAL;
	if (hard_ms <= 0 && run_ms > 0)
		hard_ms = run_ms + 2000;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fn = fn;
	c->arg = arg;
	c->refs = 2;
	c->kind = kind;
	snprintf(c->what, sizeof(c->what), "%s",
		 lim && lim->what ? lim->what : kind_name[kind]);

	pthread_mutex_lock(&lock);
	if (!started || stopping) {
		pthread_mutex_unlock(&lock);
		free(c);
		return -ESHUTDOWN;
	}
	if (queued >= PYGIL_QUEUE_MAX) {
		pthread_mutex_unlock(&lock);
		free(c);
		return -EAGAIN;
	}
	if (queue_tail)
		queue_tail->next = c;
	else
		queue_head = c;
	queue_tail = c;
	queued++;
	/* No thread free and none waiting for the GIL: the threads all run
	 * earlier calls (some may be stuck in C for good).  One more, up to
	 * PYGIL_THREADS_MAX; those beyond PYGIL_THREADS leave when idle. */
	if (eligible_queued_locked() > nidle && nwaiting == 0 &&
	    nthreads < PYGIL_THREADS_MAX)
		add_thread_locked();
	/* Every idle thread looks: the first may find only calls it may not
	 * take yet. */
	pthread_cond_broadcast(&cond);

	/* Phase 1: wait for the GIL, at most start_ms. */
	agent_deadline(&start_dl, CLOCK_MONOTONIC, start_ms);
	while ((c->state == QUEUED || c->state == TAKEN) && !stopping) {
		struct timespec slice;
		agent_deadline(&slice, CLOCK_MONOTONIC, 20);
		pthread_cond_timedwait(&cond, &lock, &slice);
		if (cancel && *cancel)
			break;
		if (passed(&start_dl))
			break;
	}
	if (c->state == QUEUED) {
		unlink_locked(c);
		c->refs--;  /* the GIL thread will never see it */
		/* Never taken: its kind's places were all held, or no thread
		 * waits for the GIL, so it was not the GIL but our own
		 * threads, all running earlier calls. */
		rc = stopping		       ? -ESHUTDOWN
		     : (cancel && *cancel)     ? -ECANCELED
		     : !eligible_locked(c)     ? -EBUSY
		     : nwaiting == 0 && nrunning ? -EBUSY
						 : -ETIMEDOUT;
		if (rc == -EBUSY)
			busy_kind = eligible_locked(c) ? PYGIL_OURS : kind;
		goto out;
	}
	if (c->state == TAKEN) {
		c->state = ABANDONED;
		rc = stopping ? -ESHUTDOWN : (cancel && *cancel) ? -ECANCELED
								  : -ETIMEDOUT;
		goto out;
	}

	/* Phase 2: fn runs; interrupt it after run_ms or on cancel. */
	agent_deadline(&run_dl, CLOCK_MONOTONIC, run_ms > 0 ? run_ms : 0);
	agent_deadline(&hard_dl, CLOCK_MONOTONIC, hard_ms > 0 ? hard_ms : 0);
	while (c->state == RUNNING) {
		struct timespec slice;
		agent_deadline(&slice, CLOCK_MONOTONIC, 20);
		pthread_cond_timedwait(&cond, &lock, &slice);
		if (c->state != RUNNING)
			break;
		if (!asked && ((run_ms > 0 && passed(&run_dl)) ||
			       (cancel && *cancel) || stopping)) {
			struct timespec stop_dl;

			asked = 1;
			interrupt_locked(c);
			/* Cancelled or stopping (not its run limit passed:
			 * that keeps the caller's hard limit): a call blocked
			 * in C holds its caller PYGIL_STOP_WAIT_MS more at
			 * most, whatever limit it had (a cancelled 10 s
			 * evaluate answered at 12 s, after three Ctrl-Cs had
			 * given up on it). */
			agent_deadline(&stop_dl, CLOCK_MONOTONIC,
				       PYGIL_STOP_WAIT_MS);
			if (hard_ms <= 0 ||
			    (((cancel && *cancel) || stopping) &&
			     later(&hard_dl, &stop_dl))) {
				hard_ms = PYGIL_STOP_WAIT_MS;
				hard_dl = stop_dl;
			}
			continue;
		}
		if (hard_ms > 0 && passed(&hard_dl)) {
			c->state = ABANDONED;
			rc = -EINPROGRESS;
			break;
		}
	}
out:
	if (interrupted)
		*interrupted = c->interrupted || asked;
	call_unref_locked(c);
	pthread_mutex_unlock(&lock);
	return rc;
}

int pygil_is_gil_thread(void)
{
	return is_gil_thread;
}

void pygil_nap(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	Py_BEGIN_ALLOW_THREADS
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	Py_END_ALLOW_THREADS
}

int pygil_should_stop(void)
{
	struct call *c = current_call;

	return c ? __atomic_load_n(&c->stop, __ATOMIC_RELAXED) : 0;
}

int pygil_is_own_thread(long tid)
{
	for (int i = 0; i < PYGIL_THREADS_MAX; i++)
		if (tid && __atomic_load_n(&slots[i].tid, __ATOMIC_RELAXED) ==
				   tid)
			return 1;
	return 0;
}

int pygil_running(double *oldest_s)
{
	struct timespec now;
	double oldest = 0;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&lock);
	n = nrunning;
	for (int i = 0; i < PYGIL_THREADS_MAX; i++) {
		const struct slot *sl = &slots[i];
		double age = (double)(now.tv_sec - sl->since.tv_sec) +
			     (double)(now.tv_nsec - sl->since.tv_nsec) / 1e9;

		if (sl->state == SLOT_RUNNING && age > oldest)
			oldest = age;
	}
	pthread_mutex_unlock(&lock);
	if (oldest_s)
		*oldest_s = oldest;
	return n;
}

/* "what, running for 3 s" of slot sl (lock held). */
static int slot_what_locked(const struct slot *sl, const struct timespec *now,
			    char *buf, size_t len)
{
	double age = (double)(now->tv_sec - sl->since.tv_sec) +
		     (double)(now->tv_nsec - sl->since.tv_nsec) / 1e9;

	switch (sl->state) {
	case SLOT_RUNNING:
		return snprintf(buf, len, "%s, running for %.0f s", sl->what,
				age);
	case SLOT_WAITING:
		return snprintf(buf, len, "%s, waiting for the GIL for %.0f s",
				sl->what, age);
	default:
		return snprintf(buf, len, "between calls");
	}
}

void pygil_busy_explain(char *buf, size_t len)
{
	int kind = busy_kind, n = 0, count;
	struct timespec now;
	size_t off;
	double oldest;

	if (!len)
		return;
	if (kind <= PYGIL_OURS || kind >= PYGIL_KINDS) {
		count = pygil_running(&oldest);
		snprintf(buf, len,
			 "no Python thread of the agent is free: %d earlier "
			 "requests are still running (the oldest for %.0f s; "
			 "code blocked in C cannot be interrupted and ends "
			 "when the call it waits in returns)",
			 count, oldest);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&lock);
	if (!held[kind]) {
		/* They ended between the refusal and now. */
		snprintf(buf, len,
			 "the agent's places for %s were all held by earlier "
			 "calls; they are free now: ask again",
			 kind_name[kind]);
		pthread_mutex_unlock(&lock);
		return;
	}
	off = (size_t)snprintf(buf, len,
			       "%d calls that run %s have not ended (code "
			       "blocked in C or on a lock is not stopped by "
			       "an interrupt):",
			       held[kind], kind_name[kind]);
	for (int i = 0; i < PYGIL_THREADS_MAX && off < len; i++) {
		const struct slot *sl = &slots[i];

		if (sl->state != SLOT_WAITING && sl->state != SLOT_RUNNING)
			continue;
		if (sl->kind != kind)
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%s ",
					n++ ? ";" : "");
		if (off < len)
			off += (size_t)slot_what_locked(sl, &now, buf + off,
							len - off);
	}
	if (off < len)
		snprintf(buf + off, len - off,
			 ". At most %d such calls hold the agent's Python "
			 "threads at once, so that its other work goes on: "
			 "this one is refused until one of them ends (end "
			 "what it waits for in the program)",
			 kind_max[kind]);
	pthread_mutex_unlock(&lock);
}

int pygil_thread_what(long tid, char *buf, size_t len)
{
	struct timespec now;
	int found = 0;

	if (!tid)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < PYGIL_THREADS_MAX && !found; i++) {
		const struct slot *sl = &slots[i];

		if (sl->state == SLOT_EMPTY ||
		    __atomic_load_n(&sl->tid, __ATOMIC_RELAXED) != tid)
			continue;
		found = 1;
		if (len)
			slot_what_locked(sl, &now, buf, len);
	}
	pthread_mutex_unlock(&lock);
	return found;
}

void pygil_stop(void)
{
	pthread_t live[PYGIL_THREADS_MAX];
	int n = 0;

	pthread_mutex_lock(&lock);
	if (!started || stopping) {
		pthread_mutex_unlock(&lock);
		return;
	}
	stopping = 1;
	/* Queued calls: their callers see `stopping` and unlink them. */
	pthread_cond_broadcast(&cond);
	for (int i = 0; i < PYGIL_THREADS_MAX; i++)
		if (slots[i].state != SLOT_EMPTY)
			live[n++] = slots[i].thread;
	pthread_mutex_unlock(&lock);

	/* Threads blocked in PyGILState_Ensure while the caller holds the GIL
	 * cannot end now; they drop their call when they get the GIL.
	 * Threads stuck in a call's C code end when it does. */
	for (int i = 0; i < n; i++)
		agent_thread_join(live[i], 1000);
}

void pygil_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	queue_head = queue_tail = NULL;
	queued = 0;
	started = 0;
	stopping = 0;
	nthreads = nidle = nwaiting = nrunning = 0;
	memset(held, 0, sizeof(held));
	memset(slots, 0, sizeof(slots));
}
