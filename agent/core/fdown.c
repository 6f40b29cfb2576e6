/*
 * fdown: the descriptors the agent owns.  See fdown.h.
 */
#include "fdown.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
			return fd; /* RLIMIT_NOFILE below FDOWN_MIN, or full */
		if (same_file(hi, st)) {
			/* Ours up there; the low number is closed only if
			 * the program did not take it over meanwhile. */
			if (same_file(fd, st))
				close(fd);
			return hi;
		}
		if (!same_file(fd, st)) {
			/* The program took the low number over before the
			 * copy: hi copies its file, ours is gone. */
			if (same_fds(hi, fd))
				close(hi);
			return -EBADF;
		}
		/* The program put a file of its own at hi after the copy
		 * (closing our copy): ours is still low; again. */
	}
	return fd;
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

int fdown_open(const char *path, int flags, mode_t mode)
{
	struct stat want, st;
	int fd = open(path, flags | O_CLOEXEC, mode);

	if (fd < 0)
		return -errno;
	/* What the path names now, against what fd holds: a number taken
	 * over between the open and the fstat shows another file. */
	if (fstat(fd, &st) < 0 || stat(path, &want) < 0 ||
	    st.st_dev != want.st_dev || st.st_ino != want.st_ino)
		return -EAGAIN;
	fd = raise_checked(fd, &st);
	return fd < 0 ? -EAGAIN : fd;
}

FILE *fdown_fopen(const char *path)
{
	int fd = fdown_open(path, O_RDONLY, 0);
	FILE *f;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f)
		close(fd);
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
	o->fd = fd;
	o->dev = st.st_dev;
	o->ino = st.st_ino;
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
