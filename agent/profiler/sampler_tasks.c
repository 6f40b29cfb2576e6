/*
 * sampler_tasks: see sampler_tasks.h.
 */
#include "sampler_tasks.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "cpython/cpython.h"
#include "python/pytasks.h"
#include "sampler_impl.h"
#include "sampler_intern.h"

/* A map: the tasks of one refresh. */
struct tmap {
	struct pytask_roots roots;
	uint32_t *frames;	     /* each root's interned frame, 0 not yet */
	struct sampler_map by_frame; /* frame address -> index + 1 */
	struct sampler_map threads;  /* the loops' threads: ident + 1 -> 1 */
};

static struct sampler_intern *in;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tmap *fresh; /* lock: made by the recorder, not taken yet */
/* lock: why tasks are not known — the last listing's failure (cleared by
 * one that works), and the tasks the last map left out */
static char fail_note[300], left_note[160];
static int on;		   /* atomic: a run wants tasks */
static int loops;	   /* atomic: a loop was seen running */
static int started;	   /* atomic: a run started since the last refresh */

/* Under refresh_lock (the recorder thread, sampler_start). */
static pthread_mutex_t refresh_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t refreshed_ms = -SAMPLER_TASKS_EVERY_MAX_MS;
static int64_t every_ms = SAMPLER_TASKS_EVERY_MS;
static int warned;

/* Sampler thread only. */
static struct tmap *cur;
static uint32_t names; /* task frames interned, in all */
static uint32_t past_names;

static void tmap_free(struct tmap *m)
{
	if (!m)
		return;
	pytasks_roots_release(&m->roots);
	free(m->frames);
	sampler_map_release(&m->by_frame);
	sampler_map_release(&m->threads);
	free(m);
}

int sampler_tasks_init(struct sampler_intern *intern)
{
	in = intern;
	return 0;
}

void sampler_tasks_start(int want)
{
	pthread_mutex_lock(&lock);
	fail_note[0] = left_note[0] = '\0';
	pthread_mutex_unlock(&lock);
	if (!want) {
		sampler_tasks_stop();
		return;
	}
	__atomic_store_n(&on, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
}

void sampler_tasks_stop(void)
{
	struct tmap *old;

	__atomic_store_n(&on, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&lock);
	old = fresh;
	fresh = NULL;
	pthread_mutex_unlock(&lock);
	tmap_free(old);
}

void sampler_tasks_loop_seen(void)
{
	__atomic_store_n(&loops, 1, __ATOMIC_RELEASE);
}

/* The map of roots r (taken over), or NULL when out of memory. */
static struct tmap *tmap_new(struct pytask_roots *r)
{
	struct tmap *m = calloc(1, sizeof(*m));

	if (!m || !(m->frames = calloc(r->n ? r->n : 1, sizeof(uint32_t)))) {
		free(m);
		pytasks_roots_release(r);
		return NULL;
	}
	m->roots = *r;
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < m->roots.n; i++) {
		const struct pytask_root *t = &m->roots.r[i];

		if (!t->frame)
			continue;
		if (sampler_map_put(&m->by_frame, t->frame, (uint32_t)i + 1) ||
		    sampler_map_put(&m->threads, t->thread_id + 1, 1)) {
			tmap_free(m);
			return NULL;
		}
	}
	return m;
}

/* Lock held: the map made again, when due. */
static void refresh(int force)
{
	struct pytask_roots r;
	struct tmap *m, *old;
	int64_t t = sampler_mono_ns() / 1000000;
	char err[256];

	if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&loops, __ATOMIC_ACQUIRE))
		return;
	if (!force && t - refreshed_ms < every_ms &&
	    !__atomic_exchange_n(&started, 0, __ATOMIC_ACQ_REL))
		return;
	refreshed_ms = t;
	if (pytasks_roots(&r,
			  force ? SAMPLER_TASKS_START_WAIT_MS
				: SAMPLER_TASKS_GIL_WAIT_MS,
			  err, sizeof(err))) {
		/* The run's start could not wait longer: the recorder's
		 * next cycle tries (started stays). */
		if (force)
			return;
		/* The next refresh tries again; the map stays as it was (each
		 * of its tasks is checked still to be itself). */
		if (!warned++)
			log_warn("profiler: asyncio tasks not listed: %s", err);
		pthread_mutex_lock(&lock);
		snprintf(fail_note, sizeof(fail_note),
			 "asyncio's tasks could not be "
			 "listed: %s",
			 err);
		pthread_mutex_unlock(&lock);
		return;
	}
	if (force) /* the recorder need not list them again at once */
		__atomic_store_n(&started, 0, __ATOMIC_RELEASE);
	every_ms = (int64_t)(r.took_ms * SAMPLER_TASKS_SHARE);
	if (every_ms < SAMPLER_TASKS_EVERY_MS)
		every_ms = SAMPLER_TASKS_EVERY_MS;
	if (every_ms > SAMPLER_TASKS_EVERY_MAX_MS)
		every_ms = SAMPLER_TASKS_EVERY_MAX_MS;
	m = tmap_new(&r);
	if (!m)
		return;
	pthread_mutex_lock(&lock);
	/* A run that ended meanwhile wants none. */
	if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&lock);
		tmap_free(m);
		return;
	}
	old = fresh;
	fresh = m;
	if (m->roots.left_out)
		snprintf(left_note, sizeof(left_note),
			 "%zu asyncio tasks past the %d listed were not "
			 "attributed (those waiting on nothing came first)",
			 m->roots.left_out, PYTASKS_MAX);
	else
		left_note[0] = '\0';
	fail_note[0] = '\0';
	pthread_mutex_unlock(&lock);
	tmap_free(old); /* never taken: the sampler did not tick since */
}

