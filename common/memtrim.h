/*
 * memtrim: give the memory an agent request freed back to the system,
 * seldom.
 *
 * glibc keeps freed memory in the arena of the thread that freed it, and
 * each agent thread has its own: a large request (a failed 256 MiB
 * scratch table, the locals of 2,000 threads) left hundreds of megabytes
 * in the program's resident set for good.  malloc_trim() gives it back,
 * but it walks every arena — the program's too — holding each arena's
 * lock while it does: the program's own mallocs wait meanwhile.  So a
 * trim is asked for only after work large enough to leave megabytes
 * behind, and done at most once every MEMTRIM_INTERVAL_S whatever the
 * clients ask (a client looping such requests costs the program one walk
 * of its heap per interval, not one per request).  A trim asked for
 * within the interval is not forgotten: a thread of the agent that wakes
 * regularly (the memory recorder) does it once the interval has passed.
 *
 * malloc_trim() does not shrink a thread arena's top, though: the free
 * space at the end of an agent thread's heap, where the work's small
 * blocks (a reply's JSON nodes) all coalesce, stays resident — 25 MB in
 * each worker's arena after the locals of 2,000 threads.  glibc shrinks
 * that heap only when a block of 64 KiB or more is freed into the arena.
 * So the thread that did the work takes a block (memtrim_arena_token)
 * and, once the work's memory has been freed (the reply sent), the
 * token's free gives the top back: one arena, one lock, no walk.
 *
 * Threads: any.
 */
#ifndef MEMTRIM_H
#define MEMTRIM_H

#define MEMTRIM_INTERVAL_S 2

/* Asks for a trim (malloc_trim(0)): done now unless one was done less
 * than MEMTRIM_INTERVAL_S ago, else left to memtrim_tick().  1 when it
 * trimmed now. */
int memtrim_ask(void);

/* In a thread that may have asked for a trim since the last call: a
 * block from its arena when it did, else NULL.  Give it to
 * memtrim_arena_release() (any thread) after the work's memory is freed. */
void *memtrim_arena_token(void);

/* Frees token (NULL: nothing), which shrinks its arena's heap to what is
 * still in use. */
void memtrim_arena_release(void *token);

/* Does the trim asked for, once its interval has passed.  Returns the
 * milliseconds until it may while one is still pending, -1 when none is. */
long memtrim_tick(void);

#endif
