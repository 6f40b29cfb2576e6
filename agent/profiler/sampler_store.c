/*
 * sampler_store: the recorder thread.  See sampler_store.h.
 */
#include "sampler_store.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "fdown.h"
#include "core/log.h"
#include "core/thread.h"
#include "cpython/cpython.h"
#include "native_sym.h"
#include "python/snapshot.h"
#include "recorder.h"
#include "sampler_intern.h"
#include "sampler_tasks.h"
#include "store.h"

#define NAMES_EVERY_MS 1000     /* at most this often with the GIL, */
#define NAMES_WAIT_MS 50	/* waiting this long for it */
#define NAMES_FLUSH_WAIT_MS 500 /* when flushing */
#define NAMES_TRIES 30	    /* then a thread keeps the kernel's name */
#define THREADS_KNOWN_MAX 65536

static const char schema_sql[] =
	"CREATE TABLE profile.frames(frame_id INTEGER PRIMARY KEY, "
	"func TEXT, file TEXT, line INTEGER, kind TEXT, addr INTEGER);"
	"CREATE TABLE profile.stacks(stack_id INTEGER PRIMARY KEY, "
	"parent_id INTEGER, frame_id INTEGER);"
	"CREATE TABLE profile.threads(thread_id INTEGER PRIMARY KEY, "
	"native_id INTEGER, name TEXT, first_ts REAL, last_ts REAL);";

static const struct recorder_opts samples_opts = {
	.schema = "profile",
	.name = "samples",
	.columns = "ts REAL, thread_id INTEGER, native_id INTEGER, "
		   "stack_id INTEGER, state TEXT, gil INTEGER, cpu_us INTEGER, "
		   "task_frame_id INTEGER, task_stack_id INTEGER",
	.doc = "stack samples: time, thread, stack_id, state (running, "
	       "gil_wait, idle), GIL held, CPU time since the previous one, "
	       "the asyncio task it ran (task_frame_id: its frame, kind "
	       "task; task_stack_id: its coroutine's node of stack_id)",
};

#define SAMPLE_BYTES 72 /* a row and its index entry, roughly */

static const struct {
	const char *name, *doc;
} tables[] = {
	{"stacks", "interned stacks: stack_id = (parent_id, frame_id), "
		   "frame_id the innermost; parent_id 0 at the root"},
	{"frames", "interned frames: func, file, line, kind (python, "
		   "native, task: an asyncio task's name)"},
	{"threads", "threads seen by the profiler, with their names"},
};

enum { S_FRAME, S_STACK, S_THREAD, S_THREAD_SEEN, S_THREAD_NAME, S_COUNT };

static const char *const stmt_sql[S_COUNT] = {
	[S_FRAME] = "INSERT OR REPLACE INTO profile.frames VALUES "
		    "(?1, ?2, ?3, ?4, ?5, ?6)",
	[S_STACK] = "INSERT OR REPLACE INTO profile.stacks VALUES (?1, ?2, ?3)",
	[S_THREAD] = "INSERT OR IGNORE INTO profile.threads VALUES "
		     "(?1, ?2, ?3, ?4, ?4)",
	[S_THREAD_SEEN] = "UPDATE profile.threads SET last_ts = ?2, "
			  "native_id = ?3 WHERE thread_id = ?1",
	[S_THREAD_NAME] = "UPDATE profile.threads SET name = ?2 "
			  "WHERE thread_id = ?1",
};

struct known {
	uint64_t thread_id;
	long native_id;
	int named, tries;
	double last_ts; /* in the batch being written, 0 when unseen */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	int started, stopping;
	pthread_t thread;
	struct store *st;
	struct sampler_intern *in;
	struct store_stmt *stmt[S_COUNT];
	struct recorder *samples;
	struct sampler_sample *pending, *batch;
	size_t npending;
	uint64_t flush_want, flush_done;
	struct sampler_store_stats stats;
	/* Recorder thread only. */
	uint32_t frames_done, stacks_done;
	struct known *known;
	size_t nknown;
	struct sampler_map known_map; /* thread_id + 1 -> index */
	struct timespec names_at;
	uint64_t rng;
} R = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *state_name(int s)
{
	return s == SAMPLER_GIL_WAIT ? "gil_wait"
	       : s == SAMPLER_IDLE   ? "idle"
				     : "running";
}

