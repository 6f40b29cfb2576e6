/*
 * sqlglobal: global.<schema>.<table> found in a query, and only there.
 */
#include "sqlglobal.h"
#include "test.h"

static void test_refs(void)
{
	struct sqlglobal_ref r[4];
	const char *q = "SELECT _rank FROM global.python.comm_collective g "
			"JOIN GLOBAL.process.memory m ON g._rank = m._rank";

	CHECK(sqlglobal_refs(q, r, 4) == 2);
	CHECK_STR(r[0].name, "python.comm_collective");
	CHECK(strncmp(q + r[0].start, "global.python.comm_collective",
		      r[0].end - r[0].start) == 0);
	CHECK(r[0].end - r[0].start == strlen("global.python.comm_collective"));
	CHECK_STR(r[1].name, "process.memory");
	CHECK(sqlglobal_refs("SELECT 1", r, 4) == 0);
	/* More than max: counted, max filled. */
	CHECK(sqlglobal_refs("global.a.b global.c.d global.e.f", r, 2) == 3);
	CHECK_STR(r[1].name, "c.d");
}

static void test_not_refs(void)
{
	struct sqlglobal_ref r[4];

	CHECK(sqlglobal_refs("SELECT 'global.python.x'", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT \"global.python.x\"", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT 1 -- global.python.x", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT /* global.a.b */ 1", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT [global.a.b]", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT it's", r, 4) == 0); /* unclosed */
	CHECK(sqlglobal_refs("SELECT 'it''s global.a.b'", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT myglobal.a.b", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT x.global.a.b", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT global.a", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT global. a.b", r, 4) == 0);
	CHECK(sqlglobal_refs("SELECT global.a.", r, 4) == 0);
	CHECK(sqlglobal_refs("", r, 4) == 0);
	/* After a comment or string, found again. */
	CHECK(sqlglobal_refs("SELECT '--' || x FROM global.a.b", r, 4) == 1);
	CHECK_STR(r[0].name, "a.b");
}

TEST_MAIN(test_refs, test_not_refs)
