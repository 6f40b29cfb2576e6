/*
 * walk_arena: memory for the frame walkers to read that is not a live
 * interpreter's — random, torn or hostile — shared by the walkers' fuzzer
 * (fuzz_walk.c) and the deterministic torn-memory test
 * (tests/embed/test_walk_torn.c).
 *
 * The arena is WALK_ARENA_SIZE bytes between two PROT_NONE guard pages, so a
 * walker that reads past what it was given faults at once instead of
 * reading whatever lies next.  Words are 8-byte values; one whose top byte
 * is a tag becomes an address the walkers can follow (arena_reloc):
 *
 *   0xA5 ..off   arena + off % WALK_ARENA_SIZE
 *   0xA6         &PyCode_Type      0xA7  &PyUnicode_Type
 *   0xA8         &PyBytes_Type     0xA9  &PyFrame_Type
 *   0xAA ..off   UINTPTR_MAX - off (the top of the address space)
 *   0xAB         the calling thread's kernel id
 *
 * Any other word is left as it is.  The walkers must return an error or a
 * bounded answer for every arena, never fault or read outside what they
 * were given (the guard pages and ASan tell).
 */
#ifndef WALK_ARENA_H
#define WALK_ARENA_H

#define Py_BUILD_CORE 1
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpython/pyframes.h"

#define WALK_ARENA_SIZE (64u << 10)
#define WALK_ARENA_PAGE 4096u

/* The arena (read-write), or NULL when it cannot be mapped. */
static inline unsigned char *arena_get(void)
{
	static unsigned char *a;

	if (!a) {
		unsigned char *m = mmap(NULL, WALK_ARENA_SIZE + 2 * WALK_ARENA_PAGE,
					PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
					-1, 0);

		if (m == MAP_FAILED)
			return NULL;
		if (mprotect(m + WALK_ARENA_PAGE, WALK_ARENA_SIZE,
			     PROT_READ | PROT_WRITE)) {
			munmap(m, WALK_ARENA_SIZE + 2 * WALK_ARENA_PAGE);
			return NULL;
		}
		a = m + WALK_ARENA_PAGE;
	}
	return a;
}

static inline uint64_t arena_reloc(const unsigned char *a, uint64_t w)
{
	uint64_t off = w & 0xFFFFFFu;

	switch (w >> 56) {
	case 0xA5:
		return (uint64_t)(uintptr_t)(a + off % WALK_ARENA_SIZE);
	case 0xA6:
		return (uint64_t)(uintptr_t)&PyCode_Type;
	case 0xA7:
		return (uint64_t)(uintptr_t)&PyUnicode_Type;
	case 0xA8:
		return (uint64_t)(uintptr_t)&PyBytes_Type;
	case 0xA9:
		return (uint64_t)(uintptr_t)&PyFrame_Type;
	case 0xAA:
		return UINT64_MAX - off;
	case 0xAB:
		return (uint64_t)syscall(SYS_gettid);
	default:
		return w;
	}
}

/* Copies data[0..len) into the arena (the rest zeroed) and relocates its
 * tagged words in place.  Returns the arena. */
static inline unsigned char *arena_fill(const unsigned char *data, size_t len)
{
	unsigned char *a = arena_get();

	if (!a)
		return NULL;
	if (len > WALK_ARENA_SIZE)
		len = WALK_ARENA_SIZE;
	memset(a, 0, WALK_ARENA_SIZE);
	if (len)
		memcpy(a, data, len);
	for (size_t i = 0; i + 8 <= WALK_ARENA_SIZE; i += 8) {
		uint64_t w;

		memcpy(&w, a + i, 8);
		w = arena_reloc(a, w);
		memcpy(a + i, &w, 8);
	}
	return a;
}

/* Writes the word v at arena offset off (when it fits). */
static inline void arena_put(unsigned char *a, size_t off, uint64_t v)
{
	if (off <= WALK_ARENA_SIZE - 8)
		memcpy(a + off, &v, 8);
}

/* The address of arena offset off. */
static inline uintptr_t arena_at(const unsigned char *a, size_t off)
{
	return (uintptr_t)(a + off);
}

#endif
