/*
 * livetab: the snapshot virtual table on a bare SQLite connection.
 */
#include "livetab.h"
#include "test.h"

#include <errno.h>
#include <sqlite3.h>

static int calls;
static int snap_rc;	 /* what the provider reports */
static int snap_last_rc; /* what the last livetab_rows_* call gave */

/* Three rows: full, short (NULL tail), long (extra value ignored). */
static int snap_basic(void *ctx, struct livetab_rows *rows, char *err,
		      size_t errlen)
{
	(void)err;
	(void)errlen;
	CHECK(ctx == (void *)&calls);
	calls++;
	CHECK(livetab_rows_begin(rows) == 0);
	CHECK(livetab_rows_int(rows, 1) == 0);
	CHECK(livetab_rows_real(rows, 2.5) == 0);
	CHECK(livetab_rows_text(rows, "one") == 0);
	CHECK(livetab_rows_null(rows) == 0);
	CHECK(livetab_rows_begin(rows) == 0);
	CHECK(livetab_rows_int(rows, 2) == 0);
	CHECK(livetab_rows_begin(rows) == 0);
	CHECK(livetab_rows_int(rows, 3) == 0);
	CHECK(livetab_rows_real(rows, -1) == 0);
	CHECK(livetab_rows_text(rows, NULL) == 0);
	CHECK(livetab_rows_text(rows, "") == 0);
	CHECK(livetab_rows_text(rows, "extra") == 0);
	return 0;
}

static const struct livetab basic_tab = {
	.schema = "main",
	.name = "basic",
	.doc = "test rows",
	.columns = "a INTEGER, b REAL, c TEXT, d TEXT",
	.snapshot = snap_basic,
};

static int snap_fail(void *ctx, struct livetab_rows *rows, char *err,
		     size_t errlen)
{
	(void)ctx;
	livetab_rows_begin(rows);
	if (snap_rc && errlen)
		snprintf(err, errlen, "the GIL did not come");
	return snap_rc;
}

static int snap_silent_fail(void *ctx, struct livetab_rows *rows, char *err,
			    size_t errlen)
{
	(void)ctx;
	(void)rows;
	(void)err;
	(void)errlen;
	return -ETIMEDOUT;
}

static int snap_no_begin(void *ctx, struct livetab_rows *rows, char *err,
			 size_t errlen)
{
	(void)ctx;
	(void)err;
	(void)errlen;
	snap_last_rc = livetab_rows_int(rows, 1);
	return 0; /* ignores the error: the rows stay poisoned */
}

static int snap_many_rows(void *ctx, struct livetab_rows *rows, char *err,
			  size_t errlen)
{
	(void)ctx;
	(void)err;
	(void)errlen;
	for (int i = 0; i <= LIVETAB_ROWS_MAX; i++) {
		snap_last_rc = livetab_rows_begin(rows);
		if (snap_last_rc)
			return snap_last_rc;
	}
	return 0;
}

static int snap_big_text(void *ctx, struct livetab_rows *rows, char *err,
			 size_t errlen)
{
	static char mib[1 << 20];

	(void)ctx;
	(void)err;
	(void)errlen;
	memset(mib, 'x', sizeof(mib) - 1);
	for (int i = 0; i < 300; i++) {
		snap_last_rc = livetab_rows_begin(rows);
		if (!snap_last_rc)
			snap_last_rc = livetab_rows_text(rows, mib);
		if (snap_last_rc)
			return 0; /* returns 0 anyway */
	}
	return 0;
}

#define TAB(n, fn)                                                             \
	static const struct livetab n##_tab = {                                \
		.schema = "main",                                              \
		.name = #n,                                                    \
		.columns = "v",                                                \
		.snapshot = fn,                                                \
	}
TAB(fail, snap_fail);
TAB(silent, snap_silent_fail);
TAB(nobegin, snap_no_begin);
TAB(many, snap_many_rows);
TAB(big, snap_big_text);

static sqlite3 *open_db(void)
{
	sqlite3 *db = NULL;

	CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
	return db;
}

/* Runs sql, which gives one row, and returns its first column as text in buf
 * (or the error message); returns the SQLite result code. */
