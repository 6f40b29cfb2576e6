/*
 * sqlfuncs and sqlhint: durations, the nearest word, and hints on
 * SQLite's own messages (the store's catalog from a real store).
 */
#include <errno.h>
#include <string.h>

#include "nearest.h"
#include "sqlfuncs.h"
#include "sqlhint.h"
#include "store.h"
#include "test.h"

static void test_durations(void)
{
	double s = -1;

	CHECK(sqlfuncs_duration("5m", &s) == 0 && s == 300);
	CHECK(sqlfuncs_duration("5 min", &s) == 0 && s == 300);
	CHECK(sqlfuncs_duration("5 minutes", &s) == 0 && s == 300);
	CHECK(sqlfuncs_duration("1500ms", &s) == 0 && s == 1.5);
	CHECK(sqlfuncs_duration("2H", &s) == 0 && s == 7200);
	CHECK(sqlfuncs_duration("1d", &s) == 0 && s == 86400);
	CHECK(sqlfuncs_duration("42", &s) == 0 && s == 42);
	CHECK(sqlfuncs_duration("0.5s", &s) == 0 && s == 0.5);
	CHECK(sqlfuncs_duration("", &s) == -1);
	CHECK(sqlfuncs_duration("soon", &s) == -1);
	CHECK(sqlfuncs_duration("5 fortnights", &s) == -1);
	CHECK(sqlfuncs_duration("-5m", &s) == -1);
	CHECK(sqlfuncs_duration("nan", &s) == -1);
	CHECK(sqlfuncs_duration("1e300", &s) == -1);
}

static void test_nearest(void)
{
	static const char *const words[] = {"backtrace", "query", "perf",
					    "eval"};
	char long_word[200];

	CHECK(nearest_distance("kitten", "sitting") == 3);
	CHECK(nearest_distance("", "abc") == 3);
	CHECK(nearest_distance("same", "same") == 0);
	CHECK_STR(nearest_word("backtrac", words, 4), "backtrace");
	CHECK_STR(nearest_word("qury", words, 4), "query");
	CHECK(nearest_word("frobnicate", words, 4) == NULL);
	/* Short words: one edit at most. */
	CHECK(nearest_word("pf", words, 4) == NULL);
	CHECK_STR(nearest_word("evl", words, 4), "eval");
	memset(long_word, 'a', sizeof(long_word) - 1);
	long_word[sizeof(long_word) - 1] = '\0';
	CHECK(nearest_distance(long_word, "a") == NEAREST_FAR);
	CHECK(nearest_word(long_word, words, 4) == NULL);
	CHECK(nearest_word("x", words, 0) == NULL);
}

static void test_hints(void)
{
	struct store *st = NULL;
	char err[1024];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(store_catalog_add(st, "process", "memory", "recorded",
				"memory") == 0);
	sqlhint_explain(NULL, "SELECT now() - interval '5 min'",
			"near \"'5 min'\": syntax error", 1, err, sizeof(err));
	CHECK(strstr(err, "syntax error (SQLite's SQL)\nhint: SQLite has no "
			  "INTERVAL") == err + strlen("near \"'5 min'\": "));
	CHECK(strstr(err, "ago('5 min') or now() - 300") != NULL);
	/* Through a real query: the catalog gives the table's schema. */
	{
		struct store_result res = {0};

		CHECK(store_query(st, "SELECT * FROM memroy", NULL, &res, err,
				  sizeof(err)) == STORE_ESQL);
		CHECK(strstr(err, "did you mean process.memory?") != NULL);
		store_result_release(&res);
		CHECK(store_query(st, "SELECT * FROM memory_usage", NULL, &res,
				  err, sizeof(err)) == STORE_ESQL);
		CHECK(strstr(err, "here: process.memory") != NULL);
		store_result_release(&res);
		CHECK(store_query(st, "SELECT date_trunc('hour', 1)", NULL,
				  &res, err, sizeof(err)) == STORE_ESQL);
		CHECK(strstr(err, "in SQLite: strftime(") != NULL);
		store_result_release(&res);
		CHECK(store_query(st, "SELECT ago('5m') < now()", NULL, &res,
				  err, sizeof(err)) == 0);
		CHECK(res.nrows == 1 && res.cells[0].u.i == 1);
		store_result_release(&res);
	}
	/* Messages with nothing known: SQLite's own, said to be. */
	sqlhint_explain(NULL, "SELEC", "near \"SELEC\": syntax error", 1, err,
			sizeof(err));
	CHECK_STR(err, "near \"SELEC\": syntax error (SQLite's SQL)");
	/* Cut to the buffer, never past it. */
	sqlhint_explain(NULL, "x", "no such function: hour", 1, err, 16);
	CHECK(strlen(err) == 15);
	/* A statement that compiled and failed running: not its SQL. */
	sqlhint_explain(NULL, "SELECT * FROM python.x", "interpreter is gone", 0,
			err, sizeof(err));
	CHECK_STR(err, "interpreter is gone");
	store_free(st);
}

TEST_MAIN(test_durations, test_nearest, test_hints)
