/*
 * recorder: recorded tables with retention.  See recorder.h.
 */
#include "recorder.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "store.h"

#define SQL_MAX 4096
#define ROW_GUESS 64 /* bytes per row of a table found on start */

struct recorder {
	struct store *st;
	struct store_stmt *insert;
	struct store_stmt *trim; /* DELETE ... WHERE rowid < ?1 */
	size_t max_rows, max_bytes;
	int64_t first;	       /* rowid of the oldest row kept */
	uint64_t rows, bytes;  /* committed */
	uint64_t prow, pbytes; /* added in the open batch */
	uint64_t added, trimmed;
};

/* Columns in a column list: commas outside parentheses, plus one. */
static int count_columns(const char *cols)
{
	int n = 1, depth = 0;

	for (; *cols; cols++) {
		if (*cols == '(')
			depth++;
		else if (*cols == ')' && depth > 0)
			depth--;
		else if (*cols == ',' && depth == 0)
			n++;
	}
	return n;
}

static int is_name(const char *s)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') ||
		      (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
			return 0;
	return 1;
}

/* Picks up a table that exists already: its rowid range. */
static int find_range(struct recorder *r, const char *schema, const char *name,
		      char *err, size_t errlen)
{
	char sql[SQL_MAX];
	struct store_stmt *q = NULL;
	int64_t lo = 0, hi = 0;
	int rc;

	snprintf(sql, sizeof(sql),
		 "SELECT coalesce(min(rowid), 0) FROM "
		 "\"%s\".\"%s\"",
		 schema, name);
	rc = store_stmt_new(r->st, sql, &q, err, errlen);
	if (!rc)
		rc = store_stmt_int_result(q, &lo, err, errlen);
	store_stmt_free(q);
	if (rc)
		return rc;
	snprintf(sql, sizeof(sql),
		 "SELECT coalesce(max(rowid), 0) FROM "
		 "\"%s\".\"%s\"",
		 schema, name);
	rc = store_stmt_new(r->st, sql, &q, err, errlen);
	if (!rc)
		rc = store_stmt_int_result(q, &hi, err, errlen);
	store_stmt_free(q);
	if (rc)
		return rc;
	if (hi > 0) {
		r->first = lo;
		r->rows = (uint64_t)(hi - lo + 1);
		r->bytes = r->rows * ROW_GUESS;
	} else {
		r->first = 1;
	}
	return 0;
}

/* Lists the table in probing.tables unless it is there already (a
 * recorder made again for a table that exists). */
static int catalog(struct recorder *r, const struct recorder_opts *o, char *err,
		   size_t errlen)
{
	struct store_stmt *q = NULL;
	int64_t n = 0;
	int rc;

	rc = store_stmt_new(r->st,
			    "SELECT count(*) FROM probing.tables "
			    "WHERE schema = ?1 AND name = ?2",
			    &q, err, errlen);
	if (!rc && !(rc = store_stmt_text(q, 1, o->schema)) &&
	    !(rc = store_stmt_text(q, 2, o->name)))
		rc = store_stmt_int_result(q, &n, err, errlen);
	store_stmt_free(q);
	if (!rc && n == 0)
		rc = store_catalog_add(r->st, o->schema, o->name, NULL, o->doc);
	if (rc)
		errbuf_set(err, errlen, "recorder: cannot list %s.%s", o->schema,
			o->name);
	return rc;
}

int recorder_new(struct store *st, const struct recorder_opts *o,
		 struct recorder **out, char *err, size_t errlen)
{
	char sql[SQL_MAX];
	struct recorder *r;
	size_t n;
	int ncols, rc;

