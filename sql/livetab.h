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
 * fewer values than columns reads NULL for the rest; values past the last
 * column are ignored.  Each returns 0 or -ENOMEM (and past LIVETAB_ROWS_MAX
 * rows or LIVETAB_BYTES_MAX bytes, -E2BIG; a value before the first
 * livetab_rows_begin, -EINVAL).  A failure is sticky: the rows are then
 * poisoned and the query fails with that error whatever snapshot returns,
 * so a provider may stop at the first error and return it. */
/* Does the query read column (0-based)?  A provider may skip computing
 * what nobody reads (and append NULL instead). */
int livetab_rows_wants(const struct livetab_rows *rows, int column);

#define LIVETAB_ROWS_MAX 1000000
#define LIVETAB_BYTES_MAX ((size_t)256 << 20)
int livetab_rows_begin(struct livetab_rows *rows);
int livetab_rows_int(struct livetab_rows *rows, int64_t v);
int livetab_rows_real(struct livetab_rows *rows, double v);
int livetab_rows_text(struct livetab_rows *rows, const char *s); /* copied; NULL = SQL NULL */
int livetab_rows_null(struct livetab_rows *rows);

/*
 * For store.c: registers tab's module (named "livetab_<schema>_<name>",
 * with tab and ctx as its client data) on db and runs CREATE VIRTUAL TABLE
 * "<schema>"."<name>".  tab must outlive db.  The caller holds db's mutex
 * or is its only user.  Returns 0, -ENOMEM, or -EINVAL with SQLite's
 * message in err.
 */
struct sqlite3;
int livetab_register(struct sqlite3 *db, const struct livetab *tab, void *ctx,
		     char *err, size_t errlen);

#endif
