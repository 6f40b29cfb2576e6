/*
 * memory: the recorder thread, and process.memory.
 *
 * One agent thread ("probing-rec", signals blocked) appends a row to
 * process.memory every memory.interval_ms (0: never):
 *
 *   process.memory(ts, rss, vms, shared, peak, swap, threads, py_blocks,
 *                  cuda_allocated, cuda_reserved)
 *
 * ts in Unix seconds; sizes in MB.  The /proc figures (memory_proc.h) are
 * read without the GIL.  py_blocks (sys.getallocatedblocks(): objects and
 * buffers allocated by Python's allocator) and the CUDA allocator's
 * figures (when torch has initialised CUDA) need the GIL: when it does
 * not come within 100 ms they are NULL in that row.  The same thread runs
 * torch_tick() (torch.h) when torch asks for it.
 *
 * It also provides the live table python.tensors (memory_objects.h), a
 * walk of the heap with the GIL taken when queried, bounded by
 * memory.budget_ms.
 *
 * Threads: memory_start/memory_stop on the agent thread; memory_wake from
 * any thread (config listeners).
 */
#ifndef MEMORY_H
#define MEMORY_H

#include <stddef.h>

struct store;

/* Creates process.memory and python.tensors and starts the thread.  0, or a
 * negative error with err. */
int memory_start(struct store *st, char *err, size_t errlen);

/* Stops the thread: joins it for at most a second (it may be waiting for
 * the GIL), else leaves it to end on its own.  Idempotent. */
void memory_stop(void);

/* Makes the thread look at its settings and torch's now. */
void memory_wake(void);

/* In a forked child: the thread does not exist there; forget it. */
void memory_atfork_child(void);

#endif
