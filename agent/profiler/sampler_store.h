/*
 * sampler_store: the profiler's recorder, between the sampler's hot path
 * and SQLite.
 *
 * The sampler thread appends samples to a bounded pending buffer (a mutex
 * held for a memcpy) and never waits for SQLite; the recorder thread wakes
 * about every SAMPLER_STORE_PERIOD_MS (jittered; at once when flushed),
 * takes the buffer, and
 * writes one transaction: the frames and stacks interned since the last
 * batch (read from the sampler_intern table, whose entries never move),
 * the samples, and the threads seen.  profile.samples is a recorded
 * table (recorder.h): the oldest samples go when it holds more than
 * profile.retention_rows rows or about profile.retention_bytes bytes.
 * Frames and stacks are kept (their tables are bounded by
 * sampler_intern's caps).
 *
 * When the pending buffer is full (SQLite stalled by a long query), new
 * samples are dropped and counted, never queued without bound.
 *
 * Thread names: the kernel's name at first, then threading's names, read
 * with the GIL through snapshot_stacks() at most once a second while
 * some thread is unnamed, never on the sampler thread.  Likewise, after
 * each batch, the asyncio tasks the sampler attributes samples to
 * (sampler_tasks_refresh: at most once a second, while a run wants them).
 *
 * Tables (schema profile, listed in probing.tables): frames, stacks,
 * samples, threads; see docs/tables.md.
 */
#ifndef SAMPLER_STORE_H
#define SAMPLER_STORE_H

#include <stddef.h>
#include <stdint.h>

#define SAMPLER_STORE_PENDING_MAX 262144 /* samples waiting for SQLite */
#define SAMPLER_STORE_PERIOD_MS 100

struct store;
struct sampler_intern;

enum sampler_state {
	SAMPLER_RUNNING = 0,  /* on CPU (or runnable) */
	SAMPLER_GIL_WAIT = 1, /* blocked on the GIL */
	SAMPLER_IDLE = 2,     /* blocked on anything else */
};

struct sampler_sample {
	double ts; /* CLOCK_REALTIME, seconds */
	uint64_t thread_id;
	long native_id;
	uint32_t stack;
	uint8_t state; /* enum sampler_state */
	uint8_t gil;   /* held the GIL */
	int64_t cpu_us; /* the thread's CPU time since its previous sample,
			   -1 unknown */
	uint32_t task_frame; /* the asyncio task it ran (an interned frame
				of kind task), 0 none */
	uint32_t task_stack; /* the node of stack that is the task's
				coroutine's frame (sampler_tasks.h) */
};

/* Creates the tables, registers them in the catalog and starts the
 * recorder thread (all signals blocked).  in must outlive the recorder.
 * Returns 0 or a negative error with err. */
int sampler_store_init(struct store *st, struct sampler_intern *in, char *err,
		       size_t errlen);

/* Sampler thread: queues n samples.  Returns how many were dropped
 * (buffer full, or not initialised). */
size_t sampler_store_add(const struct sampler_sample *s, size_t n);

/* Waits until everything queued before the call is in SQLite, at most
 * timeout_ms.  0 or -ETIMEDOUT; -ENOENT when not initialised. */
int sampler_store_flush(int timeout_ms);

struct sampler_store_stats {
	uint64_t written, dropped, deleted, batches, errors;
	char last_error[160];
};
void sampler_store_stats(struct sampler_store_stats *s);

/* Stops the recorder (after a last batch), bounded.  At exit. */
void sampler_store_shutdown(void);

/* In a forked child: forget the parent's recorder thread and lock. */
void sampler_store_atfork_child(void);

#endif