void sampler_tasks_refresh(int force)
{
	pthread_mutex_lock(&refresh_lock);
	refresh(force);
	pthread_mutex_unlock(&refresh_lock);
}

void sampler_tasks_adopt(void)
{
	struct tmap *m;

	if (!__atomic_load_n(&on, __ATOMIC_ACQUIRE)) {
		tmap_free(cur);
		cur = NULL;
		return;
	}
	if (!__atomic_load_n(&fresh, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&lock);
	m = fresh;
	fresh = NULL;
	pthread_mutex_unlock(&lock);
	if (!m)
		return;
	tmap_free(cur);
	cur = m;
}

/* The interned frame naming root i of the map: its name while fewer
 * than SAMPLER_TASK_NAMES_MAX were interned, else one for the rest. */
static uint32_t task_frame(size_t i)
{
	struct sampler_intern_counts before, after;
	char past[64];
	uint32_t fn;

	if (cur->frames[i])
		return cur->frames[i];
	if (names >= SAMPLER_TASK_NAMES_MAX) {
		if (!past_names) {
			snprintf(past, sizeof(past),
				 "[more than %d task names]",
				 SAMPLER_TASK_NAMES_MAX);
			fn = sampler_intern_func(in, SAMPLER_TASK, past, "");
			past_names = fn ? sampler_intern_frame(in, fn, -1) : 0;
		}
		return cur->frames[i] = past_names;
	}
	sampler_intern_counts(in, &before);
	fn = sampler_intern_func(in, SAMPLER_TASK, cur->roots.r[i].name, "");
	sampler_intern_counts(in, &after);
	if (after.funcs > before.funcs)
		names++;
	return cur->frames[i] = fn ? sampler_intern_frame(in, fn, -1) : 0;
}

long sampler_tasks_find(uint64_t thread_id, const struct cpython_raw *raw,
			size_t n, uint32_t *frame)
{
	uint32_t one;

	*frame = 0;
	if (!cur || !cur->roots.n ||
	    sampler_map_get(&cur->threads, thread_id + 1, &one) < 0)
		return -1;
	for (size_t pos = 0; pos < n; pos++) {
		size_t i = n - 1 - pos;
		const struct pytask_root *t;
		uint32_t idx;

		if (sampler_map_get(&cur->by_frame, raw[i].frame, &idx) < 0)
			continue;
		t = &cur->roots.r[idx - 1];
		/* The same frame still (a frame of another coroutine made at
		 * the address has another code object), of the same task (a
		 * task of the same coroutine made since, its frame where the
		 * ended one's was, has another name, or the same name in
		 * another object: not yet hashed): else it is a task the map
		 * does not know yet. */
		if (raw[i].code != t->code || t->thread_id != thread_id ||
		    (t->name_field &&
		     !cpython.read.named_same(t->task, t->task_type,
					      t->name_field, t->name_len,
					      t->name_hash)))
			return -1;
		*frame = task_frame(idx - 1);
		return *frame ? (long)i : -1;
	}
	return -1;
}

void sampler_tasks_note(char *out, size_t len)
{
	pthread_mutex_lock(&lock);
	snprintf(out, len, "%s%s%s", left_note,
		 left_note[0] && fail_note[0] ? "; " : "", fail_note);
	pthread_mutex_unlock(&lock);
}

void sampler_tasks_atfork_child(void)
{
	/* The parent's maps: left as they are (their memory is the
	 * child's copy, freed by no one: a fork while a run records
	 * tasks); the child runs none until it starts one. */
	pthread_mutex_init(&lock, NULL);
	pthread_mutex_init(&refresh_lock, NULL);
	fresh = NULL;
	cur = NULL;
	on = 0;
	started = 0;
	fail_note[0] = left_note[0] = '\0';
	/* The child's agent starts with tables of its own: the parent's
	 * frames are not in them; and it may run no loop. */
	names = 0;
	past_names = 0;
	loops = 0;
	warned = 0;
	refreshed_ms = -SAMPLER_TASKS_EVERY_MAX_MS;
	every_ms = SAMPLER_TASKS_EVERY_MS;
}