static int one(sqlite3 *db, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *stmt = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);

	buf[0] = '\0';
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_ROW) {
			const unsigned char *t = sqlite3_column_text(stmt, 0);

			snprintf(buf, len, "%s", t ? (const char *)t : "NULL");
			rc = SQLITE_OK;
		}
	}
	if (rc != SQLITE_OK)
		snprintf(buf, len, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(stmt);
	return rc;
}

static void test_rows(void)
{
	sqlite3 *db = open_db();
	char err[256], buf[256];

	CHECK(livetab_register(db, &basic_tab, &calls, err, sizeof(err)) == 0);
	calls = 0;
	CHECK(one(db,
		  "SELECT group_concat(quote(a) || ',' || quote(b) || ',' || "
		  "quote(c) || ',' || quote(d), ';') FROM basic",
		  buf, sizeof(buf)) == SQLITE_OK);
	CHECK_STR(buf, "1,2.5,'one',NULL;2,NULL,NULL,NULL;3,-1.0,NULL,''");
	CHECK(calls == 1);
	CHECK(one(db, "SELECT count(*) FROM basic WHERE a > 1", buf,
		  sizeof(buf)) == SQLITE_OK);
	CHECK_STR(buf, "2");
	CHECK(calls == 2);
	CHECK(one(db, "SELECT group_concat(rowid) FROM basic", buf,
		  sizeof(buf)) == SQLITE_OK);
	CHECK_STR(buf, "0,1,2");
	CHECK(one(db, "SELECT typeof(a) || typeof(b) || typeof(c) FROM basic",
		  buf, sizeof(buf)) == SQLITE_OK);
	CHECK_STR(buf, "integerrealtext");
	/* Read-only. */
	CHECK(one(db, "INSERT INTO basic(a) VALUES (1)", buf, sizeof(buf)) !=
	      SQLITE_OK);
	CHECK(one(db, "DELETE FROM basic", buf, sizeof(buf)) != SQLITE_OK);
	/* Not eponymous: no stray table named after the module. */
	CHECK(one(db, "SELECT count(*) FROM livetab_main_basic", buf,
		  sizeof(buf)) != SQLITE_OK);
	CHECK(strstr(buf, "no such table") != NULL);
	/* The same table twice fails, and the first still works. */
	CHECK(livetab_register(db, &basic_tab, &calls, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "already exists") != NULL);
	CHECK(one(db, "SELECT count(*) FROM basic", buf, sizeof(buf)) ==
	      SQLITE_OK);
	CHECK_STR(buf, "3");
	sqlite3_close(db);
}

static void test_errors(void)
{
	sqlite3 *db = open_db();
	char err[256], buf[256];

	CHECK(livetab_register(db, &fail_tab, NULL, err, sizeof(err)) == 0);
	CHECK(livetab_register(db, &silent_tab, NULL, err, sizeof(err)) == 0);
	CHECK(livetab_register(db, &nobegin_tab, NULL, err, sizeof(err)) == 0);

	snap_rc = -EAGAIN;
	CHECK(one(db, "SELECT count(*) FROM fail", buf, sizeof(buf)) ==
	      SQLITE_ERROR);
	CHECK_STR(buf, "main.fail: the GIL did not come");
	snap_rc = 0;
	CHECK(one(db, "SELECT count(*) FROM fail", buf, sizeof(buf)) ==
	      SQLITE_OK);
	CHECK_STR(buf, "1");

	CHECK(one(db, "SELECT * FROM silent", buf, sizeof(buf)) ==
	      SQLITE_ERROR);
	CHECK(strstr(buf, "main.silent: snapshot failed") == buf);

	CHECK(one(db, "SELECT * FROM nobegin", buf, sizeof(buf)) ==
	      SQLITE_ERROR);
	CHECK(snap_last_rc == -EINVAL);
	CHECK(strstr(buf, "before its first row") != NULL);

	/* Bad descriptions and column lists fail cleanly. */
	static const struct livetab bad_cols = {
		.schema = "main",
		.name = "bad",
		.columns = "a INTEGER,,",
		.snapshot = snap_fail,
	};
	static const struct livetab no_fn = {
		.schema = "main",
		.name = "nofn",
		.columns = "a",
	};
	static const struct livetab no_schema = {
		.schema = "nowhere",
		.name = "x",
		.columns = "a",
		.snapshot = snap_fail,
	};
	CHECK(livetab_register(db, &bad_cols, NULL, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "bad column list") != NULL);
	CHECK(livetab_register(db, &no_fn, NULL, err, sizeof(err)) == -EINVAL);
	CHECK(livetab_register(db, &no_schema, NULL, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "nowhere") != NULL);
	CHECK(livetab_register(db, NULL, NULL, NULL, 0) == -EINVAL);
	sqlite3_close(db);
}

