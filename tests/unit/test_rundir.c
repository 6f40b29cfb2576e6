/*
 * rundir: a run's directory name, made and read back.
 */
#include <string.h>

#include "rundir.h"
#include "test.h"

static void test_round_trip(void)
{
	char name[128];
	double start = 0;
	int pid = 0;

	CHECK(rundir_name(name, sizeof(name), "node-7.cluster", 4242,
			  1795549781.6) == 0);
	CHECK(strcmp(name, "node-7.cluster-4242-20261124T194941") == 0);
	CHECK(rundir_parse_name(name, &pid, &start) == 0);
	CHECK(pid == 4242 && start == 1795549781.0);
	/* The host's own dashes and digits do not confuse it. */
	CHECK(rundir_name(name, sizeof(name), "gpu-12", 7, 0) == 0);
	CHECK(rundir_parse_name(name, &pid, &start) == 0);
	CHECK(pid == 7 && start == 0);
}

static void test_not_runs(void)
{
	static const char *const bad[] = {
		"",
		"job-abc",
		"host-20261124T194941",	    /* no pid */
		"host--20261124T194941",    /* empty pid */
		"host-12-2026112",	    /* short stamp */
		"host-12-20261124T194941x", /* past the stamp */
		"host-12-20261124X194941",  /* not a stamp */
		"-12-20261124T194941",	    /* no host */
		"12-20261124T194941",	    /* no host either */
	};
	double start;
	int pid;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(rundir_parse_name(bad[i], &pid, &start) == -1);
}

TEST_MAIN(test_round_trip, test_not_runs)
