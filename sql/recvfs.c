/*
 * recvfs: the recording's files through owned descriptors.  See recvfs.h.
 *
 * The locks follow os_unix.c's POSIX protocol: a SHARED lock is a read
 * lock on the SHARED range (taken under a read lock of the PENDING byte),
 * RESERVED a write lock on its byte, PENDING a write lock on its byte,
 * EXCLUSIVE a write lock on the SHARED range.
 */
#include "recvfs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <sqlite3.h>

#include "fdown.h"

#define PENDING_BYTE 0x40000000
#define RESERVED_BYTE (PENDING_BYTE + 1)
#define SHARED_FIRST (PENDING_BYTE + 2)
#define SHARED_SIZE 510
#define SECTOR_SIZE 4096

struct rfile {
	sqlite3_file base;
	struct fdown fd;
	int lock;  /* SQLITE_LOCK_NONE ... EXCLUSIVE */
	char *del; /* unlinked at close (DELETEONCLOSE), or NULL */
	sqlite3_int64 min_free; /* bytes a write that grows it leaves free */
};

static sqlite3_vfs *base_vfs; /* the default VFS: names, time, temp files */

/* The descriptor, when it is still ours; -1 otherwise. */
static int fd_of(struct rfile *f)
{
	return fdown_ours(&f->fd) ? f->fd.fd : -1;
}

static int io_close(sqlite3_file *file)
{
	struct rfile *f = (struct rfile *)file;

	fdown_close(&f->fd); /* a number that changed hands stays open */
	if (f->del) {
		unlink(f->del);
		sqlite3_free(f->del);
		f->del = NULL;
	}
	return SQLITE_OK;
}

