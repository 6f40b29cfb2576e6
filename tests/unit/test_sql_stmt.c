/*
 * store: prepared statements and batches (store_stmt_*, store_begin/commit).
 */
#include "store.h"
#include "test.h"

#include <pthread.h>

static struct store *open_store(void)
{
	struct store *st = NULL;
	char err[256];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(store_exec(st,
			 "CREATE TABLE profile.t(a INTEGER, b REAL, c TEXT)",
			 err, sizeof(err)) == 0);
	return st;
}

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

static void test_insert_batch(void)
{
	struct store *st = open_store();
	struct store_stmt *s = NULL, *q = NULL;
	char err[256];
	int64_t v = -1;

	CHECK(store_stmt_new(st, "INSERT INTO profile.t VALUES (?1, ?2, ?3)",
			     &s, err, sizeof(err)) == 0);
	CHECK(store_begin(st, err, sizeof(err)) == 0);
	for (int i = 0; i < 1000; i++) {
		CHECK(store_stmt_int(s, 1, i) == 0);
		CHECK(store_stmt_real(s, 2, i / 2.0) == 0);
		CHECK(store_stmt_text(s, 3, i % 2 ? "odd" : NULL) == 0);
		CHECK(store_stmt_run(s, err, sizeof(err)) == 0);
	}
	CHECK(store_commit(st, err, sizeof(err)) == 0);
	CHECK(count(st, "SELECT count(*) FROM profile.t") == 1000);
	CHECK(count(st, "SELECT count(*) FROM profile.t WHERE c IS NULL") ==
	      500);
	CHECK(count(st, "SELECT sum(a) FROM profile.t") == 999 * 500);
	/* Bindings are cleared after a run: NULLs. */
	CHECK(store_stmt_run(s, err, sizeof(err)) == 0);
	CHECK(count(st, "SELECT count(*) FROM profile.t WHERE a IS NULL") ==
	      1);
	/* A bad parameter index is an error, not a crash. */
	CHECK(store_stmt_int(s, 9, 1) == STORE_ESQL);
	/* Results. */
	CHECK(store_stmt_new(st, "SELECT max(a) FROM profile.t WHERE a < ?1",
			     &q, err, sizeof(err)) == 0);
	CHECK(store_stmt_int(q, 1, 10) == 0);
	CHECK(store_stmt_int_result(q, &v, err, sizeof(err)) == 0);
	CHECK(v == 9);
	store_stmt_free(q);
	store_stmt_free(s);
	store_free(st);
}

static void test_rollback_and_errors(void)
{
	struct store *st = open_store();
	struct store_stmt *s = NULL;
	char err[256] = "";

	CHECK(store_stmt_new(st, "INSERT INTO nowhere VALUES (1)", &s, err,
			     sizeof(err)) == STORE_ESQL);
	CHECK(s == NULL && strstr(err, "nowhere"));
	CHECK(store_stmt_new(st, "INSERT INTO profile.t(a) VALUES (?1)", &s,
			     err, sizeof(err)) == 0);
	CHECK(store_begin(st, err, sizeof(err)) == 0);
	CHECK(store_stmt_int(s, 1, 7) == 0);
	CHECK(store_stmt_run(s, err, sizeof(err)) == 0);
	store_rollback(st);
	CHECK(count(st, "SELECT count(*) FROM profile.t") == 0);
	/* The recorders' path may write the built-in schemas, queries may
	 * not. */
	{
		struct store_result res;

		CHECK(store_query(st, "INSERT INTO profile.t(a) VALUES (1)",
				  NULL, &res, err, sizeof(err)) == STORE_ESQL);
		store_result_release(&res);
	}
	store_stmt_free(s);
	store_stmt_free(NULL);
	store_free(st);
}

/* A query on another thread waits for a batch and sees all of it. */
struct reader {
	struct store *st;
	int64_t seen;
};

static void *read_count(void *arg)
{
	struct reader *r = arg;

	r->seen = count(r->st, "SELECT count(*) FROM profile.t");
	return NULL;
}

static void test_batch_is_atomic(void)
{
	struct store *st = open_store();
	struct store_stmt *s = NULL;
	struct reader r = {.st = st, .seen = -1};
	pthread_t th;
	char err[256];

	CHECK(store_stmt_new(st, "INSERT INTO profile.t(a) VALUES (?1)", &s,
			     err, sizeof(err)) == 0);
	CHECK(store_begin(st, err, sizeof(err)) == 0);
	pthread_create(&th, NULL, read_count, &r);
	for (int i = 0; i < 100; i++) {
		store_stmt_int(s, 1, i);
		CHECK(store_stmt_run(s, err, sizeof(err)) == 0);
	}
	CHECK(store_commit(st, err, sizeof(err)) == 0);
	pthread_join(th, NULL);
	CHECK(r.seen == 100);
	store_stmt_free(s);
	store_free(st);
}

static void test_read_rows(void)
{
	struct store *st = open_store();
	struct store_stmt *ins = NULL, *sel = NULL;
	char err[256];
	int rc, n = 0;
	double sum = 0;

	CHECK(store_stmt_new(st, "INSERT INTO profile.t VALUES (?1, ?2, ?3)",
			     &ins, err, sizeof(err)) == 0);
	for (int i = 1; i <= 5; i++) {
		store_stmt_int(ins, 1, i);
		store_stmt_real(ins, 2, i * 0.5);
		store_stmt_text(ins, 3, i == 3 ? NULL : "x");
		CHECK(store_stmt_run(ins, err, sizeof(err)) == 0);
	}
	CHECK(store_stmt_new(st, "SELECT a, b, c FROM profile.t WHERE a >= ?1 "
				 "ORDER BY a",
			     &sel, err, sizeof(err)) == 0);
	CHECK(store_begin(st, err, sizeof(err)) == 0);
	store_stmt_int(sel, 1, 2);
	while ((rc = store_stmt_step(sel, err, sizeof(err))) == 1) {
		n++;
		CHECK(store_stmt_col_int(sel, 0) == n + 1);
		sum += store_stmt_col_real(sel, 1);
		if (store_stmt_col_int(sel, 0) == 3)
			CHECK(store_stmt_col_null(sel, 2) &&
			      store_stmt_col_text(sel, 2) == NULL);
		else
			CHECK_STR(store_stmt_col_text(sel, 2), "x");
	}
	CHECK(store_commit(st, err, sizeof(err)) == 0);
	CHECK(rc == 0 && n == 4 && sum == 7.0);
	/* After the end: reset, bindings cleared (a >= NULL: no rows). */
	CHECK(store_stmt_step(sel, err, sizeof(err)) == 0);
	/* Early end. */
	store_stmt_int(sel, 1, 0);
	CHECK(store_stmt_step(sel, err, sizeof(err)) == 1);
	store_stmt_reset(sel);
	store_stmt_int(sel, 1, 5);
	CHECK(store_stmt_step(sel, err, sizeof(err)) == 1);
	CHECK(store_stmt_col_int(sel, 0) == 5);
	CHECK(store_stmt_step(sel, err, sizeof(err)) == 0);
	store_stmt_free(sel);
	store_stmt_free(ins);
	store_free(st);
}

TEST_MAIN(test_insert_batch, test_rollback_and_errors, test_batch_is_atomic,
	  test_read_rows)