static void test_caps(void)
{
	sqlite3 *db = open_db();
	char err[256], buf[256];

	CHECK(livetab_register(db, &many_tab, NULL, err, sizeof(err)) == 0);
	CHECK(livetab_register(db, &big_tab, NULL, err, sizeof(err)) == 0);

	CHECK(one(db, "SELECT count(*) FROM many", buf, sizeof(buf)) ==
	      SQLITE_ERROR);
	CHECK(snap_last_rc == -E2BIG);
	CHECK(strstr(buf, "main.many: snapshot too large") == buf);

	snap_last_rc = 0;
	CHECK(one(db, "SELECT count(*) FROM big", buf, sizeof(buf)) ==
	      SQLITE_ERROR);
	CHECK(snap_last_rc == -E2BIG);
	CHECK(strstr(buf, "snapshot too large") != NULL);
	sqlite3_close(db);
}

/* Every scan takes its own snapshot: a self-join scans the table twice or
 * more, and each cursor reads its own copy. */
static void test_per_scan(void)
{
	sqlite3 *db = open_db();
	char err[256], buf[256];

	CHECK(livetab_register(db, &basic_tab, &calls, err, sizeof(err)) == 0);
	calls = 0;
	CHECK(one(db, "SELECT count(*) FROM basic x JOIN basic y ON x.a = y.a",
		  buf, sizeof(buf)) == SQLITE_OK);
	CHECK_STR(buf, "3");
	CHECK(calls >= 2);
	calls = 0;
	CHECK(one(db,
		  "SELECT count(*) FROM basic WHERE a IN "
		  "(SELECT a FROM basic WHERE c IS NULL)",
		  buf, sizeof(buf)) == SQLITE_OK);
	CHECK_STR(buf, "2");
	sqlite3_close(db);
}

/* The provider learns which columns a query reads. */
static int wanted[4];

static int snap_wants(void *ctx, struct livetab_rows *rows, char *err,
		      size_t errlen)
{
	(void)ctx, (void)err, (void)errlen;
	for (int i = 0; i < 4; i++)
		wanted[i] = livetab_rows_wants(rows, i);
	livetab_rows_begin(rows);
	livetab_rows_int(rows, 1);
	return 0;
}

static const struct livetab wants_tab = {
	.schema = "main",
	.name = "wants",
	.doc = "column use",
	.columns = "a INTEGER, b TEXT, c TEXT, d TEXT",
	.snapshot = snap_wants,
};

static void test_columns_used(void)
{
	sqlite3 *db = open_db();
	char err[256], buf[256];

	CHECK(livetab_register(db, &wants_tab, NULL, err, sizeof(err)) == 0);
	CHECK(one(db, "SELECT a FROM wants WHERE c IS NULL", buf,
		  sizeof(buf)) == SQLITE_OK);
	CHECK(wanted[0] && !wanted[1] && wanted[2] && !wanted[3]);
	CHECK(one(db, "SELECT count(*) FROM wants", buf, sizeof(buf)) ==
	      SQLITE_OK);
	CHECK(!wanted[0] && !wanted[1] && !wanted[2] && !wanted[3]);
	CHECK(one(db, "SELECT * FROM wants", buf, sizeof(buf)) == SQLITE_OK);
	CHECK(wanted[0] && wanted[1] && wanted[2] && wanted[3]);
	sqlite3_close(db);
}

TEST_MAIN(test_rows, test_errors, test_caps, test_per_scan, test_columns_used)
