/*
 * env: the agent reads the environment it was loaded into, whatever the
 * program does to environ afterwards.
 */
#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "test.h"

static void test_snapshot(void)
{
	unsigned n = 0;
	int seen = 0;

	setenv("PROBING_TEST_A", "1", 1);
	setenv("PROBING_TEST_B", "two", 1);
	/* Before the copy: the live environment. */
	CHECK(env_get("PROBING_TEST_A") && !strcmp(env_get("PROBING_TEST_A"), "1"));
	env_snapshot();
	/* The program changes it: the copy does not. */
	unsetenv("PROBING_TEST_A");
	setenv("PROBING_TEST_B", "changed", 1);
	setenv("PROBING_TEST_C", "new", 1);
	CHECK(env_get("PROBING_TEST_A") && !strcmp(env_get("PROBING_TEST_A"), "1"));
	CHECK(env_get("PROBING_TEST_B") && !strcmp(env_get("PROBING_TEST_B"), "two"));
	CHECK(env_get("PROBING_TEST_C") == NULL);
	/* A prefix of a name is not the name. */
	CHECK(env_get("PROBING_TEST_") == NULL);
	for (const char *e; (e = env_entry(n)); n++)
		seen += !strcmp(e, "PROBING_TEST_B=two");
	CHECK(seen == 1 && n > 2);
	/* Once: a second snapshot keeps the first. */
	env_snapshot();
	CHECK(!strcmp(env_get("PROBING_TEST_B"), "two"));
}

TEST_MAIN(test_snapshot)
