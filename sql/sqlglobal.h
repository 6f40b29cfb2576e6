/*
 * sqlglobal: where a query names global.<schema>.<table> (the `global`
 * schema, agent/cluster/cluster_global.h).
 *
 * A reference is the word `global` (any case, not part of a longer word
 * nor after a '.'), '.', an identifier, '.', an identifier (letters,
 * digits, '_'; no spaces between).  Inside '...' strings, "..." and
 * [...] and `...` quoted names, -- and block comments nothing is one.
 *
 * Pure: no I/O, no allocation.
 */
#ifndef SQLGLOBAL_H
#define SQLGLOBAL_H

#include <stddef.h>

struct sqlglobal_ref {
	size_t start, end; /* sql[start, end) is the reference */
	char name[128];	   /* "schema.table" */
};

/* Fills refs (at most max) in order; returns how many there are (may be
 * more than max: then only max were filled).  A name too long for
 * .name is not a reference. */
int sqlglobal_refs(const char *sql, struct sqlglobal_ref *refs, int max);

#endif