/* Reports the first error of a batch (log and stats), once. */
static void batch_error(const char *what, const char *err)
{
	pthread_mutex_lock(&R.lock);
	R.stats.errors++;
	snprintf(R.stats.last_error, sizeof(R.stats.last_error), "%s: %s",
		 what, err);
	pthread_mutex_unlock(&R.lock);
	log_warn("profile recorder: %s: %s", what, err);
}

/* The kernel's name of thread tid ("MainThread" for the main one). */
static void comm_name(long tid, int is_main, char *out, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(out, len, "%s", is_main ? "MainThread" : "");
	if (is_main)
		return;
	snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
	f = fdown_fopen(path);
	if (f) {
		if (!fgets(out, (int)len, f))
			out[0] = '\0';
		fclose(f);
		out[strcspn(out, "\n")] = '\0';
	}
	if (!out[0])
		snprintf(out, len, "thread %ld", tid);
}

/* A frame to write, symbolized before the transaction starts (reading
 * an object's symbol table the first time takes a while). */
struct frame_row {
	uint32_t id;
	const char *func, *file; /* borrowed from the intern table, or */
	char *own_func, *own_file; /* owned (native frames) */
	int line;
	int native;
	int task; /* an asyncio task's name */
	uint64_t addr;
};

#define FRAMES_PER_BATCH 65536

/* The frames interned since the last batch, at most FRAMES_PER_BATCH
 * (the rest go with the next one).  *n rows; NULL when none or out of
 * memory. */
static struct frame_row *collect_frames(size_t *n)
{
	struct sampler_intern_counts c;
	struct frame_row *rows;
	uint32_t from = R.frames_done + 1, to;

	*n = 0;
	sampler_intern_counts(R.in, &c);
	if (c.frames < from)
		return NULL;
	to = c.frames - from + 1 > FRAMES_PER_BATCH
		     ? from + FRAMES_PER_BATCH - 1
		     : c.frames;
	rows = calloc(to - from + 1, sizeof(*rows));
	if (!rows)
		return NULL;
	for (uint32_t id = from; id <= to; id++) {
		struct frame_row *r = &rows[*n];
		enum sampler_kind kind;
		uint32_t fn;

		if (sampler_intern_frame_get(R.in, id, &fn, &r->line,
					     &r->addr))
			break;
		r->id = id;
		(*n)++;
		if (fn) {
			if (sampler_intern_func_get(R.in, fn, &kind, &r->func,
						    &r->file))
				r->func = r->file = "?";
			else {
				/* (native: a system call) */
				r->native = kind == SAMPLER_NATIVE;
				r->task = kind == SAMPLER_TASK;
			}
			continue;
		}
		{
			struct native_symbol ns;

			native_sym_lookup((uintptr_t)r->addr, &ns);
			r->own_func = strdup(ns.func);
			r->own_file = strdup(ns.object);
			r->func = r->own_func ? r->own_func : "?";
			r->file = r->own_file ? r->own_file : "";
			r->native = 1;
		}
	}
	return rows;
}

static void free_frames(struct frame_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(rows[i].own_func);
		free(rows[i].own_file);
	}
	free(rows);
}

/* The frames (collected) and stacks interned since the last batch. */
static int write_interned(const struct frame_row *rows, size_t nrows,
			  uint32_t *frames_done, uint32_t *stacks_done,
			  char *err, size_t errlen)
{
	struct sampler_intern_counts c;
	int rc = 0;

	*frames_done = R.frames_done;
	*stacks_done = R.stacks_done;

	for (size_t i = 0; i < nrows && !rc; i++) {
		struct store_stmt *s = R.stmt[S_FRAME];
		const struct frame_row *r = &rows[i];

		store_stmt_int(s, 1, r->id);
		store_stmt_text(s, 2, r->func);
		store_stmt_text(s, 3, r->file);
		if (r->line >= 0)
			store_stmt_int(s, 4, r->line);
		store_stmt_text(s, 5, r->native ? "native"
				      : r->task ? "task"
						: "python");
		if (r->native)
			store_stmt_int(s, 6, (int64_t)r->addr);
		rc = store_stmt_run(s, err, errlen);
		if (!rc)
			*frames_done = r->id;
	}
	sampler_intern_counts(R.in, &c);
	for (uint32_t id = R.stacks_done + 1; id <= c.stacks && !rc; id++) {
		struct store_stmt *s = R.stmt[S_STACK];
		uint32_t parent, frame;

		if (sampler_intern_stack_get(R.in, id, &parent, &frame))
			continue;
		store_stmt_int(s, 1, id);
		store_stmt_int(s, 2, parent);
		store_stmt_int(s, 3, frame);
		rc = store_stmt_run(s, err, errlen);
		if (!rc)
			*stacks_done = id;
	}
	return rc;
}

