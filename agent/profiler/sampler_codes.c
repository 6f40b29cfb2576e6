/*
 * sampler_codes: code objects to frame ids, through the code cache and the
 * thread's previous sample.  Part of the sampler (sampler_impl.h); sampler
 * thread only.
 */
#include "sampler_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- code objects to frames ------------------------------------------- */

static void codes_clear(void)
{
	for (size_t i = 0; i < S.ncodes; i++)
		free(S.codes[i].lt);
	S.ncodes = 0;
	sampler_map_release(&S.code_map);
	/* Trust is only as good as the cache. */
	for (size_t i = 0; i < S.nthr; i++)
		S.thr[i].tn = 0;
}

static uint32_t unknown_frame(void)
{
	if (!S.unknown_fn)
		S.unknown_fn = sampler_intern_func(S.in, SAMPLER_PY,
						   "[unknown]", "");
	return sampler_intern_frame(S.in, S.unknown_fn, -1);
}

/* The cache entry of r's code object, (re)filled when new or when the
 * address now holds another code object; NULL when its names cannot be
 * read. */
static struct code_ent *code_lookup(const struct pyframes_raw *r)
{
	char func[PYFRAMES_NAME_MAX], file[PYFRAMES_FILE_MAX];
	unsigned char lt[LINETABLE_COPY_MAX];
	struct code_ent *e;
	uint32_t idx;
	int rc;

	if (sampler_map_get(&S.code_map, r->code, &idx) == 0) {
		e = &S.codes[idx];
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
		if (S.ncodes >= CODE_CACHE_MAX)
			codes_clear();
		idx = (uint32_t)S.ncodes;
		if (sampler_map_put(&S.code_map, r->code, idx) < 0)
			return NULL;
		S.ncodes++;
		e = &S.codes[idx];
		e->lt = NULL;
	}
	free(e->lt);
	memset(e, 0, sizeof(*e));
	e->code = r->code;
	e->memo_lasti = -2;
	if (pyframes_code_names(r, func, sizeof(func), file, sizeof(file)))
		return NULL; /* the entry stays, matching nothing */
	e->fn = sampler_intern_func(S.in, SAMPLER_PY, func, file);
	rc = pyframes_linetable_copy(r, lt, sizeof(lt), &e->ltlen);
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

/* The frame id of r, at its instruction: from the thread's previous
 * sample when r is the same frame at the same place from the root
 * (trusted: same code object) at the same instruction, else through the
 * code cache. */
uint32_t sampler_codes_frame(const struct pyframes_raw *r)
{
	size_t i = (size_t)(r - S.raw), pos = S.nraw - 1 - i;
	struct thr *t = S.cur;
	struct code_ent *e;
	struct pyframes_raw id;
	int line;

	if (r->trusted && t && t->tfid && pos < t->tn &&
	    t->tlasti[pos] == r->lasti && t->tfid[pos]) {
		S.rawok[i] = 1;
		return S.rawfid[i] = t->tfid[pos];
	}
	e = code_lookup(r);
	S.rawok[i] = e != NULL;
	S.rawfid[i] = 0;
	if (!e || !e->fn)
		return unknown_frame();
	if (e->memo_lasti == r->lasti && e->memo_frame)
		return S.rawfid[i] = e->memo_frame;
	if (e->lt) {
		line = pyframes_line_decode(e->lt, e->ltlen, e->firstlineno,
					    r->lasti);
	} else {
		/* A table too long to keep: read in place, by the
		 * identity the cache holds (a trusted frame has none). */
		id = *r;
		id.linetable = e->linetable;
		id.firstlineno = e->firstlineno;
		line = pyframes_line_remote(&id);
	}
	e->memo_lasti = r->lasti;
	e->memo_frame = sampler_intern_frame(S.in, e->fn, line);
	S.rawfid[i] = e->memo_frame;
	return e->memo_frame ? e->memo_frame : unknown_frame();
}
