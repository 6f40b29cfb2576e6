/*
 * fdown: the agent's descriptors, kept out of the program's way — moved
 * up at birth, and never closing a number the program took over.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdown.h"
#include "test.h"

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static int same_file(int a, int b)
{
	struct stat x, y;

	return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
	       x.st_ino == y.st_ino;
}

/* The program's own file, at a number of its choice. */
static int program_file(const char *name)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/fdown-test-%d-%s", (int)getpid(),
		 name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	unlink(path);
	return fd;
}

static void test_new_moves_up(void)
{
	int sv[2], hi;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(sv[0] < FDOWN_MIN);
	hi = fdown_new(sv[0]);
	CHECK(hi >= FDOWN_MIN);
	CHECK(!is_open(sv[0]));			/* the low number is free */
	CHECK(fcntl(hi, F_GETFD) & FD_CLOEXEC); /* and ours is cloexec */
	CHECK(write(sv[1], "x", 1) == 1);
	{
		char c = 0;

		CHECK(read(hi, &c, 1) == 1 && c == 'x');
	}
	close(hi);
	close(sv[1]);
	CHECK(fdown_new(-1) == -1);
}

/* The program closed our new socket's number and put its file there
 * before we moved it: not ours, not closed, no copy left behind. */
static void test_new_taken_over(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM, 0), f = program_file("a");
	int probe;

	CHECK(s >= 0 && f >= 0);
	CHECK(dup2(f, s) == s); /* what a program reopening its numbers does */
	CHECK(fdown_new(s) == -EBADF);
	CHECK(is_open(s) && same_file(s, f));
	/* No copy of the program's file kept up high. */
	probe = fcntl(0, F_DUPFD, FDOWN_MIN);
	CHECK(probe == FDOWN_MIN);
	close(probe);
	close(s);
	close(f);
}

static void test_take_and_lose(void)
{
	struct fdown o;
	int sv[2], f = program_file("b"), num;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(fdown_take(&o, sv[0]) == 0);
	CHECK(o.fd >= FDOWN_MIN && fdown_ours(&o));
	/* closerange, then the program's file at the same number. */
	num = o.fd;
	CHECK(dup2(f, num) == num);
	CHECK(!fdown_ours(&o));
	fdown_close(&o);
	CHECK(o.fd == -1);
	CHECK(is_open(num) && same_file(num, f)); /* left alone */
	close(num);
	close(f);
	close(sv[1]);
	/* A number that is not a socket or pipe is not taken. */
	f = program_file("c");
	CHECK(fdown_take(&o, f) == -EBADF && o.fd == -1);
	CHECK(is_open(f));
	close(f);
}

static void test_open(void)
{
	char buf[16];
	int fd = fdown_open("/proc/self/status", O_RDONLY, 0);

	CHECK(fd >= FDOWN_MIN);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	CHECK(read(fd, buf, 5) == 5 && !memcmp(buf, "Name:", 5));
	close(fd);
	CHECK(fdown_open("/nonexistent/fdown", O_RDONLY, 0) == -ENOENT);
	{
		/* In memory: no descriptor while it is parsed, the whole of
		 * the file (past the first read's 4 KiB too). */
		FILE *f = fdown_fopen("/proc/self/status");
		char line[256];
		int lines = 0, name = 0;

		CHECK(f && fileno(f) == -1);
		while (f && fgets(line, sizeof(line), f)) {
			lines++;
			name += !strncmp(line, "Name:", 5);
		}
		CHECK(lines > 20 && name == 1);
		if (f)
			fclose(f);
		f = fdown_fopen("/proc/self/maps");
		CHECK(f != NULL);
		if (f)
			fclose(f);
		/* Byte for byte: no NUL of fmemopen's over the last one. */
		{
			char path[] = "/tmp/fdown-fopen-XXXXXX", got[64];
			int fd = mkstemp(path);
			size_t n = 0;

			CHECK(fd >= 0 && write(fd, "import x\nx.y()\n", 15) == 15);
			close(fd);
			f = fdown_fopen(path);
			if (f) {
				n = fread(got, 1, sizeof(got), f);
				fclose(f);
			}
			CHECK(n == 15 && !memcmp(got, "import x\nx.y()\n", 15));
			unlink(path);
		}
		errno = 0;
		CHECK(fdown_fopen("/nonexistent/fdown") == NULL &&
		      errno == ENOENT);
		/* An empty file is an empty stream. */
		f = fdown_fopen("/proc/self/attr/current");
		if (f)
			fclose(f);
	}
}

