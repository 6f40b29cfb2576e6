/*
 * sampler_intern: functions, frames and stacks as dense ids.  See
 * sampler_intern.h.
 *
 * Entries live in chunks of CHUNK entries that are never moved, so a
 * reader on another thread can use any entry below the published count
 * while the writer appends.  The hashes that find an entry are the
 * writer's alone.
 */
#include "sampler_intern.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BITS 12
#define CHUNK (1u << CHUNK_BITS)

/* ---- sampler_map ------------------------------------------------------ */

static uint64_t mix(uint64_t k)
{
	/* splitmix64's finaliser: cheap and spreads sequential keys. */
	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ULL;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebULL;
	k ^= k >> 31;
	return k;
}

int sampler_map_get(const struct sampler_map *m, uint64_t key, uint32_t *val)
{
	size_t i;

	if (!m->cap || !key)
		return -ENOENT;
	for (i = mix(key) & (m->cap - 1); m->keys[i];
	     i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			*val = m->vals[i];
			return 0;
		}
	}
	return -ENOENT;
}

static void map_insert(uint64_t *keys, uint32_t *vals, size_t cap,
		       uint64_t key, uint32_t val, size_t *n)
{
	size_t i;

	for (i = mix(key) & (cap - 1); keys[i]; i = (i + 1) & (cap - 1))
		if (keys[i] == key)
			break;
	if (!keys[i])
		(*n)++;
	keys[i] = key;
	vals[i] = val;
}

static int map_grow(struct sampler_map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024, n = 0;
	uint64_t *keys = calloc(cap, sizeof(*keys));
	uint32_t *vals = malloc(cap * sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i])
			map_insert(keys, vals, cap, m->keys[i], m->vals[i], &n);
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int sampler_map_put(struct sampler_map *m, uint64_t key, uint32_t val)
{
	uint32_t old;

	if (!key)
		return -EINVAL;
	if (sampler_map_get(m, key, &old) == 0) {
		map_insert(m->keys, m->vals, m->cap, key, val, &m->n);
		return 0;
	}
	if (m->n >= SAMPLER_MAP_MAX)
		return -E2BIG;
	/* Load at most 1/2: short probes. */
	if ((m->n + 1) * 2 > m->cap && map_grow(m) < 0)
		return -ENOMEM;
	map_insert(m->keys, m->vals, m->cap, key, val, &m->n);
	return 0;
}

void sampler_map_release(struct sampler_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- the tables ------------------------------------------------------- */

struct func_ent {
	char *func, *file;
	uint64_t hash;
	enum sampler_kind kind;
};

struct frame_ent {
	uint32_t fn;
	int line;
	uint64_t addr;
};

struct stack_ent {
	uint32_t parent, frame;
};

struct sampler_intern {
	struct func_ent *funcs[SAMPLER_FUNCS_MAX / CHUNK];
	struct frame_ent *frames[SAMPLER_FRAMES_MAX / CHUNK];
	struct stack_ent *stacks[SAMPLER_STACKS_MAX / CHUNK];
	_Atomic uint32_t nfuncs, nframes, nstacks; /* last id given */
	_Atomic uint64_t full;
	/* Writer only.  funcs: string hash -> first id with it, chained
	 * through `next` on collisions. */
	struct sampler_map func_map, frame_map, stack_map;
	uint32_t *func_next; /* SAMPLER_FUNCS_MAX + 1 */
};

struct sampler_intern *sampler_intern_new(void)
{
	struct sampler_intern *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->func_next = calloc(SAMPLER_FUNCS_MAX + 1, sizeof(uint32_t));
	if (!in->func_next) {
		free(in);
		return NULL;
	}
	return in;
}

void sampler_intern_free(struct sampler_intern *in)
{
	uint32_t n;

	if (!in)
		return;
	n = atomic_load(&in->nfuncs);
	for (uint32_t id = 1; id <= n; id++) {
		struct func_ent *f = &in->funcs[id >> CHUNK_BITS][id & (CHUNK - 1)];

		free(f->func);
		free(f->file);
	}
	for (size_t i = 0; i < SAMPLER_FUNCS_MAX / CHUNK; i++)
		free(in->funcs[i]);
	for (size_t i = 0; i < SAMPLER_FRAMES_MAX / CHUNK; i++)
		free(in->frames[i]);
	for (size_t i = 0; i < SAMPLER_STACKS_MAX / CHUNK; i++)
		free(in->stacks[i]);
	sampler_map_release(&in->func_map);
	sampler_map_release(&in->frame_map);
	sampler_map_release(&in->stack_map);
	free(in->func_next);
	free(in);
}

/* The slot of id in a chunked array, allocating its chunk; NULL when out
 * of memory. */
#define SLOT(arr, id)                                                          \
	((arr)[(id) >> CHUNK_BITS] ||                                          \
			 ((arr)[(id) >> CHUNK_BITS] =                          \
				  calloc(CHUNK, sizeof(*(arr)[0])))            \
		 ? &(arr)[(id) >> CHUNK_BITS][(id) & (CHUNK - 1)]              \
		 : NULL)

static uint64_t str_hash(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

uint32_t sampler_intern_func(struct sampler_intern *in, enum sampler_kind kind,
			     const char *func, const char *file)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)kind;
	uint32_t id, head = 0;
	struct func_ent *f;

	h = str_hash(h, func ? func : "");
	h = str_hash(h * 31 + 1, file ? file : "");
	h = h ? h : 1;
	if (sampler_map_get(&in->func_map, h, &head) == 0)
		for (id = head; id; id = in->func_next[id]) {
			f = &in->funcs[id >> CHUNK_BITS][id & (CHUNK - 1)];
			if (f->kind == kind && !strcmp(f->func, func ? func : "") &&
			    !strcmp(f->file, file ? file : ""))
				return id;
		}
	id = atomic_load_explicit(&in->nfuncs, memory_order_relaxed) + 1;
	if (id >= SAMPLER_FUNCS_MAX) {
		atomic_fetch_add(&in->full, 1);
		return 0;
	}
	f = SLOT(in->funcs, id);
	if (!f)
		return 0;
	f->func = strdup(func ? func : "");
	f->file = strdup(file ? file : "");
	f->kind = kind;
	f->hash = h;
	if (!f->func || !f->file ||
	    sampler_map_put(&in->func_map, h, id) < 0) {
		free(f->func);
		free(f->file);
		f->func = f->file = NULL;
		return 0;
	}
	in->func_next[id] = head;
	atomic_store_explicit(&in->nfuncs, id, memory_order_release);
	return id;
}

