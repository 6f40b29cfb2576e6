/*
 * sampler_tasks: which asyncio task a sample ran (docs/asyncio.md,
 * "Sampling by task").
 *
 * A task runs as its coroutine's frame on its loop's thread: the sampler
 * looks its samples' frames up, outermost first, in a map of every task's
 * coroutine frame (the address walk_raw reads, and its code object) to
 * the task's name, and records the first one found: the task (an
 * interned frame "NAME", kind task) and the stack node of its coroutine's
 * frame, from which `flamegraph --tasks` roots the sample at the task.
 * A frame found is checked to be the listed task's still: same code
 * object, and the task's name field still holding a str of the same
 * length and cached hash (cpython.read.str_same; pytasks.h) — a task of
 * the same coroutine made since at the ended one's addresses has a name
 * object of its own, whose hash nothing computed yet.  Nothing is changed
 * in the program on the hot path: a lookup per frame of the loops'
 * threads, two small reads for a frame found.
 *
 * The map is made with the GIL by pytasks_roots(): when a run starts
 * (sampler_start), then by the recorder thread (sampler_store.c) every
 * SAMPLER_TASKS_EVERY_MS while the profiler runs — less often when the
 * listing is long (10,000 tasks: ~10 ms), so that it holds the GIL 0.5%
 * of the time at most — once a sample showed an asyncio event loop
 * running (BaseEventLoop.run_forever or _run_once in a stack:
 * sampler_codes.c); only while profile.tasks is on.
 * It is handed to the sampler thread, which takes it at its next tick.
 * A task started since the last map is not attributed until the next.
 * A listing that fails (the GIL did not come in
 * SAMPLER_TASKS_GIL_WAIT_MS) keeps the map as it was and says so
 * (sampler_tasks_note), as do tasks left out past PYTASKS_MAX.  Names:
 * at most SAMPLER_TASK_NAMES_MAX distinct ones interned in the life of
 * the process (they stay in profile.frames); past that a task is named
 * "[more than N task names]".
 *
 * Threads: sampler_tasks_loop_seen, _adopt, _find on the sampler thread;
 * _refresh on the recorder thread and in sampler_start (serialised);
 * _start from sampler_start, _stop there and at the sampler thread's
 * end; _note from any.  (A free-threaded build has no GIL to keep the
 * objects read in pytasks_roots still: its reads there only compare, and
 * the sampler's go through the safe reader.)
 */
#ifndef SAMPLER_TASKS_H
#define SAMPLER_TASKS_H

#include <stddef.h>
#include <stdint.h>

/* The map is made again every SAMPLER_TASKS_EVERY_MS, or SHARE times as
 * long as its listing took (0.5% of the time), up to EVERY_MAX_MS; each
 * listing waits GIL_WAIT_MS for the GIL, the one of sampler_start
 * START_WAIT_MS. */
#define SAMPLER_TASKS_EVERY_MS 1000
#define SAMPLER_TASKS_SHARE 200
#define SAMPLER_TASKS_EVERY_MAX_MS 60000
#define SAMPLER_TASKS_GIL_WAIT_MS 500
#define SAMPLER_TASKS_START_WAIT_MS 50
#define SAMPLER_TASK_NAMES_MAX 16384

struct sampler_intern;
struct cpython_raw;

int sampler_tasks_init(struct sampler_intern *in);
/* A run starts (on: profile.tasks; the last run's note goes) or ends
 * (its note stays: its samples are read after it). */
void sampler_tasks_start(int on);
void sampler_tasks_stop(void);
/* A sample's stack showed a loop running (sticky). */
void sampler_tasks_loop_seen(void);
/* The map made again when due (at once after a run started); with force
 * (sampler_start: the run's first samples are attributed too), now, when
 * a loop was seen before, waiting SAMPLER_TASKS_START_WAIT_MS at most for
 * the GIL.  Never on the sampler thread, never with the GIL. */
void sampler_tasks_refresh(int force);
/* Sampler thread, each tick: takes the map the recorder made. */
void sampler_tasks_adopt(void);
/* The index in raw (innermost first, n frames) of the outermost frame of
 * thread_id that is a task's coroutine, with the task's interned frame;
 * -1 when none. */
long sampler_tasks_find(uint64_t thread_id, const struct cpython_raw *raw,
			size_t n, uint32_t *task_frame);
/* Why the samples are not (all) attributed now: the last listing failed
 * (the GIL did not come), or tasks were left out; "" when nothing is
 * amiss. */
void sampler_tasks_note(char *out, size_t len);
/* In a forked child: no map, no run (the recorder is gone too). */
void sampler_tasks_atfork_child(void);

#endif
