/*
 * memtrim: see memtrim.h.
 */
#include "memtrim.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static _Atomic long long last_ms = -MEMTRIM_INTERVAL_S * 1000LL;
static _Atomic int wanted;
/* This thread asked for a trim since its last memtrim_arena_token(). */
static _Thread_local int asked_here;

/* Over glibc's FASTBIN_CONSOLIDATION_THRESHOLD (64 KiB), which makes its
 * free consolidate the arena and trim its heap; under the least mmap
 * threshold (128 KiB), so it comes from the arena. */
#define ARENA_TOKEN_SIZE (96 * 1024)

static long long now_ms(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* Trims if the interval has passed (one caller wins it).  0 when it
 * trimmed, else the milliseconds left. */
static long long try_trim(void)
{
	long long t = now_ms(), prev = atomic_load(&last_ms);
	long long left = prev + MEMTRIM_INTERVAL_S * 1000LL - t;

	if (left > 0)
		return left;
	if (!atomic_compare_exchange_strong(&last_ms, &prev, t))
		return MEMTRIM_INTERVAL_S * 1000LL; /* another won it */
	atomic_store(&wanted, 0);
#ifdef __GLIBC__
	malloc_trim(0);
#endif
	return 0;
}

int memtrim_ask(void)
{
	asked_here = 1;
	atomic_store(&wanted, 1);
	return try_trim() == 0;
}

long memtrim_tick(void)
{
	long long left;

	if (!atomic_load(&wanted))
		return -1;
	left = try_trim();
	return left == 0 ? -1 : (long)left;
}

void *memtrim_arena_token(void)
{
	volatile char *token;

	if (!asked_here)
		return NULL;
	asked_here = 0;
	token = malloc(ARENA_TOKEN_SIZE);
	if (token)
		token[0] = 0; /* used: not a malloc the compiler may drop */
	return (void *)token;
}

void memtrim_arena_release(void *token)
{
	free(token);
}