/* The frame of key (fn, line, addr); keys: Python (fn << 32 | line),
 * native (1 << 63 | addr): user-space addresses are below 2^63. */
static uint32_t frame_intern(struct sampler_intern *in, uint64_t key,
			     uint32_t fn, int line, uint64_t addr)
{
	uint32_t id;
	struct frame_ent *f;

	if (sampler_map_get(&in->frame_map, key, &id) == 0)
		return id;
	id = atomic_load_explicit(&in->nframes, memory_order_relaxed) + 1;
	if (id >= SAMPLER_FRAMES_MAX) {
		atomic_fetch_add(&in->full, 1);
		return 0;
	}
	f = SLOT(in->frames, id);
	if (!f || sampler_map_put(&in->frame_map, key, id) < 0)
		return 0;
	f->fn = fn;
	f->line = line;
	f->addr = addr;
	atomic_store_explicit(&in->nframes, id, memory_order_release);
	return id;
}

uint32_t sampler_intern_frame(struct sampler_intern *in, uint32_t fn, int line)
{
	if (!fn)
		return 0;
	return frame_intern(in, (uint64_t)fn << 32 | (uint32_t)line, fn, line,
			    0);
}

uint32_t sampler_intern_native(struct sampler_intern *in, uint64_t addr)
{
	if (!addr || addr >> 63)
		return 0;
	return frame_intern(in, 1ULL << 63 | addr, 0, -1, addr);
}

uint32_t sampler_intern_stack(struct sampler_intern *in, uint32_t parent,
			      uint32_t frame)
{
	uint64_t key;
	uint32_t id;
	struct stack_ent *s;

	if (!frame)
		return parent;
	key = (uint64_t)parent << 32 | frame;
	if (sampler_map_get(&in->stack_map, key, &id) == 0)
		return id;
	id = atomic_load_explicit(&in->nstacks, memory_order_relaxed) + 1;
	if (id >= SAMPLER_STACKS_MAX) {
		atomic_fetch_add(&in->full, 1);
		return parent;
	}
	s = SLOT(in->stacks, id);
	if (!s || sampler_map_put(&in->stack_map, key, id) < 0)
		return parent;
	s->parent = parent;
	s->frame = frame;
	atomic_store_explicit(&in->nstacks, id, memory_order_release);
	return id;
}

void sampler_intern_counts(const struct sampler_intern *in,
			   struct sampler_intern_counts *c)
{
	/* Stacks first: a stack is published after its frame and a frame
	 * after its function, so everything a counted stack names is
	 * counted too. */
	c->stacks = atomic_load_explicit(&in->nstacks, memory_order_acquire);
	c->frames = atomic_load_explicit(&in->nframes, memory_order_acquire);
	c->funcs = atomic_load_explicit(&in->nfuncs, memory_order_acquire);
	c->full = atomic_load_explicit(&in->full, memory_order_relaxed);
}

int sampler_intern_func_get(const struct sampler_intern *in, uint32_t id,
			    enum sampler_kind *kind, const char **func,
			    const char **file)
{
	const struct func_ent *f;

	if (!id || id > atomic_load_explicit(&in->nfuncs, memory_order_acquire))
		return -ENOENT;
	f = &in->funcs[id >> CHUNK_BITS][id & (CHUNK - 1)];
	*kind = f->kind;
	*func = f->func;
	*file = f->file;
	return 0;
}

int sampler_intern_frame_get(const struct sampler_intern *in, uint32_t id,
			     uint32_t *fn, int *line, uint64_t *addr)
{
	const struct frame_ent *f;

	if (!id ||
	    id > atomic_load_explicit(&in->nframes, memory_order_acquire))
		return -ENOENT;
	f = &in->frames[id >> CHUNK_BITS][id & (CHUNK - 1)];
	*fn = f->fn;
	*line = f->line;
	*addr = f->addr;
	return 0;
}

int sampler_intern_stack_get(const struct sampler_intern *in, uint32_t id,
			     uint32_t *parent, uint32_t *frame)
{
	const struct stack_ent *s;

	if (!id ||
	    id > atomic_load_explicit(&in->nstacks, memory_order_acquire))
		return -ENOENT;
	s = &in->stacks[id >> CHUNK_BITS][id & (CHUNK - 1)];
	*parent = s->parent;
	*frame = s->frame;
	return 0;
}