/* Remembers the threads of a batch; new ones get a row. */
static int write_threads(const struct sampler_sample *b, size_t n, char *err,
			 size_t errlen)
{
	uint64_t main_id = 0;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		uint32_t k;

		if (sampler_map_get(&R.known_map, b[i].thread_id + 1, &k) == 0) {
			R.known[k].last_ts = b[i].ts;
			R.known[k].native_id = b[i].native_id;
			continue;
		}
		if (R.nknown >= THREADS_KNOWN_MAX)
			continue;
		if (!main_id)
			main_id = cpython.read.main_thread();
		{
			struct known *kn = &R.known[R.nknown];
			struct store_stmt *s = R.stmt[S_THREAD];
			char name[64];

			if (sampler_map_put(&R.known_map, b[i].thread_id + 1,
					    (uint32_t)R.nknown) < 0)
				continue;
			R.nknown++;
			memset(kn, 0, sizeof(*kn));
			kn->thread_id = b[i].thread_id;
			kn->native_id = b[i].native_id;
			kn->named = b[i].thread_id == main_id;
			comm_name(b[i].native_id, kn->named, name,
				  sizeof(name));
			store_stmt_int(s, 1, (int64_t)b[i].thread_id);
			store_stmt_int(s, 2, b[i].native_id);
			store_stmt_text(s, 3, name);
			store_stmt_real(s, 4, b[i].ts);
			rc = store_stmt_run(s, err, errlen);
			kn->last_ts = b[i].ts;
		}
	}
	for (size_t k = 0; k < R.nknown && !rc; k++) {
		struct store_stmt *s = R.stmt[S_THREAD_SEEN];

		if (!R.known[k].last_ts)
			continue;
		store_stmt_int(s, 1, (int64_t)R.known[k].thread_id);
		store_stmt_real(s, 2, R.known[k].last_ts);
		store_stmt_int(s, 3, R.known[k].native_id);
		rc = store_stmt_run(s, err, errlen);
		R.known[k].last_ts = 0;
	}
	return rc;
}

static int write_samples(const struct sampler_sample *b, size_t n, char *err,
			 size_t errlen)
{
	struct store_stmt *s = recorder_stmt(R.samples);
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		store_stmt_real(s, 1, b[i].ts);
		store_stmt_int(s, 2, (int64_t)b[i].thread_id);
		store_stmt_int(s, 3, b[i].native_id);
		store_stmt_int(s, 4, b[i].stack);
		store_stmt_text(s, 5, state_name(b[i].state));
		store_stmt_int(s, 6, b[i].gil);
		if (b[i].cpu_us >= 0)
			store_stmt_int(s, 7, b[i].cpu_us);
		if (b[i].task_frame) {
			store_stmt_int(s, 8, b[i].task_frame);
			store_stmt_int(s, 9, b[i].task_stack);
		}
		/* (a task's two numbers: 8 bytes more) */
		rc = recorder_add(R.samples,
				  SAMPLE_BYTES + (b[i].task_frame ? 8 : 0), err,
				  errlen);
	}
	return rc;
}

/* threading's names, with the GIL, for threads still unnamed: at most
 * once a second, waiting NAMES_WAIT_MS for the GIL; when flushing (the
 * profiler stops, or its samples are about to be read) at once and
 * waiting longer: the last chance while the threads are known (a busy
 * machine and GIL-bound threads made every short wait fail). */
static void resolve_names(int flushing)
{
	struct pystack_opts o = {.max_depth = 1};
	struct snapshot_gil gil;
	struct pystack ps;
	struct timespec now;
	char err[256];
	int want = 0;

	for (size_t k = 0; k < R.nknown; k++)
		if (!R.known[k].named && R.known[k].tries < NAMES_TRIES)
			want = 1;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (!want || (!flushing && (now.tv_sec - R.names_at.tv_sec) * 1000 +
						   (now.tv_nsec -
						    R.names_at.tv_nsec) /
							   1000000 <
					   NAMES_EVERY_MS))
		return;
	R.names_at = now;
	if (snapshot_stacks(&ps, &o,
			    flushing ? NAMES_FLUSH_WAIT_MS : NAMES_WAIT_MS,
			    NULL, &gil, err, sizeof(err)))
		return;
	for (size_t i = 0; i < ps.nthreads && gil.acquired; i++) {
		uint32_t k;
		struct store_stmt *s = R.stmt[S_THREAD_NAME];

		if (sampler_map_get(&R.known_map, ps.threads[i].thread_id + 1,
				    &k) < 0 ||
		    R.known[k].named)
			continue;
		store_stmt_int(s, 1, (int64_t)ps.threads[i].thread_id);
		store_stmt_text(s, 2, ps.threads[i].name);
		if (store_stmt_run(s, err, sizeof(err)) == 0)
			R.known[k].named = 1;
	}
	for (size_t k = 0; k < R.nknown; k++)
		if (!R.known[k].named)
			R.known[k].tries++;
	pystack_release(&ps);
}

