/*
 * sampler_intern: the profiler's frames and stacks as small integers.
 *
 * A function is (kind, func, file); a frame is (function, line), or for
 * native code a return address (symbolized when written out); a stack
 * is a node (parent stack, frame) of a trie whose root, id 0, is the empty
 * stack, so a sample names its whole stack with one id and stacks that
 * share callers share nodes.  Ids are dense and start at 1; they never
 * change while the table lives (the profile.frames and profile.stacks
 * tables hold them).
 *
 * Caps: SAMPLER_FUNCS_MAX functions, SAMPLER_FRAMES_MAX frames,
 * SAMPLER_STACKS_MAX stacks.  Past a cap nothing new is made: a frame or
 * function that does not fit interns as 0 and a stack that does not fit
 * interns as its parent (the sample loses its innermost frames); the
 * `full` counter says how often.
 *
 * Threads: one writer (the sampler thread) calls the _intern functions;
 * other threads may read entries below the counts returned by
 * sampler_intern_counts() (published with release ordering; entries never
 * move once written).
 *
 * sampler_map, the open-addressing hash it is built on (uint64 keys to
 * uint32 values, key 0 not allowed), is public for the flamegraph
 * builder.  Single-threaded.
 */
#ifndef SAMPLER_INTERN_H
#define SAMPLER_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define SAMPLER_FUNCS_MAX (1u << 18)
#define SAMPLER_FRAMES_MAX (1u << 20)
#define SAMPLER_STACKS_MAX (1u << 21)
#define SAMPLER_MAP_MAX (1u << 23) /* entries of one sampler_map */

/* SAMPLER_TASK: an asyncio task, named (agent/profiler/sampler_tasks.h). */
enum sampler_kind { SAMPLER_PY = 0, SAMPLER_NATIVE = 1, SAMPLER_TASK = 2 };

struct sampler_map {
	uint64_t *keys;
	uint32_t *vals;
	size_t cap, n; /* cap a power of two, or 0 */
};

/* An empty map needs no init ({0}).  get: 0 and *val, or -ENOENT.
 * put: 0, -ENOMEM, or -E2BIG past SAMPLER_MAP_MAX (the map is then
 * unchanged).  A put of a present key replaces its value. */
int sampler_map_get(const struct sampler_map *m, uint64_t key, uint32_t *val);
int sampler_map_put(struct sampler_map *m, uint64_t key, uint32_t val);
void sampler_map_release(struct sampler_map *m);

struct sampler_intern;

/* NULL when out of memory. */
struct sampler_intern *sampler_intern_new(void);
/* No other thread may be reading it.  NULL is a no-op. */
void sampler_intern_free(struct sampler_intern *in);

/* The id of a function (func and file copied when new); 0 when full or
 * out of memory. */
uint32_t sampler_intern_func(struct sampler_intern *in, enum sampler_kind kind,
			     const char *func, const char *file);
/* The id of a frame of function fn (> 0) at line (-1: none); 0 when
 * full or fn is 0. */
uint32_t sampler_intern_frame(struct sampler_intern *in, uint32_t fn,
			      int line);
/* The id of a native frame: a return address (symbolized later, by
 * whoever writes it out); 0 when full or addr is 0. */
uint32_t sampler_intern_native(struct sampler_intern *in, uint64_t addr);
/* The id of the stack made of parent plus the inner frame (> 0); parent
 * when full or frame is 0. */
uint32_t sampler_intern_stack(struct sampler_intern *in, uint32_t parent,
			      uint32_t frame);

struct sampler_intern_counts {
	uint32_t funcs, frames, stacks; /* ids 1..n are readable */
	uint64_t full;			 /* interns refused by a cap */
};
void sampler_intern_counts(const struct sampler_intern *in,
			   struct sampler_intern_counts *c);

/* Readers, for ids below the published counts.  Strings stay owned by
 * the table.  Return 0, or -ENOENT for an id not (yet) published. */
int sampler_intern_func_get(const struct sampler_intern *in, uint32_t id,
			    enum sampler_kind *kind, const char **func,
			    const char **file);
/* A native frame has fn 0, line -1 and its address; a Python one addr
 * 0. */
int sampler_intern_frame_get(const struct sampler_intern *in, uint32_t id,
			     uint32_t *fn, int *line, uint64_t *addr);
int sampler_intern_stack_get(const struct sampler_intern *in, uint32_t id,
			     uint32_t *parent, uint32_t *frame);

#endif
