/*
 * store: schemas, live tables, query limits, refusals, threads.
 */
#include "livetab.h"
#include "store.h"
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static int thread_calls;

/* python.threads: three fake threads. */
static int snap_threads(void *ctx, struct livetab_rows *rows, char *err,
			size_t errlen)
{
	static const struct {
		int id;
		const char *name;
		int daemon;
	} t[] = {{1, "MainThread", 0}, {2, "loader", 1}, {3, "saver", 1}};

	(void)ctx;
	(void)err;
	(void)errlen;
	__atomic_add_fetch(&thread_calls, 1, __ATOMIC_RELAXED);
	for (size_t i = 0; i < 3; i++) {
		if (livetab_rows_begin(rows) ||
		    livetab_rows_int(rows, t[i].id) ||
		    livetab_rows_text(rows, t[i].name) ||
		    livetab_rows_int(rows, t[i].daemon))
			return -ENOMEM;
	}
	return 0;
}

/* python.backtrace: thread 1 has 3 frames, 2 has 2, 3 has 1. */
static int snap_frames(void *ctx, struct livetab_rows *rows, char *err,
		       size_t errlen)
{
	(void)ctx;
	(void)err;
	(void)errlen;
	for (int tid = 1; tid <= 3; tid++)
		for (int d = 0; d <= 3 - tid; d++) {
			char func[32];

			snprintf(func, sizeof(func), "f%d_%d", tid, d);
			if (livetab_rows_begin(rows) ||
			    livetab_rows_int(rows, tid) ||
			    livetab_rows_int(rows, d) ||
			    livetab_rows_text(rows, func) ||
			    livetab_rows_real(rows, tid + d / 10.0))
				return -ENOMEM;
		}
	return 0;
}

static int snap_broken(void *ctx, struct livetab_rows *rows, char *err,
		       size_t errlen)
{
	(void)ctx;
	(void)rows;
	snprintf(err, errlen, "interpreter is finalizing");
	return -ESHUTDOWN;
}

static const struct livetab threads_tab = {
	.schema = "python",
	.name = "threads",
	.doc = "threads now",
	.columns = "thread_id INTEGER, name TEXT, daemon INTEGER",
	.snapshot = snap_threads,
};

static const struct livetab frames_tab = {
	.schema = "python",
	.name = "backtrace",
	.doc = "stacks now",
	.columns = "thread_id INTEGER, depth INTEGER, func TEXT, t REAL",
	.snapshot = snap_frames,
};

static const struct livetab broken_tab = {
	.schema = "process",
	.name = "broken",
	.doc = "always fails",
	.columns = "x",
	.snapshot = snap_broken,
};

static struct store *new_store(void)
{
	struct store *st = NULL;
	char err[256] = "";

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	if (!st) {
		fprintf(stderr, "store_new: %s\n", err);
		exit(1);
	}
	CHECK(store_add_livetab(st, &threads_tab, NULL, err, sizeof(err)) == 0);
	CHECK(store_add_livetab(st, &frames_tab, NULL, err, sizeof(err)) == 0);
	CHECK(store_add_livetab(st, &broken_tab, NULL, err, sizeof(err)) == 0);
	return st;
}

/* Runs sql with default limits; returns the return code, err filled. */
static int q(struct store *st, const char *sql, struct store_result *res,
	     char *err, size_t errlen)
{
	err[0] = '\0';
	return store_query(st, sql, NULL, res, err, errlen);
}

/* The single value of a one-row, one-column query, as text. */
static const char *cell_text(const struct store_result *res, size_t r, size_t c)
{
	const struct store_value *v;

	if (r >= res->nrows || c >= res->ncols)
		return "(out of range)";
	v = &res->cells[r * res->ncols + c];
	return v->type == STORE_TEXT ? v->u.s.p : "(not text)";
}

static int64_t cell_int(const struct store_result *res, size_t r, size_t c)
{
	const struct store_value *v;

	if (r >= res->nrows || c >= res->ncols)
		return -999999;
	v = &res->cells[r * res->ncols + c];
	return v->type == STORE_INT ? v->u.i : -999999;
}