static void write_batch(const struct sampler_sample *b, size_t n)
{
	struct recorder_stats rs;
	struct frame_row *rows;
	uint32_t frames_done, stacks_done;
	size_t nrows;
	char err[256];
	int rc;

	rows = collect_frames(&nrows);
	/* The bounds may have changed (probing config). */
	recorder_limits(R.samples,
			(size_t)config_int("profile.retention_rows"),
			(size_t)config_int("profile.retention_bytes"));
	rc = recorder_begin(R.samples, err, sizeof(err));
	if (rc) {
		free_frames(rows, nrows);
		batch_error("begin", err);
		return;
	}
	if ((rc = write_interned(rows, nrows, &frames_done, &stacks_done, err,
				 sizeof(err))) ||
	    (rc = write_samples(b, n, err, sizeof(err))) ||
	    (rc = write_threads(b, n, err, sizeof(err)))) {
		recorder_rollback(R.samples);
		free_frames(rows, nrows);
		batch_error("batch", err);
		return;
	}
	free_frames(rows, nrows);
	/* Trims the oldest samples past the bounds, then commits. */
	if ((rc = recorder_commit(R.samples, err, sizeof(err)))) {
		batch_error("commit", err);
		return;
	}
	/* Only what is committed counts as written. */
	R.frames_done = frames_done;
	R.stacks_done = stacks_done;
	recorder_stats(R.samples, &rs);
	pthread_mutex_lock(&R.lock);
	R.stats.written += n;
	R.stats.batches++;
	R.stats.deleted = rs.trimmed;
	pthread_mutex_unlock(&R.lock);
}

static void *recorder_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&R.lock);
	for (;;) {
		struct timespec dl;
		struct sampler_sample *b;
		uint64_t want;
		size_t n;
		int stop;

		/* Asleep while there is nothing to do (no wake-ups in an
		 * idle target); then a period for a batch to gather. */
		while (!R.stopping && !R.npending &&
		       R.flush_want == R.flush_done)
			pthread_cond_wait(&R.wake, &R.lock);
		if (!R.stopping && R.flush_want == R.flush_done) {
			/* Jittered (50%..150%), so that the recorder's CPU use
			 * does not keep step with the target's periodic work
			 * and bias the samples taken meanwhile. */
			R.rng = R.rng * 6364136223846793005ULL +
				1442695040888963407ULL;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_nsec += (long)(SAMPLER_STORE_PERIOD_MS * 1000000L *
					     (0.5 + (double)(R.rng >> 11) /
							    (double)(1ULL << 53)));
			while (dl.tv_nsec >= 1000000000L) {
				dl.tv_sec++;
				dl.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&R.wake, &R.lock, &dl);
		}
		stop = R.stopping;
		want = R.flush_want;
		b = R.pending;
		n = R.npending;
		R.pending = R.batch;
		R.batch = b;
		R.npending = 0;
		pthread_mutex_unlock(&R.lock);
		write_batch(b, n);
		resolve_names(want != R.flush_done || stop);
		pthread_mutex_lock(&R.lock);
		R.flush_done = want;
		pthread_cond_broadcast(&R.done);
		if (stop)
			break;
		/* After the flush is answered: a reader does not wait for
		 * the tasks' listing. */
		pthread_mutex_unlock(&R.lock);
		sampler_tasks_refresh(0);
		pthread_mutex_lock(&R.lock);
	}
	pthread_mutex_unlock(&R.lock);
	return NULL;
}