static int io_read(sqlite3_file *file, void *buf, int amt, sqlite3_int64 off)
{
	int fd = fd_of((struct rfile *)file);
	size_t done = 0;

	if (fd < 0)
		return SQLITE_IOERR_READ;
	while (done < (size_t)amt) {
		ssize_t n = pread(fd, (char *)buf + done, (size_t)amt - done,
				  (off_t)(off + (sqlite3_int64)done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return SQLITE_IOERR_READ;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	if (done < (size_t)amt) {
		/* Past the end: zeros, as SQLite expects. */
		memset((char *)buf + done, 0, (size_t)amt - done);
		return SQLITE_IOERR_SHORT_READ;
	}
	return SQLITE_OK;
}

/*
 * May the file at fd grow to end bytes and leave min_free bytes free on
 * its file system (what an unprivileged writer may still use)?  A write
 * within the file's size needs no more room (the recording's files are
 * not sparse).  min_free 0: yes.
 */
static int room_for(int fd, sqlite3_int64 min_free, sqlite3_int64 end)
{
	struct statvfs v;
	struct stat sb;
	sqlite3_int64 grow;

	if (min_free <= 0 || fstat(fd, &sb) < 0 || end <= sb.st_size)
		return 1;
	grow = end - (sqlite3_int64)sb.st_size;
	if (fstatvfs(fd, &v) < 0)
		return 1; /* the write says what is wrong */
	return (sqlite3_int64)v.f_bavail * (sqlite3_int64)v.f_frsize >=
	       grow + min_free;
}

static int io_write(sqlite3_file *file, const void *buf, int amt,
		    sqlite3_int64 off)
{
	int fd = fd_of((struct rfile *)file);
	size_t done = 0;

	if (fd < 0)
		return SQLITE_IOERR_WRITE;
	if (!room_for(fd, ((struct rfile *)file)->min_free, off + amt))
		return SQLITE_FULL;
	while (done < (size_t)amt) {
		ssize_t n =
			pwrite(fd, (const char *)buf + done, (size_t)amt - done,
			       (off_t)(off + (sqlite3_int64)done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == ENOSPC || errno == EDQUOT
				       ? SQLITE_FULL
				       : SQLITE_IOERR_WRITE;
		if (n == 0)
			return SQLITE_FULL;
		done += (size_t)n;
	}
	return SQLITE_OK;
}

static int io_truncate(sqlite3_file *file, sqlite3_int64 size)
{
	int fd = fd_of((struct rfile *)file);

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		return SQLITE_IOERR_TRUNCATE;
	return SQLITE_OK;
}

static int io_sync(sqlite3_file *file, int flags)
{
	int fd = fd_of((struct rfile *)file);

	(void)flags;
	if (fd < 0 || fdatasync(fd) < 0)
		return SQLITE_IOERR_FSYNC;
	return SQLITE_OK;
}

static int io_size(sqlite3_file *file, sqlite3_int64 *size)
{
	int fd = fd_of((struct rfile *)file);
	struct stat sb;

	if (fd < 0 || fstat(fd, &sb) < 0)
		return SQLITE_IOERR_FSTAT;
	*size = (sqlite3_int64)sb.st_size;
	return SQLITE_OK;
}

/* One POSIX lock: type F_RDLCK, F_WRLCK or F_UNLCK on [start, +len). */
static int posix_lock(int fd, short type, off_t start, off_t len)
{
	struct flock fl;

	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	fl.l_start = start;
	fl.l_len = len;
	while (fcntl(fd, F_SETLK, &fl) < 0) {
		if (errno == EINTR)
			continue;
		return errno == EACCES || errno == EAGAIN ? SQLITE_BUSY
							  : SQLITE_IOERR_LOCK;
	}
	return SQLITE_OK;
}

static int io_lock(sqlite3_file *file, int level)
{
	struct rfile *f = (struct rfile *)file;
	int fd = fd_of(f), rc = SQLITE_OK;

	if (fd < 0)
		return SQLITE_IOERR_LOCK;
	if (f->lock >= level)
		return SQLITE_OK;
	if (level == SQLITE_LOCK_SHARED) {
		rc = posix_lock(fd, F_RDLCK, PENDING_BYTE, 1);
		if (rc == SQLITE_OK) {
			rc = posix_lock(fd, F_RDLCK, SHARED_FIRST, SHARED_SIZE);
			posix_lock(fd, F_UNLCK, PENDING_BYTE, 1);
		}
	} else if (level == SQLITE_LOCK_RESERVED) {
		rc = posix_lock(fd, F_WRLCK, RESERVED_BYTE, 1);
	} else if (level == SQLITE_LOCK_EXCLUSIVE) {
		rc = posix_lock(fd, F_WRLCK, PENDING_BYTE, 1);
		if (rc == SQLITE_OK)
			rc = posix_lock(fd, F_WRLCK, SHARED_FIRST, SHARED_SIZE);
		if (rc != SQLITE_OK) {
			/* PENDING kept: no new reader comes in meanwhile. */
			f->lock = SQLITE_LOCK_PENDING;
			return rc;
		}
	}
	if (rc == SQLITE_OK)
		f->lock = level;
	return rc;
}

static int io_unlock(sqlite3_file *file, int level)
{
	struct rfile *f = (struct rfile *)file;
	int fd = fd_of(f), rc = SQLITE_OK;

	if (f->lock <= level)
		return SQLITE_OK;
	if (fd < 0)
		return SQLITE_IOERR_UNLOCK;
	if (level == SQLITE_LOCK_SHARED) {
		if (f->lock == SQLITE_LOCK_EXCLUSIVE)
			rc = posix_lock(fd, F_RDLCK, SHARED_FIRST, SHARED_SIZE);
		posix_lock(fd, F_UNLCK, PENDING_BYTE, 2);
	} else {
		posix_lock(fd, F_UNLCK, 0, 0);
	}
	f->lock = level;
	return rc == SQLITE_OK ? SQLITE_OK : SQLITE_IOERR_UNLOCK;
}

static int io_reserved(sqlite3_file *file, int *out)
{
	struct rfile *f = (struct rfile *)file;
	int fd = fd_of(f);
	struct flock fl;

	*out = 0;
	if (fd < 0)
		return SQLITE_IOERR_CHECKRESERVEDLOCK;
	if (f->lock >= SQLITE_LOCK_RESERVED) {
		*out = 1;
		return SQLITE_OK;
	}
	memset(&fl, 0, sizeof(fl));
	fl.l_type = F_WRLCK;
	fl.l_whence = SEEK_SET;
	fl.l_start = RESERVED_BYTE;
	fl.l_len = 1;
	if (fcntl(fd, F_GETLK, &fl) < 0)
		return SQLITE_IOERR_CHECKRESERVEDLOCK;
	*out = fl.l_type != F_UNLCK;
	return SQLITE_OK;
}

static int io_control(sqlite3_file *file, int op, void *arg)
{
	(void)file, (void)op, (void)arg;
	return SQLITE_NOTFOUND;
}

static int io_sector(sqlite3_file *file)
{
	(void)file;
	return SECTOR_SIZE;
}

static int io_device(sqlite3_file *file)
{
	(void)file;
	return SQLITE_IOCAP_POWERSAFE_OVERWRITE;
}

static const sqlite3_io_methods io = {
	.iVersion = 1, /* no shared memory, no mmap */
	.xClose = io_close,
	.xRead = io_read,
	.xWrite = io_write,
	.xTruncate = io_truncate,
	.xSync = io_sync,
	.xFileSize = io_size,
	.xLock = io_lock,
	.xUnlock = io_unlock,
	.xCheckReservedLock = io_reserved,
	.xFileControl = io_control,
	.xSectorSize = io_sector,
	.xDeviceCharacteristics = io_device,
};

static int vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file,
		    int flags, int *out_flags)
{
	struct rfile *f = (struct rfile *)file;
	int oflags = O_CLOEXEC | O_NOFOLLOW;

	(void)vfs;
	memset(f, 0, sizeof(*f));
	f->fd.fd = -1;
	if (!name) /* a nameless temporary file: the default VFS's */
		return base_vfs->xOpen(base_vfs, name, file, flags, out_flags);
	oflags |= flags & SQLITE_OPEN_READWRITE ? O_RDWR : O_RDONLY;
	if (flags & SQLITE_OPEN_CREATE)
		oflags |= O_CREAT;
	if (flags & SQLITE_OPEN_EXCLUSIVE)
		oflags |= O_EXCL;
	if (fdown_open_take(&f->fd, name, oflags, 0600) < 0)
		return SQLITE_CANTOPEN;
	/* The headroom the URI asks for (recvfs.h): the database's own
	 * parameter, read through its journal's and WAL's names too. */
	if (flags &
	    (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL))
		f->min_free = sqlite3_uri_int64(name, "min_free", 0);
	if (flags & SQLITE_OPEN_DELETEONCLOSE) {
		f->del = sqlite3_mprintf("%s", name);
		if (!f->del) {
			fdown_close(&f->fd);
			return SQLITE_NOMEM;
		}
	}
	if (out_flags)
		*out_flags = flags;
	f->base.pMethods = &io;
	return SQLITE_OK;
}

static int vfs_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	(void)vfs;
	return base_vfs->xDelete(base_vfs, name, sync_dir);
}

static int vfs_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	(void)vfs;
	return base_vfs->xAccess(base_vfs, name, flags, out);
}

static int vfs_full(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	(void)vfs;
	return base_vfs->xFullPathname(base_vfs, name, n, out);
}

static int vfs_random(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return base_vfs->xRandomness(base_vfs, n, out);
}

static int vfs_sleep(sqlite3_vfs *vfs, int us)
{
	(void)vfs;
	return base_vfs->xSleep(base_vfs, us);
}

static int vfs_time(sqlite3_vfs *vfs, double *out)
{
	(void)vfs;
	return base_vfs->xCurrentTime(base_vfs, out);
}

static int vfs_error(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return base_vfs->xGetLastError(base_vfs, n, out);
}

static int vfs_time64(sqlite3_vfs *vfs, sqlite3_int64 *out)
{
	(void)vfs;
	return base_vfs->xCurrentTimeInt64(base_vfs, out);
}

static sqlite3_vfs vfs = {
	.iVersion = 2,
	.zName = RECVFS_NAME,
	.xOpen = vfs_open,
	.xDelete = vfs_delete,
	.xAccess = vfs_access,
	.xFullPathname = vfs_full,
	.xRandomness = vfs_random,
	.xSleep = vfs_sleep,
	.xCurrentTime = vfs_time,
	.xGetLastError = vfs_error,
	.xCurrentTimeInt64 = vfs_time64,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int registered = SQLITE_ERROR;

static void do_register(void)
{
	base_vfs = sqlite3_vfs_find(NULL);
	if (!base_vfs || base_vfs->iVersion < 2)
		return;
	/* Room for the default VFS's own file, for temporary files. */
	vfs.szOsFile = base_vfs->szOsFile > (int)sizeof(struct rfile)
			       ? base_vfs->szOsFile
			       : (int)sizeof(struct rfile);
	vfs.mxPathname = base_vfs->mxPathname;
	registered = sqlite3_vfs_register(&vfs, 0);
}

int recvfs_register(void)
{
	pthread_once(&once, do_register);
	return registered;
}

char *recvfs_uri(const char *path, const char *query)
{
	size_t n = strlen(path);
	char *uri = malloc(n * 3 + strlen(query) + 8), *p;

	if (!uri)
		return NULL;
	p = uri + sprintf(uri, "file:");
	for (; *path; path++) {
		if (*path == '%' || *path == '?' || *path == '#')
			p += sprintf(p, "%%%02x", (unsigned char)*path);
		else
			*p++ = *path;
	}
	sprintf(p, "?%s", query);
	return uri;
}
