/*
 * resultdb: see resultdb.h.
 */
#include "resultdb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "jsonsql.h"

struct resultdb {
	sqlite3 *db;
	sqlite3_stmt *insert;
	size_t ncols;
};

/* "name" with quotes doubled, appended to buf.  -1 when it does not fit. */
static int quoted(char *buf, size_t cap, size_t *len, const char *name)
{
	if (*len + 2 >= cap)
		return -1;
	buf[(*len)++] = '"';
	for (; *name; name++) {
		if (*len + 3 >= cap)
			return -1;
		if (*name == '"')
			buf[(*len)++] = '"';
		buf[(*len)++] = *name;
	}
	buf[(*len)++] = '"';
	buf[*len] = 0;
	return 0;
}

int resultdb_new(const char *const *names, size_t ncols,
		 struct resultdb **out, char *err, size_t errlen)
{
	struct resultdb *r = calloc(1, sizeof(*r));
	size_t cap = 64 + ncols * 16, len = 0;
	char *sql = NULL;
	int rc = -ENOMEM;

	*out = NULL;
	for (size_t i = 0; i < ncols; i++)
		cap += 2 * strlen(names[i]) + 8;
	sql = malloc(cap);
	if (!r || !sql)
		goto fail;
	if (sqlite3_open_v2(":memory:", &r->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "cannot open SQLite: %s",
			 r->db ? sqlite3_errmsg(r->db) : "out of memory");
		rc = -EIO;
		goto fail;
	}
	len = (size_t)snprintf(sql, cap, "CREATE TABLE result(rank INTEGER, "
				"host TEXT");
	for (size_t i = 0; i < ncols; i++) {
		sql[len++] = ',';
		sql[len++] = ' ';
		if (quoted(sql, cap, &len, names[i]))
			goto fail;
	}
	snprintf(sql + len, cap - len, ")");
	rc = -EINVAL;
	if (sqlite3_exec(r->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot make the result table: %s",
			 sqlite3_errmsg(r->db));
		goto fail;
	}
	len = (size_t)snprintf(sql, cap, "INSERT INTO result VALUES (?, ?");
	for (size_t i = 0; i < ncols; i++)
		len += (size_t)snprintf(sql + len, cap - len, ", ?");
	snprintf(sql + len, cap - len, ")");
	if (sqlite3_prepare_v2(r->db, sql, -1, &r->insert, NULL) != SQLITE_OK ||
	    sqlite3_exec(r->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(r->db));
		goto fail;
	}
	r->ncols = ncols;
	free(sql);
	*out = r;
	return 0;
fail:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	free(sql);
	resultdb_free(r);
	return rc;
}

void resultdb_free(struct resultdb *r)
{
	if (!r)
		return;
	sqlite3_finalize(r->insert);
	sqlite3_close(r->db);
	free(r);
}

static void bind_json(sqlite3_stmt *st, int i, const cJSON *v)
{
	struct jsonsql_value j;

	jsonsql_value(v, &j);
	if (j.kind == JSONSQL_INT)
		sqlite3_bind_int64(st, i, (sqlite3_int64)j.i);
	else if (j.kind == JSONSQL_REAL)
		sqlite3_bind_double(st, i, j.d);
	else if (j.kind == JSONSQL_TEXT)
		sqlite3_bind_text(st, i, j.text, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
	jsonsql_release(&j);
}

int resultdb_add(struct resultdb *r, int64_t rank, const char *host,
		 const cJSON *row, char *err, size_t errlen)
{
	int rc;

	if (!cJSON_IsArray(row) ||
	    (size_t)cJSON_GetArraySize(row) != r->ncols) {
		snprintf(err, errlen, "a row of %zu values was expected",
			 r->ncols);
		return -EINVAL;
	}
	if (rank < 0)
		sqlite3_bind_null(r->insert, 1);
	else
		sqlite3_bind_int64(r->insert, 1, rank);
	sqlite3_bind_text(r->insert, 2, host ? host : "", -1,
			  SQLITE_TRANSIENT);
	for (size_t i = 0; i < r->ncols; i++)
		bind_json(r->insert, (int)i + 3,
			  cJSON_GetArrayItem(row, (int)i));
	rc = sqlite3_step(r->insert);
	sqlite3_reset(r->insert);
	sqlite3_clear_bindings(r->insert);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "%s", sqlite3_errmsg(r->db));
		return -EIO;
	}
	return 0;
}

int resultdb_query(struct resultdb *r, const char *sql,
		   struct cli_table **out, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	const char *tail = NULL;
	struct cli_table *t = NULL;
	const char **cells = NULL;
	int ncols, rc, rows = 0;

	*out = NULL;
	sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL);
	if (sqlite3_prepare_v2(r->db, sql, -1, &st, &tail) != SQLITE_OK) {
		snprintf(err, errlen, "--merge: %s", sqlite3_errmsg(r->db));
		return -EINVAL;
	}
	if (!st) {
		snprintf(err, errlen, "--merge: no statement");
		return -EINVAL;
	}
	while (tail && (*tail == ' ' || *tail == '\n' || *tail == '\t' ||
			*tail == ';'))
		tail++;
	if (tail && *tail) {
		sqlite3_finalize(st);
		snprintf(err, errlen, "--merge: one statement only");
		return -EINVAL;
	}
	ncols = sqlite3_column_count(st);
	if (ncols < 1) {
		sqlite3_finalize(st);
		snprintf(err, errlen, "--merge: the statement returns no "
			 "columns");
		return -EINVAL;
	}
	cells = calloc((size_t)ncols, sizeof(*cells));
	for (int i = 0; cells && i < ncols; i++)
		cells[i] = sqlite3_column_name(st, i);
	t = cells ? cli_table_new(ncols, cells) : NULL;
	if (!t) {
		free(cells);
		sqlite3_finalize(st);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (++rows > RESULTDB_ROWS_MAX) {
			rc = SQLITE_TOOBIG;
			break;
		}
		for (int i = 0; i < ncols; i++)
			cells[i] = (const char *)sqlite3_column_text(st, i);
		if (cli_table_add(t, cells)) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "--merge: %s",
			 rc == SQLITE_TOOBIG ? "too many rows"
					     : sqlite3_errmsg(r->db));
		cli_table_free(t);
		t = NULL;
	}
	free(cells);
	sqlite3_finalize(st);
	*out = t;
	return t ? 0 : -EINVAL;
}
