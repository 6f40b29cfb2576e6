/*
 * pyframes_layout: copies of the interpreter's structures rearranged into
 * the headers' layout where the interpreter published another
 * (pyframes_impl.h: pyl_*).  Part of the pyframes module.
 *
 * ASYNC-SIGNAL-SAFE: pyl_apply runs in the native sampler's signal
 * handler (pyframes_leaf.c): copies on the stack only.
 */
#include "pyframes_impl.h"

#include <string.h>

_Static_assert(RUNTIME_HEAD <= sizeof(_PyRuntimeState), "a runtime's head");
_Static_assert(INTERP_HEAD <= sizeof(PyInterpreterState),
	       "an interpreter's head");

struct pyl_moves pyl_moves[PYL_KINDS];
_Atomic int pyl_on;

void pyl_apply(const struct pyl_moves *mv, unsigned char *buf, size_t len)
{
	unsigned char v[PYL_MOVES_MAX][8];
	unsigned n = mv->n < PYL_MOVES_MAX ? mv->n : PYL_MOVES_MAX;

	/* Every value first, then every place: fields may trade places. */
	for (unsigned i = 0; i < n; i++) {
		const struct pyl_move *m = &mv->m[i];

		memset(v[i], 0, sizeof(v[i]));
		if (m->size <= sizeof(v[i]) && m->theirs <= len &&
		    m->size <= len - m->theirs)
			memcpy(v[i], buf + m->theirs, m->size);
	}
	for (unsigned i = 0; i < n; i++) {
		const struct pyl_move *m = &mv->m[i];

		if (m->size <= sizeof(v[i]) && m->ours <= len &&
		    m->size <= len - m->ours)
			memcpy(buf + m->ours, v[i], m->size);
	}
}
