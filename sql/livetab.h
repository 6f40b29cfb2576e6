/*
 * livetab: a virtual table whose rows are a snapshot taken when a query
 * starts scanning it (in xFilter), so xNext/xColumn only read the copy and
 * never touch the live state the snapshot came from.
 *
 * The provider fills a struct livetab_rows through livetab_rows_* calls.  It
 * runs on the querying thread; it may block for a bounded time (e.g. to get
 * the GIL) but must return.
 *
 *   static const struct livetab backtrace_tab = {
 *       .schema = "python", .name = "backtrace",
 *       .doc = "every thread's Python stack, taken when queried",
 *       .columns = "thread_id INTEGER, thread_name TEXT, depth INTEGER, ...",
 *       .snapshot = backtrace_snapshot,
 *   };
 */
#ifndef LIVETAB_H
#define LIVETAB_H

#include <stddef.h>
#include <stdint.h>

struct livetab_rows;

struct livetab {
	const char *schema;
	const char *name;
	const char *doc;
	const char *columns;   /* column list for CREATE TABLE x(<columns>) */
	/* Fills rows; returns 0 or a negative error with err filled (the query
	 * then fails with that message).  ctx is store_add_livetab's ctx. */
	int (*snapshot)(void *ctx, struct livetab_rows *rows, char *err,
			size_t errlen);
};

/* Starts a new row; values are then appended left to right.  A row with
 * fewer values than columns reads NULL for the rest.  Each returns 0 or
 * -ENOMEM (and past LIVETAB_ROWS_MAX rows, -E2BIG). */
#define LIVETAB_ROWS_MAX 1000000
int livetab_rows_begin(struct livetab_rows *rows);
int livetab_rows_int(struct livetab_rows *rows, int64_t v);
int livetab_rows_real(struct livetab_rows *rows, double v);
int livetab_rows_text(struct livetab_rows *rows, const char *s); /* copied; NULL = SQL NULL */
int livetab_rows_null(struct livetab_rows *rows);

#endif
