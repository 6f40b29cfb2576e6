/*
 * sampler_codes: code objects to interned frames, through a cache keyed
 * by the code object's address and checked by its identity fields
 * (cpython.h).  Part of the sampler (sampler_impl.h); sampler thread only.
 */
#include "sampler_impl.h"
#include "sampler_tasks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CODE_CACHE_MAX 65536
#define LINETABLE_COPY_MAX 8192 /* bytes of a line table kept in the cache */

/* A code object's names and line table. */
struct code_ent {
	uintptr_t code, qualname, filename, linetable;
	int firstlineno;
	uint32_t fn;
	unsigned char *lt; /* NULL: read in place */
	size_t ltlen;
	int memo_lasti; /* the last instruction looked up, and its frame */
	uint32_t memo_frame;
};

static struct sampler_intern *in;
static struct code_ent *codes;
static size_t ncodes;
static struct sampler_map code_map;
static uint32_t unknown_fn;

int sampler_codes_init(struct sampler_intern *intern)
{
	in = intern;
	codes = malloc(CODE_CACHE_MAX * sizeof(*codes));
	return codes ? 0 : -ENOMEM;
}

void sampler_codes_atfork_child(void)
{
	/* The parent's entries describe the same memory, but their frames
	 * were interned in the parent's tables. */
	ncodes = 0;
	memset(&code_map, 0, sizeof(code_map));
	unknown_fn = 0;
}

/* ---- code objects to frames ------------------------------------------- */

static void codes_clear(void)
{
	for (size_t i = 0; i < ncodes; i++)
		free(codes[i].lt);
	ncodes = 0;
	sampler_map_release(&code_map);
	/* Trust is only as good as the cache. */
	sampler_threads_untrust();
}

static uint32_t unknown_frame(void)
{
	if (!unknown_fn)
		unknown_fn =
			sampler_intern_func(in, SAMPLER_PY, "[unknown]", "");
	return sampler_intern_frame(in, unknown_fn, -1);
}

/* Is it asyncio's event loop running (BaseEventLoop.run_forever or
 * _run_once: co_name only up to 3.10)? */
static int loop_code(const char *func, const char *file)
{
	static const char tail[] = "/asyncio/base_events.py";
	size_t fl = strlen(file), n = strlen(func);

	if (fl < sizeof(tail) - 1 || strcmp(file + fl - (sizeof(tail) - 1), tail))
		return 0;
	return (n >= 11 && !strcmp(func + n - 11, "run_forever")) ||
	       (n >= 9 && !strcmp(func + n - 9, "_run_once"));
}

/* The cache entry of r's code object, (re)filled when new or when the
 * address now holds another code object; NULL when its names cannot be
 * read. */
static struct code_ent *code_lookup(const struct cpython_raw *r)
{
	char func[CPYTHON_NAME_MAX], file[CPYTHON_FILE_MAX];
	unsigned char lt[LINETABLE_COPY_MAX];
	struct code_ent *e;
	uint32_t idx;
	int rc;

	if (sampler_map_get(&code_map, r->code, &idx) == 0) {
		e = &codes[idx];
		/* A trusted frame's code object was not read: the cache
		 * entry it had is still its own. */
		if (r->trusted ||
		    (e->qualname == r->qualname && e->filename == r->filename &&
		     e->linetable == r->linetable &&
		     e->firstlineno == r->firstlineno))
			return e->fn ? e : NULL;
	} else if (r->trusted) {
		return NULL; /* not cached any more: no identity to go by */
	} else {
		if (ncodes >= CODE_CACHE_MAX)
			codes_clear();
		idx = (uint32_t)ncodes;
		if (sampler_map_put(&code_map, r->code, idx) < 0)
			return NULL;
		ncodes++;
		e = &codes[idx];
		e->lt = NULL;
	}
	free(e->lt);
	memset(e, 0, sizeof(*e));
	e->code = r->code;
	e->memo_lasti = -2;
	if (cpython.read.code_names(r, func, sizeof(func), file, sizeof(file)))
		return NULL; /* the entry stays, matching nothing */
	e->fn = sampler_intern_func(in, SAMPLER_PY, func, file);
	if (loop_code(func, file))
		sampler_tasks_loop_seen();
	rc = cpython.read.linetable_copy(r, lt, sizeof(lt), &e->ltlen);
	if (rc == 0) {
		e->lt = malloc(e->ltlen ? e->ltlen : 1);
		if (e->lt)
			memcpy(e->lt, lt, e->ltlen);
	}
	e->qualname = r->qualname;
	e->filename = r->filename;
	e->linetable = r->linetable;
	e->firstlineno = r->firstlineno;
	return e;
}

/* The interned frame of r, at its instruction. */
uint32_t sampler_codes_frame(const struct cpython_raw *r, int *cached)
{
	struct code_ent *e = code_lookup(r);
	struct cpython_raw id;
	int line;

	*cached = 0;
	if (!e || !e->fn)
		return unknown_frame();
	if (e->memo_lasti == r->lasti && e->memo_frame) {
		*cached = 1;
		return e->memo_frame;
	}
	if (e->lt) {
		line = cpython.read.line_decode(e->lt, e->ltlen, e->firstlineno,
						r->lasti);
	} else {
		/* A table too long to keep: read in place, by the
		 * identity the cache holds (a trusted frame has none). */
		id = *r;
		id.linetable = e->linetable;
		id.firstlineno = e->firstlineno;
		line = cpython.read.line_remote(&id);
	}
	e->memo_lasti = r->lasti;
	e->memo_frame = sampler_intern_frame(in, e->fn, line);
	if (!e->memo_frame)
		return unknown_frame();
	*cached = 1;
	return e->memo_frame;
}
