/*
 * recorder: recorded tables with retention by rows and bytes.
 */
#include <errno.h>

#include "recorder.h"
#include "store.h"
#include "test.h"

static int64_t count(struct store *st, const char *sql)
{
	struct store_result res;
	char err[256];
	int64_t n = -1;

	if (store_query(st, sql, NULL, &res, err, sizeof(err)) == 0 &&
	    res.nrows == 1 && res.cells[0].type == STORE_INT)
		n = res.cells[0].u.i;
	store_result_release(&res);
	return n;
}

static void add_rows(struct recorder *r, int from, int n, size_t bytes)
{
	char err[256];

	CHECK(recorder_begin(r, err, sizeof(err)) == 0);
	for (int i = from; i < from + n; i++) {
		CHECK(store_stmt_int(recorder_stmt(r), 1, i) == 0);
		CHECK(store_stmt_text(recorder_stmt(r), 2, "x") == 0);
		CHECK(recorder_add(r, bytes, err, sizeof(err)) == 0);
	}
	CHECK(recorder_commit(r, err, sizeof(err)) == 0);
}

static void test_rows_bound(void)
{
	struct recorder_opts o = {
		.schema = "process",
		.name = "t",
		.columns = "i INTEGER, s TEXT",
		.doc = "test table",
		.max_rows = 100,
	};
	struct store *st = NULL;
	struct recorder *r = NULL;
	struct recorder_stats s;
	char err[256];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(recorder_new(st, &o, &r, err, sizeof(err)) == 0);
	CHECK(count(st, "SELECT count(*) FROM probing.tables WHERE "
			"schema = 'process' AND name = 't' AND kind = "
			"'recorded'") == 1);
	add_rows(r, 0, 60, 10);
	CHECK(count(st, "SELECT count(*) FROM process.t") == 60);
	add_rows(r, 60, 60, 10);
	/* 120 > 100: trimmed to 90, the oldest gone. */
	CHECK(count(st, "SELECT count(*) FROM process.t") == 90);
	CHECK(count(st, "SELECT min(i) FROM process.t") == 30);
	CHECK(count(st, "SELECT max(i) FROM process.t") == 119);
	recorder_stats(r, &s);
	CHECK(s.rows == 90 && s.added == 120 && s.trimmed == 30);
	for (int k = 0; k < 50; k++)
		add_rows(r, 120 + k * 7, 7, 10);
	CHECK(count(st, "SELECT count(*) FROM process.t") <= 100);
	CHECK(count(st, "SELECT max(i) FROM process.t") == 120 + 50 * 7 - 1);
	/* Rows stay contiguous: the newest ones. */
	CHECK(count(st, "SELECT max(i) - min(i) + 1 - count(*) FROM "
			"process.t") == 0);
	/* A query may not write into the table. */
	struct store_result res = {0};
	CHECK(store_query(st, "DELETE FROM process.t", NULL, &res, err,
			  sizeof(err)) != 0);
	store_result_release(&res);
	recorder_free(r);
	/* Made again: continues the table and is listed once. */
	CHECK(recorder_new(st, &o, &r, err, sizeof(err)) == 0);
	recorder_stats(r, &s);
	CHECK(s.rows == (uint64_t)count(st, "SELECT count(*) FROM process.t"));
	add_rows(r, 1000, 200, 10);
	CHECK(count(st, "SELECT count(*) FROM process.t") == 90);
	CHECK(count(st, "SELECT max(i) FROM process.t") == 1199);
	CHECK(count(st, "SELECT count(*) FROM probing.tables WHERE "
			"name = 't'") == 1);
	recorder_free(r);
	store_free(st);
}

static void test_bytes_bound(void)
{
	struct recorder_opts o = {
		.schema = "python",
		.name = "b",
		.columns = "i INTEGER, s TEXT",
		.max_bytes = 10000,
	};
	struct store *st = NULL;
	struct recorder *r = NULL;
	struct recorder_stats s;
	char err[256];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(recorder_new(st, &o, &r, err, sizeof(err)) == 0);
	for (int k = 0; k < 20; k++)
		add_rows(r, k * 50, 50, 100); /* 5000 bytes a batch */
	recorder_stats(r, &s);
	CHECK(s.bytes <= 10000);
	CHECK(count(st, "SELECT count(*) FROM python.b") <= 100);
	CHECK(count(st, "SELECT max(i) FROM python.b") == 999);
	/* A bound lowered at run time applies at the next commit. */
	recorder_limits(r, 10, 0);
	add_rows(r, 1000, 1, 100);
	CHECK(count(st, "SELECT count(*) FROM python.b") == 9);
	/* One batch bigger than the whole bound keeps its newest row. */
	recorder_limits(r, 0, 50);
	add_rows(r, 2000, 5, 100);
	CHECK(count(st, "SELECT count(*) FROM python.b") == 1);
	CHECK(count(st, "SELECT max(i) FROM python.b") == 2004);
	add_rows(r, 3000, 1, 10);
	CHECK(count(st, "SELECT max(i) FROM python.b") == 3000);
	recorder_free(r);
	store_free(st);
}

static void test_errors(void)
{
	struct recorder_opts bad = {
		.schema = "python",
		.name = "x; DROP",
		.columns = "a",
	};
	struct recorder_opts ok = {
		.schema = "python",
		.name = "y",
		.columns = "a INTEGER",
	};
	struct store *st = NULL;
	struct recorder *r = NULL;
	char err[256];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(recorder_new(st, &bad, &r, err, sizeof(err)) == -EINVAL);
	CHECK(r == NULL);
	CHECK(recorder_new(st, &ok, &r, err, sizeof(err)) == 0);
	/* A rolled-back batch is not counted. */
	CHECK(recorder_begin(r, err, sizeof(err)) == 0);
	CHECK(store_stmt_int(recorder_stmt(r), 1, 5) == 0);
	CHECK(recorder_add(r, 8, err, sizeof(err)) == 0);
	recorder_rollback(r);
	CHECK(count(st, "SELECT count(*) FROM python.y") == 0);
	struct recorder_stats s;
	recorder_stats(r, &s);
	CHECK(s.rows == 0 && s.added == 0);
	recorder_free(r);
	recorder_free(NULL);
	store_free(st);
}

TEST_MAIN(test_rows_bound, test_bytes_bound, test_errors)
