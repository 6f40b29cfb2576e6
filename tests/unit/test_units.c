/*
 * units_parse: a number and a unit from a table, or -1.
 */
#include <math.h>

#include "units.h"
#include "test.h"

static const struct unit sizes[] = {{"", 1}, {"KiB", 1024}, {"MB", 1e6}};

static void test_units(void)
{
	double v = -1;

	CHECK(units_parse("12", sizes, 3, &v) == 0 && v == 12);
	CHECK(units_parse("1.5 KiB", sizes, 3, &v) == 0 && v == 1536);
	CHECK(units_parse("2mb", sizes, 3, &v) == 0 && v == 2e6);
	CHECK(units_parse("0", sizes, 3, &v) == 0 && v == 0);
	/* Not in the table, no number, negative, not finite. */
	CHECK(units_parse("2 GB", sizes, 3, &v) == -1);
	CHECK(units_parse("KiB", sizes, 3, &v) == -1);
	CHECK(units_parse("", sizes, 3, &v) == -1);
	CHECK(units_parse("-1", sizes, 3, &v) == -1);
	CHECK(units_parse("inf", sizes, 3, &v) == -1);
	CHECK(units_parse("nan", sizes, 3, &v) == -1);
	CHECK(units_parse("1e999", sizes, 3, &v) == -1);
	/* A table without "" takes no bare number. */
	CHECK(units_parse("12", sizes + 1, 2, &v) == -1);
	CHECK(units_parse("12", sizes, 0, &v) == -1);
}

TEST_MAIN(test_units)
