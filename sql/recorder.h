/*
 * recorder: a recorded table (an ordinary table that an agent module
 * appends to) with a retention bound: at most max_rows rows and about
 * max_bytes bytes; past either, the oldest rows go first.
 *
 *   struct recorder_opts o = {
 *       .schema = "process", .name = "memory",
 *       .columns = "ts REAL, rss REAL", .doc = "...",
 *       .max_rows = 100000, .max_bytes = 16 << 20,
 *   };
 *   recorder_new(st, &o, &r, err, sizeof(err));
 *   recorder_begin(r, err, sizeof(err));
 *   store_stmt_real(recorder_stmt(r), 1, now);
 *   store_stmt_real(recorder_stmt(r), 2, rss);
 *   recorder_add(r, 16, err, sizeof(err));
 *   recorder_commit(r, err, sizeof(err));
 *
 * The table is created when missing (an existing one is kept and
 * continued) and listed in probing.tables as "recorded".  Rows are only
 * ever added by the recorder and removed by it, oldest first: queries may
 * not write in the built-in schemas, so rowids stay dense and trimming is
 * one DELETE of a rowid range.  Bytes are the callers' estimates of each
 * row's payload (8 per number plus the length of each text); trimming
 * counts the rows it removes at the average size.  Trimming goes down to
 * 90% of the bound, so that it does not happen on every batch.
 *
 * Threads: as the store.  One recorder per table; a recorder is used by
 * one thread at a time (its owner).  Between recorder_begin and
 * recorder_commit the thread holds the database mutex (see store.h).
 */
#ifndef RECORDER_H
#define RECORDER_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct store_stmt;
struct recorder;

#define RECORDER_COLS_MAX 64

struct recorder_opts {
	const char *schema; /* "python", "process", ... */
	const char *name;
	const char *columns; /* CREATE TABLE column list */
	const char *doc;     /* one line for probing.tables; may be NULL */
	size_t max_rows;     /* 0: no bound on rows */
	size_t max_bytes;    /* 0: no bound on bytes */
};

/* Creates (or continues) the table and prepares its insert.  Returns 0
 * with *out, or STORE_ESQL / -ENOMEM / -EINVAL (more than
 * RECORDER_COLS_MAX columns) with err. */
int recorder_new(struct store *st, const struct recorder_opts *o,
		 struct recorder **out, char *err, size_t errlen);

/* Frees the recorder (the table and its rows stay).  NULL is a no-op. */
void recorder_free(struct recorder *r);

/* Changes the bounds; they apply at the next commit. */
void recorder_limits(struct recorder *r, size_t max_rows, size_t max_bytes);

/* The insert statement: parameter i (from 1) is column i.  Owned by r. */
struct store_stmt *recorder_stmt(struct recorder *r);

/* Begins a batch (store_begin).  0 or STORE_ESQL. */
int recorder_begin(struct recorder *r, char *err, size_t errlen);

/* Runs the insert with the values bound and counts the row as bytes
 * bytes.  0 or STORE_ESQL / -ENOMEM (the row is not counted). */
int recorder_add(struct recorder *r, size_t bytes, char *err, size_t errlen);

/* Trims the oldest rows past the bounds, then commits.  0 or STORE_ESQL
 * (the batch is rolled back and not counted). */
int recorder_commit(struct recorder *r, char *err, size_t errlen);

/* Abandons the batch. */
void recorder_rollback(struct recorder *r);

struct recorder_stats {
	uint64_t rows;	  /* rows in the table now */
	uint64_t bytes;	  /* their estimated bytes */
	uint64_t added;	  /* rows added since recorder_new */
	uint64_t trimmed; /* rows removed by the bounds */
};

void recorder_stats(const struct recorder *r, struct recorder_stats *out);

#endif