/* The program closes the agent's descriptor and opens its own file at
 * the number: fdown_close leaves it open. */
static void test_close_leaves_a_reused_number(void)
{
	struct fdown o;
	char path[] = "/tmp/fdown-test-XXXXXX";
	int mine, n;

	CHECK(fdown_open_take(&o, "/proc/self/status", O_RDONLY, 0) == 0);
	n = o.fd;
	CHECK(n >= FDOWN_MIN);
	close(n); /* as the program's closerange would */
	mine = mkstemp(path);
	CHECK(mine >= 0);
	CHECK(dup2(mine, n) == n);
	fdown_close(&o);
	CHECK(o.fd == -1);
	CHECK(fcntl(n, F_GETFD) >= 0); /* still the program's */
	CHECK(write(n, "x", 1) == 1);
	unlink(path);
	close(n);
	close(mine);
}

/* The program, run from inside fdown's fcntl(F_DUPFD_CLOEXEC) just after
 * the copy (the test links with --wrap=fcntl): it closes every number
 * (closerange), opens a file at the low number and dup2()s it onto the
 * high one, as a program reopening the numbers it closed does. */
static int race_armed, race_file = -1, race_high = -1;

/* The program, run just before fdown's copy: it closes the new number
 * (closerange), so the copy fails, and opens a file of its own there once
 * the copy has failed. */
static int race_before;

int __real_fcntl(int fd, int cmd, ...);

int __wrap_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;
	int rc;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	if (race_before && cmd == F_DUPFD_CLOEXEC) {
		race_before = 0;
		close(fd);
		rc = __real_fcntl(fd, cmd, arg);
		race_file = program_file("before");
		return rc;
	}
	rc = __real_fcntl(fd, cmd, arg);
	if (race_armed && cmd == F_DUPFD_CLOEXEC && rc >= 0) {
		race_armed = 0;
		race_high = rc;
		close(fd);
		close(rc);
		race_file = program_file("race");
		if (race_file != fd) {
			dup2(race_file, fd);
			close(race_file);
			race_file = fd;
		}
		dup2(race_file, rc); /* no close-on-exec: dup2 makes none */
	}
	return rc;
}

/* Both numbers taken over between the copy and the checks: the program's
 * file at the high one is the program's, not a copy of ours to close. */
static void test_new_both_taken_over_after_the_copy(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM, 0), hi;

	CHECK(s >= 0);
	race_armed = 1;
	CHECK(fdown_new(s) == -EBADF);
	CHECK(!race_armed && race_file == s);
	/* The number the copy had: the program's file, open and writable. */
	hi = race_high;
	CHECK(hi >= FDOWN_MIN && same_file(hi, s));
	CHECK(!(__real_fcntl(hi, F_GETFD) & FD_CLOEXEC));
	CHECK(write(hi, "x", 1) == 1);
	close(hi);
	close(s);
}

/* The new number closed before the copy (which fails) and the program's
 * file opened there: that number is the program's now, not ours to use
 * where it is (nor to read, nor to close). */
static void test_copy_of_a_number_closed_meanwhile(void)
{
	int s = socket(AF_UNIX, SOCK_STREAM, 0), fd;

	CHECK(s >= 0);
	race_before = 1;
	CHECK(fdown_new(s) == -EBADF);
	CHECK(!race_before && race_file == s && is_open(s));
	close(s);

	race_before = 1;
	fd = fdown_open("/proc/self/stat", O_RDONLY, 0);
	CHECK(fd == -EAGAIN);
	CHECK(!race_before && race_file >= 0 && is_open(race_file));
	CHECK(lseek(race_file, 0, SEEK_CUR) == 0);
	close(race_file);
}

TEST_MAIN(test_new_moves_up, test_new_taken_over, test_take_and_lose, test_open,
	  test_close_leaves_a_reused_number,
	  test_new_both_taken_over_after_the_copy,
	  test_copy_of_a_number_closed_meanwhile)