int sampler_store_init(struct store *st, struct sampler_intern *in, char *err,
		       size_t errlen)
{
	pthread_condattr_t ca;
	int rc;

	if (R.started)
		return 0;
	rc = store_exec(st, schema_sql, err, errlen);
	if (rc)
		return rc;
	rc = recorder_new(st, &samples_opts, &R.samples, err, errlen);
	if (rc)
		return rc;
	/* Time windows (probing/flamegraph) select by ts. */
	rc = store_exec(st, "CREATE INDEX IF NOT EXISTS profile.samples_ts "
			    "ON samples(ts)",
			err, errlen);
	if (rc)
		goto fail;
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		store_catalog_add(st, "profile", tables[i].name, NULL,
				  tables[i].doc);
	for (int i = 0; i < S_COUNT; i++) {
		rc = store_stmt_new(st, stmt_sql[i], &R.stmt[i], err, errlen);
		if (rc)
			goto fail;
	}
	R.pending = malloc(SAMPLER_STORE_PENDING_MAX * sizeof(*R.pending));
	R.batch = malloc(SAMPLER_STORE_PENDING_MAX * sizeof(*R.batch));
	R.known = malloc(THREADS_KNOWN_MAX * sizeof(*R.known));
	if (!R.pending || !R.batch || !R.known) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	R.st = st;
	R.in = in;
	R.rng = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&R.wake, &ca);
	pthread_condattr_destroy(&ca);
	rc = agent_thread_start(&R.thread, "probing-record", recorder_main,
				NULL);
	if (rc) {
		snprintf(err, errlen, "cannot start the recorder: %s",
			 strerror(-rc));
		goto fail;
	}
	R.started = 1;
	return 0;
fail:
	recorder_free(R.samples);
	R.samples = NULL;
	for (int i = 0; i < S_COUNT; i++) {
		store_stmt_free(R.stmt[i]);
		R.stmt[i] = NULL;
	}
	free(R.pending);
	free(R.batch);
	free(R.known);
	R.pending = R.batch = NULL;
	R.known = NULL;
	return rc;
}

size_t sampler_store_add(const struct sampler_sample *s, size_t n)
{
	size_t room, take;

	pthread_mutex_lock(&R.lock);
	if (!R.started || R.stopping) {
		pthread_mutex_unlock(&R.lock);
		return n;
	}
	room = SAMPLER_STORE_PENDING_MAX - R.npending;
	take = n < room ? n : room;
	memcpy(R.pending + R.npending, s, take * sizeof(*s));
	if (!R.npending && take)
		pthread_cond_signal(&R.wake);
	R.npending += take;
	R.stats.dropped += n - take;
	pthread_mutex_unlock(&R.lock);
	return n - take;
}

int sampler_store_flush(int timeout_ms)
{
	double deadline = mono_ms() + timeout_ms;
	uint64_t want;
	int rc = 0;

	pthread_mutex_lock(&R.lock);
	if (!R.started || R.stopping) {
		pthread_mutex_unlock(&R.lock);
		return -ENOENT;
	}
	want = ++R.flush_want;
	pthread_cond_signal(&R.wake);
	while (R.flush_done < want && !R.stopping) {
		struct timespec dl;
		double left = deadline - mono_ms();

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += (time_t)(left / 1000);
		dl.tv_nsec += (long)((left - (double)(long)(left / 1000) * 1000) *
				     1e6);
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&R.done, &R.lock, &dl);
	}
	pthread_mutex_unlock(&R.lock);
	return rc;
}

void sampler_store_stats(struct sampler_store_stats *s)
{
	pthread_mutex_lock(&R.lock);
	*s = R.stats;
	pthread_mutex_unlock(&R.lock);
}

void sampler_store_shutdown(void)
{

	pthread_mutex_lock(&R.lock);
	if (!R.started || R.stopping) {
		pthread_mutex_unlock(&R.lock);
		return;
	}
	R.stopping = 1;
	pthread_cond_signal(&R.wake);
	pthread_mutex_unlock(&R.lock);
	/* A recorder stuck behind a long query is left to the process. */
	if (agent_thread_join(R.thread, 2000))
		log_warn("profile recorder did not stop in time");
}

void sampler_store_atfork_child(void)
{
	pthread_mutex_init(&R.lock, NULL);
	pthread_cond_init(&R.wake, NULL);
	pthread_cond_init(&R.done, NULL);
	/* The parent's store, statements and thread are not ours (left
	 * to the child's memory); a new agent starts afresh. */
	memset(R.stmt, 0, sizeof(R.stmt));
	R.samples = NULL;
	R.started = 0;
	R.stopping = 0;
	R.npending = 0;
	R.flush_want = R.flush_done = 0;
	R.frames_done = R.stacks_done = 0;
	R.nknown = 0;
	memset(&R.known_map, 0, sizeof(R.known_map));
	memset(&R.stats, 0, sizeof(R.stats));
}
