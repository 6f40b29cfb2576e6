/*
 * resultdb: the rows of every rank in a local SQLite table, for
 * `probing cluster query --merge SQL`.
 *
 * An in-memory database with one table, result(rank, host, <the query's
 * columns>): values keep their JSON types (integers, reals, text, NULL;
 * other JSON as its text).  The merge query runs over it like any SQLite
 * query on the user's own machine: nothing in it reaches an agent.
 *
 * Caps: RESULTDB_ROWS_MAX rows from the merge query.  Single-threaded.
 */
#ifndef CLI_RESULTDB_H
#define CLI_RESULTDB_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "render/output.h"

#define RESULTDB_ROWS_MAX 1000000

struct resultdb;

/* A database with result("rank", "host", names[0..ncols)).  Returns 0 or
 * -ENOMEM / -EINVAL (err: SQLite's reason, e.g. a duplicate column). */
int resultdb_new(const char *const *names, size_t ncols,
		 struct resultdb **out, char *err, size_t errlen);
void resultdb_free(struct resultdb *db);

/* Adds one row: rank (< 0: NULL), host, and row, a JSON array of ncols
 * values.  0, -EINVAL (not an array of ncols) or -EIO with err. */
int resultdb_add(struct resultdb *db, int64_t rank, const char *host,
		 const cJSON *row, char *err, size_t errlen);

/* Runs sql and gives its rows as a table (caller frees).  0 or -EINVAL
 * with SQLite's message in err. */
int resultdb_query(struct resultdb *db, const char *sql,
		   struct cli_table **out, char *err, size_t errlen);

#endif
