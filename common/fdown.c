/*
 * fdown: the descriptors the agent owns.  See fdown.h.
 */
#include "fdown.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static int same_file(int fd, const struct stat *a)
{
	struct stat b;

	return fstat(fd, &b) == 0 && b.st_dev == a->st_dev &&
	       b.st_ino == a->st_ino;
}

/* Do descriptors a and b hold the same file? */
static int same_fds(int a, int b)
{
	struct stat st;

	return fstat(b, &st) == 0 && same_file(a, &st);
}

static int cloexec(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	return flags >= 0 && (flags & FD_CLOEXEC);
}

#define RAISE_TRIES 3

/*
 * Moves fd, whose open file is *st, up; see fdown_new.  Nothing is closed
 * unless it is known to be ours: the low number only while it still holds
 * our file, the copy only when it copies what the low number holds now.
 */
static int raise_checked(int fd, const struct stat *st)
{
	for (int i = 0; i < RAISE_TRIES; i++) {
		int hi;

		if (fd >= FDOWN_MIN)
			return fd;
		hi = fcntl(fd, F_DUPFD_CLOEXEC, FDOWN_MIN);
		if (hi < 0)
			/* RLIMIT_NOFILE below FDOWN_MIN, or full: ours stays
			 * low.  Or the program closed the number (EBADF) and
			 * may have opened a file of its own there since. */
			return same_file(fd, st) ? fd : -EBADF;
		if (same_file(hi, st)) {
			/* Ours up there; the low number is closed only if
			 * the program did not take it over meanwhile. */
			if (same_file(fd, st))
				close(fd);
			return hi;
		}
		if (!same_file(fd, st)) {
			/* The program took the low number over: ours is
			 * gone.  hi holds its file either as our copy (it
			 * took it over before the copy) or as its own (it
			 * closed both numbers after the copy and dup2()'d
			 * its file onto hi as it reopens its numbers).  Only
			 * our copy is closed: it is close-on-exec, as
			 * F_DUPFD_CLOEXEC makes it; dup2() makes none. */
			if (same_fds(hi, fd) && cloexec(hi))
				close(hi);
			return -EBADF;
		}
		/* The program put a file of its own at hi after the copy
		 * (closing our copy): ours is still low; again. */
	}
	return same_file(fd, st) ? fd : -EBADF;
}

/* fdown_new, giving the identity of what it returns. */
static int new_checked(int fd, struct stat *st)
{
	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0 ||
	    !(S_ISSOCK(st->st_mode) || S_ISFIFO(st->st_mode)))
		return -EBADF; /* not what the caller made: the program's */
	return raise_checked(fd, st);
}

int fdown_new(int fd)
{
	struct stat st;

	return new_checked(fd, &st);
}

/* o holds fd, whose open file is *st. */
static void own(struct fdown *o, int fd, const struct stat *st)
{
	o->fd = fd;
	o->dev = st->st_dev;
	o->ino = st->st_ino;
}

/* fdown_open, giving the identity of what it returns. */
static int open_checked(const char *path, int flags, mode_t mode,
			struct stat *st)
{
	struct stat want;
	int fd = open(path, flags | O_CLOEXEC, mode);

	if (fd < 0)
		return -errno;
	/* What the path names now, against what fd holds: a number taken
	 * over between the open and the fstat shows another file. */
	if (fstat(fd, st) < 0 || stat(path, &want) < 0 ||
	    st->st_dev != want.st_dev || st->st_ino != want.st_ino)
		return -EAGAIN;
	fd = raise_checked(fd, st);
	return fd < 0 ? -EAGAIN : fd;
}

int fdown_open(const char *path, int flags, mode_t mode)
{
	struct stat st;

	return open_checked(path, flags, mode, &st);
}

int fdown_open_take(struct fdown *o, const char *path, int flags,
		    mode_t mode)
{
	struct stat st;
	int fd = open_checked(path, flags, mode, &st);

	o->fd = -1;
	if (fd < 0)
		return fd;
	own(o, fd, &st);
	return 0;
}

FILE *fdown_fopen(const char *path)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap), *bigger;
	struct fdown o = {.fd = -1};
	FILE *f = NULL;
	ssize_t n;
	int rc = buf ? fdown_open_take(&o, path, O_RDONLY, 0) : -ENOMEM;

	while (rc == 0) {
		if (len == cap) {
			if (cap >= FDOWN_FOPEN_MAX) {
				rc = -EFBIG;
				break;
			}
			cap *= 2;
			if (!(bigger = realloc(buf, cap))) {
				rc = -ENOMEM;
				break;
			}
			buf = bigger;
		}
		n = read(o.fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	fdown_close(&o);
	/* "w+": the stream owns a copy (freed by fclose); reads end at
	 * what was written.  One byte more than the data: glibc writes a
	 * NUL after it, over its last byte when there is no room. */
	if (rc == 0 && (f = fmemopen(NULL, len + 1, "w+")) &&
	    (fwrite(buf, 1, len, f) != len || fseek(f, 0, SEEK_SET))) {
		fclose(f);
		f = NULL;
	}
	if (rc == 0 && !f)
		rc = -ENOMEM;
	free(buf);
	errno = -rc;
	return f;
}

int fdown_take(struct fdown *o, int fd)
{
	struct stat st;

	o->fd = -1;
	fd = new_checked(fd, &st);
	if (fd < 0)
		return -EBADF;
	/* The identity checked across the move, not a new look: the number
	 * may have changed hands since. */
	own(o, fd, &st);
	return 0;
}

int fdown_adopt(struct fdown *o, int fd)
{
	struct stat st;

	o->fd = -1;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -EBADF;
	own(o, fd, &st);
	return 0;
}

int fdown_ours(const struct fdown *o)
{
	struct stat st;

	return o->fd >= 0 && fstat(o->fd, &st) == 0 && st.st_dev == o->dev &&
	       st.st_ino == o->ino;
}

void fdown_close(struct fdown *o)
{
	if (fdown_ours(o))
		close(o->fd);
	o->fd = -1;
}

void fdown_forget(struct fdown *o)
{
	o->fd = -1;
}

/* Is fd (ours, *st) where a descriptor of fdown_*_high may stay?  When
 * not, it is closed (still ours: checked) and 0 returned. */
static int high_enough(int fd, const struct stat *st)
{
	struct rlimit rl;

	if (fd >= FDOWN_MIN && getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    (rl.rlim_cur == RLIM_INFINITY ||
	     (rlim_t)fd + FDOWN_SPARE < rl.rlim_cur))
		return 1;
	if (same_file(fd, st))
		close(fd);
	return 0;
}

int fdown_open_take_high(struct fdown *o, const char *path, int flags,
			 mode_t mode)
{
	struct stat st;
	int fd = open_checked(path, flags, mode, &st);

	o->fd = -1;
	if (fd < 0)
		return fd;
	if (!high_enough(fd, &st))
		return -EMFILE;
	own(o, fd, &st);
	return 0;
}

int fdown_take_high(struct fdown *o, int fd)
{
	struct stat st;

	o->fd = -1;
	fd = new_checked(fd, &st);
	if (fd < 0)
		return -EBADF;
	if (!high_enough(fd, &st))
		return -EMFILE;
	own(o, fd, &st);
	return 0;
}
