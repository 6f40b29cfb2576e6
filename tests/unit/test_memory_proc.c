/*
 * memory_proc: /proc/self/status parsing.
 */
#include <errno.h>

#include "memory/memory_proc.h"
#include "test.h"

static const char status[] = "Name:\tpython3\n"
			     "Umask:\t0022\n"
			     "State:\tS (sleeping)\n"
			     "VmPeak:\t  600000 kB\n"
			     "VmSize:\t  524288 kB\n"
			     "VmLck:\t       0 kB\n"
			     "VmHWM:\t  204800 kB\n"
			     "VmRSS:\t  102400 kB\n"
			     "RssAnon:\t   81920 kB\n"
			     "RssFile:\t   19456 kB\n"
			     "RssShmem:\t    1024 kB\n"
			     "VmSwap:\t       0 kB\n"
			     "Threads:\t7\n";

static void test_parse(void)
{
	struct memory_proc m;

	CHECK(memory_proc_parse(status, &m) == 0);
	CHECK(m.rss == 100.0);
	CHECK(m.vms == 512.0);
	CHECK(m.shared == 20.0);
	CHECK(m.peak == 200.0);
	CHECK(m.swap == 0.0);
	CHECK(m.threads == 7);
	/* A kernel thread's status has no Vm lines. */
	CHECK(memory_proc_parse("Name:\tkthreadd\nThreads:\t1\n", &m) ==
	      -EINVAL);
	CHECK(memory_proc_parse("", &m) == -EINVAL);
	/* Keys that only start the same do not count; bad numbers skip. */
	CHECK(memory_proc_parse("VmRSSX:\t5 kB\nVmRSS:\tnope\nVmRSS:\t2048 kB",
				&m) == 0);
	CHECK(m.rss == 2.0 && m.vms == 0.0);
}

static void test_read(void)
{
	struct memory_proc m;

	CHECK(memory_proc_read(&m) == 0);
	CHECK(m.rss > 0.1 && m.vms >= m.rss && m.peak >= m.rss);
	CHECK(m.threads >= 1);
}

TEST_MAIN(test_parse, test_read)