static void test_schemas(void)
{
	struct store *st = new_store();
	struct store_result res;
	char err[256];

	CHECK(q(st,
		"SELECT group_concat(name, ',') FROM "
		"(SELECT name FROM pragma_database_list ORDER BY seq)",
		&res, err, sizeof(err)) == 0);
	CHECK_STR(cell_text(&res, 0, 0),
		  "main,temp,python,process,profile,gpu,app,probing,cluster");
	store_result_release(&res);
	store_result_release(&res); /* twice is fine */

	/* Catalog: itself, the live tables, a recorded one. */
	CHECK(store_exec(st, "CREATE TABLE process.memory(ts REAL, rss INT);",
			 err, sizeof(err)) == 0);
	CHECK(store_catalog_add(st, "process", "memory", NULL,
				"rss over time") == 0);
	CHECK(q(st,
		"SELECT group_concat(schema||'.'||name||':'||kind, ' ') "
		"FROM (SELECT * FROM probing.tables ORDER BY schema, name)",
		&res, err, sizeof(err)) == 0);
	CHECK_STR(cell_text(&res, 0, 0),
		  "probing.tables:catalog process.broken:live "
		  "process.memory:recorded python.backtrace:live "
		  "python.threads:live");
	store_result_release(&res);
	CHECK(q(st, "SELECT doc FROM probing.tables WHERE name = 'threads'",
		&res, err, sizeof(err)) == 0);
	CHECK_STR(cell_text(&res, 0, 0), "threads now");
	store_result_release(&res);

	/* A live table cannot be added twice. */
	CHECK(store_add_livetab(st, &threads_tab, NULL, err, sizeof(err)) ==
	      STORE_ESQL);
	CHECK(strstr(err, "already exists") != NULL);
	CHECK(q(st, "SELECT count(*) FROM python.threads", &res, err,
		sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == 3);
	store_result_release(&res);
	store_free(st);
	store_free(NULL);
}

static void test_live_queries(void)
{
	struct store *st = new_store();
	struct store_result res;
	char err[256];

	thread_calls = 0;
	CHECK(q(st,
		"SELECT name FROM python.threads WHERE daemon = 1 "
		"ORDER BY name DESC",
		&res, err, sizeof(err)) == 0);
	CHECK(thread_calls == 1);
	CHECK(res.nrows == 2 && res.ncols == 1);
	CHECK_STR(res.cols[0].name, "name");
	CHECK_STR(res.cols[0].decltype, "TEXT");
	CHECK_STR(cell_text(&res, 0, 0), "saver");
	CHECK_STR(cell_text(&res, 1, 0), "loader");
	CHECK(res.truncated == 0);
	CHECK(res.elapsed_ms >= 0 && res.elapsed_ms < 5000);
	store_result_release(&res);

	CHECK(q(st, "SELECT count(*) FROM python.threads", &res, err,
		sizeof(err)) == 0);
	CHECK(thread_calls == 2); /* a snapshot per scan */
	store_result_release(&res);

	CHECK(q(st,
		"SELECT t.name, count(*) AS n, max(b.depth) AS top "
		"FROM python.threads t JOIN python.backtrace b "
		"USING (thread_id) GROUP BY t.name ORDER BY n DESC",
		&res, err, sizeof(err)) == 0);
	CHECK(res.nrows == 3 && res.ncols == 3);
	CHECK_STR(res.cols[1].name, "n");
	CHECK_STR(res.cols[1].decltype, "");
	CHECK_STR(cell_text(&res, 0, 0), "MainThread");
	CHECK(cell_int(&res, 0, 1) == 3);
	CHECK(cell_int(&res, 0, 2) == 2);
	CHECK_STR(cell_text(&res, 2, 0), "saver");
	CHECK(cell_int(&res, 2, 1) == 1);
	store_result_release(&res);

	/* Analysis in temp and main works. */
	CHECK(q(st, "CREATE TEMP TABLE snap AS SELECT * FROM python.backtrace",
		&res, err, sizeof(err)) == 0);
	CHECK(res.ncols == 0 && res.nrows == 0);
	store_result_release(&res);
	CHECK(q(st, "CREATE TABLE mine(x)", &res, err, sizeof(err)) == 0);
	store_result_release(&res);
	CHECK(q(st, "INSERT INTO mine SELECT func FROM temp.snap;", &res, err,
		sizeof(err)) == 0);
	store_result_release(&res);
	CHECK(q(st, "SELECT count(*) FROM mine", &res, err, sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == 6);
	store_result_release(&res);

	/* The provider's error is the query's error. */
	CHECK(q(st, "SELECT * FROM process.broken", &res, err, sizeof(err)) ==
	      STORE_ESQL);
	CHECK_STR(err, "process.broken: interpreter is finalizing");
	store_result_release(&res);
	store_free(st);
}

static void test_bad_sql(void)
{
	struct store *st = new_store();
	struct store_result res;
	char err[256];

	CHECK(q(st, "SELEC 1", &res, err, sizeof(err)) == STORE_ESQL);
	CHECK(strstr(err, "syntax error") != NULL);
	store_result_release(&res);
	CHECK(q(st, "SELECT * FROM python.nope", &res, err, sizeof(err)) ==
	      STORE_ESQL);
	/* Said to be SQLite's, with where the tables are listed. */
	CHECK(!strncmp(err, "no such table: python.nope (SQLite's SQL)\nhint: ",
		       48));
	store_result_release(&res);
	CHECK(q(st, "SELECT 1; SELECT 2", &res, err, sizeof(err)) ==
	      STORE_ESQL);
	CHECK_STR(err, "only one statement allowed");
	store_result_release(&res);
	CHECK(q(st, "SELECT 1; garbage", &res, err, sizeof(err)) == STORE_ESQL);
	CHECK_STR(err, "only one statement allowed");
	store_result_release(&res);
	CHECK(q(st, "  SELECT 1 ; ;\n -- done\n /* c */ ", &res, err,
		sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == 1);
	store_result_release(&res);
	CHECK(q(st, "", &res, err, sizeof(err)) == STORE_ESQL);
	CHECK_STR(err, "empty statement");
	CHECK(q(st, " ; -- nothing", &res, err, sizeof(err)) == STORE_ESQL);
	CHECK(store_query(st, NULL, NULL, &res, err, sizeof(err)) ==
	      STORE_ESQL);
	/* A NULL or empty err buffer is fine. */
	CHECK(store_query(st, "SELEC", NULL, &res, NULL, 0) == STORE_ESQL);
	store_result_release(&res);
	CHECK(q(st, "SELECT abs(-9223372036854775808)", &res, err,
		sizeof(err)) == STORE_ESQL);
	CHECK_STR(err, "integer overflow");
	store_result_release(&res);
	CHECK(store_exec(st,
			 "CREATE TABLE python.x(a); INSERT INTO python.x "
			 "VALUES (1), (2);",
			 err, sizeof(err)) == 0);
	CHECK(store_exec(st, "INSERT INTO nowhere VALUES (1)", err,
			 sizeof(err)) == STORE_ESQL);
	CHECK_STR(err, "no such table: nowhere");
	store_free(st);
}

static void test_limits(void)
{
	struct store *st = new_store();
	struct store_result res;
	struct store_limits lim = {0};
	char err[256];
	int rc;

	lim.max_rows = 5;
	CHECK(store_query(st,
			  "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT "
			  "x+1 FROM c LIMIT 100) SELECT x FROM c",
			  &lim, &res, err, sizeof(err)) == 0);
	CHECK(res.nrows == 5 && res.truncated == 1);
	CHECK(cell_int(&res, 4, 0) == 5);
	store_result_release(&res);
	CHECK(store_query(st, "SELECT * FROM python.threads", &lim, &res, err,
			  sizeof(err)) == 0);
	CHECK(res.nrows == 3 && res.truncated == 0);
	store_result_release(&res);
	lim.max_rows = 3;
	CHECK(store_query(st, "SELECT * FROM python.threads", &lim, &res, err,
			  sizeof(err)) == 0);
	CHECK(res.nrows == 3 && res.truncated == 0);
	store_result_release(&res);

	/* Time cap. */
	lim.max_rows = 0;
	lim.timeout_ms = 200;
	rc = store_query(st,
			 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT "
			 "x+1 FROM c) SELECT count(*) FROM c",
			 &lim, &res, err, sizeof(err));
	CHECK(rc == STORE_ETIMEOUT);
	CHECK_STR(err, "query stopped after 200 ms");
	CHECK(res.elapsed_ms >= 190 && res.elapsed_ms < 2000);
	store_result_release(&res);
	/* The store works after a timeout, and the deadline was per query. */
	CHECK(store_query(st, "SELECT 42", &lim, &res, err, sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == 42);
	store_result_release(&res);

	/* Byte cap: 100 rows of 1000 bytes do not fit in 50000. */
	lim.timeout_ms = 0;
	lim.max_bytes = 50000;
	rc = store_query(st,
			 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT "
			 "x+1 FROM c LIMIT 100) SELECT x, randomblob(1000) "
			 "FROM c",
			 &lim, &res, err, sizeof(err));
	CHECK(rc == STORE_EFULL);
	CHECK(strstr(err, "50000 bytes") != NULL);
	CHECK(res.nrows > 10 && res.nrows < 50 && res.truncated == 1);
	CHECK(res.cells[(res.nrows - 1) * 2 + 1].type == STORE_BLOB);
	store_result_release(&res);
	rc = store_query(st, "SELECT zeroblob(100000)", &lim, &res, err,
			 sizeof(err));
	CHECK(rc == STORE_EFULL && res.nrows == 0);
	store_result_release(&res);
	lim.max_bytes = 0;
	/* Values past SQLite's length limit (64 MiB) are SQL errors. */
	CHECK(store_query(st, "SELECT zeroblob(100000000)", &lim, &res, err,
			  sizeof(err)) == STORE_ESQL);
	CHECK_STR(err, "string or blob too big");
	store_result_release(&res);
	/* Default caps hold a sizeable result. */
	CHECK(store_query(st,
			  "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT "
			  "x+1 FROM c LIMIT 20000) SELECT x, 'r' || x FROM c",
			  &lim, &res, err, sizeof(err)) == 0);
	CHECK(res.nrows == 10000 && res.truncated == 1);
	CHECK_STR(cell_text(&res, 9999, 1), "r10000");
	store_result_release(&res);
	/* Huge limits are clamped, not trusted. */
	lim.max_rows = (size_t)-1;
	lim.timeout_ms = 1 << 30;
	lim.max_bytes = (size_t)-1;
	CHECK(store_query(st, "SELECT 1", &lim, &res, err, sizeof(err)) == 0);
	store_result_release(&res);
	store_free(st);
}

static void test_types(void)
{
	struct store *st = new_store();
	struct store_result res;
	char err[256];

	CHECK(q(st,
		"SELECT NULL, 9223372036854775807, -0.5, 'h\xc3\xa9llo', "
		"x'00ff00', '', x'', CAST(1e308 AS REAL), "
		"-9223372036854775807 - 1",
		&res, err, sizeof(err)) == 0);
	CHECK(res.nrows == 1 && res.ncols == 9);
	if (res.nrows == 1 && res.ncols == 9) {
		struct store_value *v = res.cells;

		CHECK(v[0].type == STORE_NULL);
		CHECK(v[1].type == STORE_INT && v[1].u.i == INT64_MAX);
		CHECK(v[2].type == STORE_REAL && v[2].u.d == -0.5);
		CHECK(v[3].type == STORE_TEXT && v[3].u.s.len == 6);
		CHECK_STR(v[3].u.s.p, "h\xc3\xa9llo");
		CHECK(v[4].type == STORE_BLOB && v[4].u.s.len == 3 &&
		      memcmp(v[4].u.s.p, "\0\xff\0", 3) == 0);
		CHECK(v[5].type == STORE_TEXT && v[5].u.s.len == 0 &&
		      v[5].u.s.p && v[5].u.s.p[0] == '\0');
		CHECK(v[6].type == STORE_BLOB && v[6].u.s.len == 0 &&
		      v[6].u.s.p != NULL);
		CHECK(v[7].type == STORE_REAL && v[7].u.d == 1e308);
		CHECK(v[8].type == STORE_INT && v[8].u.i == INT64_MIN);
	}
	store_result_release(&res);
	/* Text with a NUL inside keeps its length. */
	CHECK(q(st, "SELECT CAST(x'610062' AS TEXT)", &res, err, sizeof(err)) ==
	      0);
	CHECK(res.cells[0].type == STORE_TEXT && res.cells[0].u.s.len == 3);
	store_result_release(&res);
	/* Declared types come through a table. */
	CHECK(store_exec(st,
			 "CREATE TABLE profile.t(a INTEGER, b BLOB, c);"
			 "INSERT INTO profile.t VALUES (1, x'01', 2.0)",
			 err, sizeof(err)) == 0);
	CHECK(q(st, "SELECT * FROM profile.t", &res, err, sizeof(err)) == 0);
	CHECK_STR(res.cols[0].decltype, "INTEGER");
	CHECK_STR(res.cols[1].decltype, "BLOB");
	CHECK_STR(res.cols[2].decltype, "");
	CHECK_STR(res.cols[2].name, "c");
	store_result_release(&res);

	CHECK_STR(store_type_name(STORE_NULL), "NULL");
	CHECK_STR(store_type_name(STORE_INT), "INTEGER");
	CHECK_STR(store_type_name(STORE_REAL), "REAL");
	CHECK_STR(store_type_name(STORE_TEXT), "TEXT");
	CHECK_STR(store_type_name(STORE_BLOB), "BLOB");
	CHECK_STR(store_type_name((enum store_type)42), "?");
	store_free(st);
}

/* Each of these must be refused with a message saying why. */
static void test_refusals(void)
{
	static const struct {
		const char *sql;
		const char *why;
	} no[] = {
		{"ATTACH '/tmp/probing-test.db' AS f", "ATTACH"},
		{"ATTACH ':memory:' AS f", "ATTACH"},
		{"DETACH python", "DETACH"},
		{"DETACH DATABASE probing", "DETACH"},
		{"VACUUM INTO '/tmp/probing-test.db'", "ATTACH"},
		{"SELECT load_extension('/tmp/x.so')", "load_extension"},
		{"BEGIN", "transactions"},
		{"SAVEPOINT a", "transactions"},
		{"CREATE TEMP TRIGGER tr AFTER INSERT ON python.x BEGIN "
		 "SELECT 1; END",
		 "triggers"},
		{"DROP TABLE python.threads", "read-only"},
		{"DROP TABLE probing.tables", "read-only"},
		{"DELETE FROM probing.tables", "read-only"},
		{"INSERT INTO python.x VALUES (3)", "read-only"},
		{"UPDATE python.x SET a = 0", "read-only"},
		{"CREATE TABLE process.y(a)", "read-only"},
		{"CREATE INDEX python.i ON x(a)", "read-only"},
		{"ALTER TABLE python.x ADD COLUMN b", "read-only"},
		{"ALTER TABLE python.x RENAME TO z", "read-only"},
		{"CREATE VIEW python.v AS SELECT 1", "read-only"},
		{"PRAGMA python.max_page_count = 10", "PRAGMA"},
		{"PRAGMA writable_schema = 1", "PRAGMA"},
		/* Raw pointers: the tokenizer's address leaked, then a
		 * forged one called (a general protection fault). */
		{"SELECT fts3_tokenizer('simple')", "fts3_tokenizer"},
		{"SELECT fts3_tokenizer('evil', x'4141414141414141')",
		 "fts3_tokenizer"},
		{"CREATE VIRTUAL TABLE e USING fts3(x, tokenize=simple)",
		 "virtual tables"},
		{"CREATE VIRTUAL TABLE temp.e USING fts4(x)", "virtual tables"},
		{"CREATE VIRTUAL TABLE r USING rtree(id, a, b)",
		 "virtual tables"},
		{"SELECT sqlite_compileoption_get(0)", "function"},
		{"SELECT rtreenode(2, x'00')", "function"},
		{"SELECT sqlite_log(1, 'x')", "function"},
		{"SELECT fts5(NULL)", "function"},
	};
	struct store *st = new_store();
	struct store_result res;
	char err[256];

	CHECK(store_exec(st,
			 "CREATE TABLE python.x(a); INSERT INTO python.x "
			 "VALUES (1);",
			 err, sizeof(err)) == 0);
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
		int rc = q(st, no[i].sql, &res, err, sizeof(err));

		CHECK(rc == STORE_ESQL);
		if (rc != STORE_ESQL || !strstr(err, no[i].why))
			fprintf(stderr, "  %s -> %d %s\n", no[i].sql, rc, err);
		CHECK(strstr(err, no[i].why) != NULL);
		store_result_release(&res);
	}
	/* Nothing changed. */
	CHECK(q(st, "SELECT count(*) FROM pragma_database_list", &res, err,
		sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == 9);
	store_result_release(&res);
	CHECK(q(st, "SELECT count(*) FROM python.x", &res, err, sizeof(err)) ==
	      0);
	CHECK(cell_int(&res, 0, 0) == 1);
	store_result_release(&res);
	CHECK(q(st, "SELECT count(*) FROM python.threads", &res, err,
		sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == 3);
	store_result_release(&res);
	CHECK(access("/tmp/probing-test.db", F_OK) != 0);
	/* Reading PRAGMAs is fine. */
	CHECK(q(st, "PRAGMA python.table_info(x)", &res, err, sizeof(err)) ==
	      0);
	CHECK(res.nrows == 1);
	store_result_release(&res);
	CHECK(q(st, "PRAGMA page_size", &res, err, sizeof(err)) == 0);
	store_result_release(&res);
	/* Functions a person analysing a profile writes are fine. */
	CHECK(q(st,
		"SELECT json_object('a', round(avg(a), 2)), "
		"strftime('%Y', 'now'), printf('%d', count(*)), "
		"group_concat(a), max(a), upper('x'), sqrt(4), "
		"row_number() OVER () FROM python.x",
		&res, err, sizeof(err)) == 0);
	store_result_release(&res);
	/* Scratch tables in main and temp are fine... */
	CHECK(q(st, "CREATE TABLE scratch(a)", &res, err, sizeof(err)) == 0);
	store_result_release(&res);
	/* store_exec is trusted. */
	CHECK(store_exec(st, "INSERT INTO python.x VALUES (2)", err,
			 sizeof(err)) == 0);
	store_free(st);
}

/* ...but not in a read-only session: no table, view or row anywhere. */
static void test_read_only(void)
{
	static const char *const no[] = {
		"CREATE TABLE scratch2(a)",
		"CREATE TEMP TABLE t(a)",
		"CREATE TEMP VIEW v AS SELECT 1",
		"CREATE VIEW v AS SELECT 1",
		"INSERT INTO scratch VALUES (1)",
		"DELETE FROM scratch",
		"UPDATE scratch SET a = 2",
		"DROP TABLE scratch",
		"CREATE INDEX i ON scratch(a)",
		"ALTER TABLE scratch ADD COLUMN b",
	};
	struct store_limits ro = {.read_only = 1};
	struct store *st = new_store();
	struct store_result res;
	char err[256];

	CHECK(store_exec(st, "CREATE TABLE scratch(a)", err, sizeof(err)) ==
	      0);
	for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
		int rc = store_query(st, no[i], &ro, &res, err, sizeof(err));

		CHECK(rc == STORE_ESQL && strstr(err, "read-only mode"));
		if (rc != STORE_ESQL)
			fprintf(stderr, "  %s -> %d %s\n", no[i], rc, err);
		store_result_release(&res);
	}
	CHECK(store_query(st, "SELECT count(*) FROM scratch", &ro, &res, err,
			  sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == 0);
	store_result_release(&res);
	CHECK(store_query(st, "SELECT name FROM python.threads", &ro, &res,
			  err, sizeof(err)) == 0);
	store_result_release(&res);
	store_free(st);
}

#define NTHREADS 4

struct worker {
	struct store *st;
	int id;
	int failures;
	int queries;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct timespec t0, t;
	struct store_result res;
	char err[256];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		struct store_limits lim = {.timeout_ms = 50};
		int rc;

		rc = store_query(
			w->st,
			"SELECT t.name, count(*) FROM python.threads t "
			"JOIN python.backtrace b USING (thread_id) "
			"GROUP BY 1 ORDER BY 2",
			NULL, &res, err, sizeof(err));
		if (rc || res.nrows != 3 || cell_int(&res, 2, 1) != 3)
			w->failures++;
		store_result_release(&res);
		rc = store_query(w->st,
				 "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
				 "SELECT x+1 FROM c LIMIT 2000) SELECT sum(x) "
				 "FROM c",
				 NULL, &res, err, sizeof(err));
		if (rc || cell_int(&res, 0, 0) != 2001000)
			w->failures++;
		store_result_release(&res);
		if (w->queries % 50 == 0) {
			/* A query that times out must not disturb others. */
			rc = store_query(w->st,
					 "WITH RECURSIVE c(x) AS (SELECT 1 "
					 "UNION ALL SELECT x+1 FROM c) SELECT "
					 "count(*) FROM c",
					 &lim, &res, err, sizeof(err));
			if (rc != STORE_ETIMEOUT)
				w->failures++;
			store_result_release(&res);
		}
		char sql[128];
		snprintf(sql, sizeof(sql),
			 "INSERT INTO process.log VALUES (%d, %d)", w->id,
			 w->queries);
		if (store_exec(w->st, sql, err, sizeof(err)))
			w->failures++;
		w->queries++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 +
			 (t.tv_nsec - t0.tv_nsec) / 1000000 <
		 1500);
	return NULL;
}

static void test_threads(void)
{
	struct store *st = new_store();
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	struct store_result res;
	char err[256];
	int total = 0;

	CHECK(store_exec(st, "CREATE TABLE process.log(id, n)", err,
			 sizeof(err)) == 0);
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){.st = st, .id = i};
		CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK(w[i].failures == 0);
		CHECK(w[i].queries > 0);
		total += w[i].queries;
	}
	CHECK(q(st, "SELECT count(*) FROM process.log", &res, err,
		sizeof(err)) == 0);
	CHECK(cell_int(&res, 0, 0) == total);
	store_result_release(&res);
	store_free(st);
}

TEST_MAIN(test_schemas, test_live_queries, test_bad_sql, test_limits,
	  test_types, test_refusals, test_read_only, test_threads)
