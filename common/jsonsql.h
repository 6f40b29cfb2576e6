/*
 * jsonsql: how a JSON value is kept as an SQLite value — the one rule of
 * `cluster query --merge` (cli/commands/resultdb.c) and of the global
 * schema (agent/cluster/cluster_global.c), both of which put agents' JSON
 * rows into SQLite tables: integral numbers within +-2^53 as integers,
 * other numbers as reals (NaN too), strings as text, booleans as 0 and 1,
 * null (or a missing value) as NULL, arrays and objects as their JSON
 * text.
 *
 * Pure; no SQLite: each caller binds the result with its own API.
 */
#ifndef JSONSQL_H
#define JSONSQL_H

#include <stdint.h>

#include <cJSON.h>

enum jsonsql_kind { JSONSQL_NULL = 0, JSONSQL_INT, JSONSQL_REAL, JSONSQL_TEXT };

struct jsonsql_value {
	enum jsonsql_kind kind;
	int64_t i;
	double d;
	const char *text; /* JSONSQL_TEXT: valid while v and owned live */
	char *owned;	  /* the printed JSON of an array or object */
};

/* Classifies v (may be NULL) into out.  An array or object that cannot
 * be printed (no memory) is NULL. */
void jsonsql_value(const cJSON *v, struct jsonsql_value *out);

/* Frees what out owns. */
void jsonsql_release(struct jsonsql_value *out);

#endif
