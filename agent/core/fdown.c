/*
 * fdown: the descriptors the agent owns.  See fdown.h.
 */
#include "fdown.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int fdown_raise(int fd)
{
	int hi;

	if (fd < 0 || fd >= FDOWN_MIN)
		return fd;
	hi = fcntl(fd, F_DUPFD_CLOEXEC, FDOWN_MIN);
	if (hi < 0)
		return fd; /* RLIMIT_NOFILE below FDOWN_MIN, or full */
	close(fd);
	return hi;
}

int fdown_take(struct fdown *o, int fd)
{
	struct stat st;

	o->fd = -1;
	if (fd < 0)
		return -EBADF;
	fd = fdown_raise(fd);
	if (fstat(fd, &st) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
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
