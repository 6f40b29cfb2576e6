/*
 * jsonsql: JSON values as SQLite values, the rule of cluster query
 * --merge and of the global schema.
 */
#include <math.h>

#include "jsonsql.h"
#include "test.h"

static struct jsonsql_value of(const cJSON *v)
{
	struct jsonsql_value j;

	jsonsql_value(v, &j);
	return j;
}

static void test_kinds(void)
{
	cJSON *a = cJSON_Parse("[3, -7, 2.5, 9007199254740992, 1e300, \"x\", "
			       "true, false, null, [1, 2], {\"k\": 1}]");
	struct jsonsql_value j;
	cJSON *nan = cJSON_CreateNumber(NAN);

	CHECK(a != NULL);
	j = of(cJSON_GetArrayItem(a, 0));
	CHECK(j.kind == JSONSQL_INT && j.i == 3);
	j = of(cJSON_GetArrayItem(a, 1));
	CHECK(j.kind == JSONSQL_INT && j.i == -7);
	j = of(cJSON_GetArrayItem(a, 2));
	CHECK(j.kind == JSONSQL_REAL && j.d == 2.5);
	/* 2^53 and past: a real (no cast out of range). */
	j = of(cJSON_GetArrayItem(a, 3));
	CHECK(j.kind == JSONSQL_REAL);
	j = of(cJSON_GetArrayItem(a, 4));
	CHECK(j.kind == JSONSQL_REAL && j.d == 1e300);
	j = of(nan);
	CHECK(j.kind == JSONSQL_REAL && isnan(j.d));
	j = of(cJSON_GetArrayItem(a, 5));
	CHECK(j.kind == JSONSQL_TEXT);
	CHECK_STR(j.text, "x");
	j = of(cJSON_GetArrayItem(a, 6));
	CHECK(j.kind == JSONSQL_INT && j.i == 1);
	j = of(cJSON_GetArrayItem(a, 7));
	CHECK(j.kind == JSONSQL_INT && j.i == 0);
	j = of(cJSON_GetArrayItem(a, 8));
	CHECK(j.kind == JSONSQL_NULL);
	j = of(NULL);
	CHECK(j.kind == JSONSQL_NULL);
	j = of(cJSON_GetArrayItem(a, 9));
	CHECK(j.kind == JSONSQL_TEXT);
	CHECK_STR(j.text, "[1,2]");
	jsonsql_release(&j);
	j = of(cJSON_GetArrayItem(a, 10));
	CHECK_STR(j.text, "{\"k\":1}");
	jsonsql_release(&j);
	CHECK(j.owned == NULL && j.text == NULL);
	cJSON_Delete(nan);
	cJSON_Delete(a);
}

TEST_MAIN(test_kinds)