	*out = NULL;
	if (!is_name(o->schema) || !is_name(o->name) || !o->columns) {
		errbuf_set(err, errlen, "recorder: bad table description");
		return -EINVAL;
	}
	ncols = count_columns(o->columns);
	if (ncols > RECORDER_COLS_MAX || strlen(o->columns) > SQL_MAX - 200) {
		errbuf_set(err, errlen, "recorder: %s.%s has too many columns",
			o->schema, o->name);
		return -EINVAL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->st = st;
	r->max_rows = o->max_rows;
	r->max_bytes = o->max_bytes;
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE IF NOT EXISTS \"%s\".\"%s\"(%s)", o->schema,
		 o->name, o->columns);
	rc = store_exec(st, sql, err, errlen);
	if (rc)
		goto fail;
	rc = find_range(r, o->schema, o->name, err, errlen);
	if (rc)
		goto fail;
	n = (size_t)snprintf(sql, sizeof(sql),
			     "INSERT INTO \"%s\".\"%s\" "
			     "VALUES (",
			     o->schema, o->name);
	for (int i = 1; i <= ncols && n < sizeof(sql); i++)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, "%s?%d",
				      i > 1 ? ", " : "", i);
	if (n < sizeof(sql))
		snprintf(sql + n, sizeof(sql) - n, ")");
	rc = store_stmt_new(st, sql, &r->insert, err, errlen);
	if (rc)
		goto fail;
	snprintf(sql, sizeof(sql), "DELETE FROM \"%s\".\"%s\" WHERE rowid < ?1",
		 o->schema, o->name);
	rc = store_stmt_new(st, sql, &r->trim, err, errlen);
	if (rc)
		goto fail;
	rc = catalog(r, o, err, errlen);
	if (rc)
		goto fail;
	*out = r;
	return 0;
fail:
	recorder_free(r);
	return rc;
}

void recorder_free(struct recorder *r)
{
	if (!r)
		return;
	store_stmt_free(r->insert);
	store_stmt_free(r->trim);
	free(r);
}

void recorder_limits(struct recorder *r, size_t max_rows, size_t max_bytes)
{
	r->max_rows = max_rows;
	r->max_bytes = max_bytes;
}

struct store_stmt *recorder_stmt(struct recorder *r)
{
	return r->insert;
}

int recorder_begin(struct recorder *r, char *err, size_t errlen)
{
	int rc = store_begin(r->st, err, errlen);

	if (!rc)
		r->prow = r->pbytes = 0;
	return rc;
}

int recorder_add(struct recorder *r, size_t bytes, char *err, size_t errlen)
{
	int rc = store_stmt_run(r->insert, err, errlen);

	if (!rc) {
		r->prow++;
		r->pbytes += bytes;
	}
	return rc;
}

/* Rows to remove so that rows/bytes fit 90% of the bounds (0: fits). */
static uint64_t excess(const struct recorder *r, uint64_t rows, uint64_t bytes)
{
	uint64_t keep = rows, avg;

	if (rows == 0)
		return 0;
	if (r->max_rows && rows > r->max_rows)
		keep = r->max_rows - r->max_rows / 10;
	if (r->max_bytes && bytes > r->max_bytes) {
		avg = bytes / rows ? bytes / rows : 1;
		uint64_t fit = (r->max_bytes - r->max_bytes / 10) / avg;
		if (fit < keep)
			keep = fit;
	}
	if (keep == 0)
		keep = 1; /* the newest row keeps the rowids going up */
	return keep < rows ? rows - keep : 0;
}

int recorder_commit(struct recorder *r, char *err, size_t errlen)
{
	uint64_t rows = r->rows + r->prow, bytes = r->bytes + r->pbytes;
	uint64_t cut = excess(r, rows, bytes), cut_bytes = 0;
	int rc;

	if (cut) {
		cut_bytes = bytes / rows * cut;
		rc = store_stmt_int(r->trim, 1, r->first + (int64_t)cut);
		if (!rc)
			rc = store_stmt_run(r->trim, err, errlen);
		if (rc) {
			recorder_rollback(r);
			return rc;
		}
	}
	rc = store_commit(r->st, err, errlen);
	if (rc) {
		r->prow = r->pbytes = 0;
		return rc;
	}
	r->first += (int64_t)cut;
	r->rows = rows - cut;
	r->bytes = bytes - cut_bytes;
	r->added += r->prow;
	r->trimmed += cut;
	r->prow = r->pbytes = 0;
	return 0;
}

void recorder_rollback(struct recorder *r)
{
	store_rollback(r->st);
	r->prow = r->pbytes = 0;
}

void recorder_stats(const struct recorder *r, struct recorder_stats *out)
{
	out->rows = r->rows;
	out->bytes = r->bytes;
	out->added = r->added;
	out->trimmed = r->trimmed;
}
