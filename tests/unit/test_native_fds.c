/*
 * native_fds: libunwind's memory-check pipe made at 512 and up (none below
 * 512 after local unwinds, which check memory at every step), and, when
 * the program closes it and puts files of its own at those numbers, never
 * read, written or closed: libunwind makes another pipe when it needs
 * one.  On libunwind 1.6 (the pipe made when it starts) and 1.8 (at its
 * first check).
 */
#define UNW_LOCAL_ONLY
#include "profiler/native_fds.h"
#include "test.h"

#include <dirent.h>
#include <fcntl.h>
#include <libunwind.h>
#include <sys/stat.h>
#include <unistd.h>

/* Unwinds this thread's stack with libunwind's local unwinder: frames. */
__attribute__((noinline)) static int unwind_here(void)
{
	unw_context_t ctx;
	unw_cursor_t cur;
	int n = 0;

	if (unw_getcontext(&ctx) < 0 || unw_init_local(&cur, &ctx) < 0)
		return -1;
	while (unw_step(&cur) > 0)
		n++;
	return n;
}

/* The pipes open at fd >= lo, into fds (up to max): how many. */
static int pipes_from(int lo, int *fds, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		struct stat st;
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(d) || fd < lo)
			continue;
		if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && n < max)
			fds[n++] = fd;
	}
	closedir(d);
	return n;
}

static void test_pipe_high_and_never_the_programs(void)
{
	char err[200] = "";
	int low[8], high[8], again[8], nlow, nhigh, nagain;
	int mine[8];
	char buf[32];

	/* Pipes this process was given (a shell's), not libunwind's. */
	nlow = pipes_from(3, low, 8);
	CHECK(native_fds_guard(err, sizeof(err)) == 0);
	if (err[0])
		fprintf(stderr, "%s\n", err);
	CHECK(unwind_here() > 0);
	nhigh = pipes_from(512, high, 8);
	/* libunwind's pipe exists, and it is all at 512 and up. */
	CHECK(nhigh == 2);
	CHECK(pipes_from(3, low, 8) == nlow + nhigh);

	/* The program closes both ends and opens a file of its own at each
	 * number, with data in it, its offset at the data's end. */
	for (int i = 0; i < nhigh; i++) {
		char path[] = "/tmp/probing-native-fds-XXXXXX";
		int f = mkstemp(path);

		CHECK(f >= 0);
		unlink(path);
		CHECK(write(f, "program data\n", 13) == 13);
		CHECK(lseek(f, 0, SEEK_SET) == 0);
		close(high[i]);
		CHECK(dup2(f, high[i]) == high[i]);
		close(f);
		mine[i] = high[i];
	}
	CHECK(unwind_here() > 0);
	CHECK(unwind_here() > 0);
	/* Still open at their numbers, not read (the offset), not written
	 * (the size and the data). */
	for (int i = 0; i < nhigh; i++) {
		struct stat st;

		CHECK(fstat(mine[i], &st) == 0 && st.st_size == 13);
		CHECK(lseek(mine[i], 0, SEEK_CUR) == 0);
		CHECK(read(mine[i], buf, sizeof(buf)) == 13);
		CHECK(memcmp(buf, "program data\n", 13) == 0);
	}
	/* When libunwind checked memory again (it remembers the last pages
	 * it found readable, and 1.6 checks only where unwind information is
	 * missing) it found its pipe gone and made a new one, at 512 and up
	 * again. */
	nagain = pipes_from(512, again, 8);
	CHECK(nagain == 0 || nagain == 2);
	CHECK(pipes_from(3, low, 8) == nlow + nagain);
	for (int i = 0; i < nagain; i++)
		for (int k = 0; k < nhigh; k++)
			CHECK(again[i] != mine[k]);
}

TEST_MAIN(test_pipe_high_and_never_the_programs)
