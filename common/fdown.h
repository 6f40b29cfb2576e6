/*
 * fdown: the descriptors the agent owns, kept out of the program's way
 * and checked before use.
 *
 * The program may close any descriptor at any time (os.closerange(3, N)
 * when it daemonizes, close_fds in a child) and the next open() it makes
 * may get the same number.  A number alone is then the program's file, not
 * ours: writing to it corrupts their data, reading from it steals it,
 * closing it breaks them.  So the agent's long-lived descriptors
 *
 *   - live at FDOWN_MIN or above where the limit allows (close-on-exec):
 *     out of reach of closerange(3, 256) and of scans of the low numbers,
 *     and never taking a number the program expects to get;
 *   - are remembered with the identity of their open file (device and
 *     inode: every socket and pipe has its own) and checked with
 *     fdown_ours() before every read, write and close.
 *
 * A new descriptor is born at the lowest free number, which the program
 * may be about to dup2() onto (it reopens the numbers it closed): so it
 * is moved up at once (fdown_new, fdown_open), and the low number is
 * closed only when it still holds what we made; one that changed hands
 * meanwhile is left to the program, and the creation fails.

 * One case looks like another: the program closing both our numbers
 * after the copy and dup2()'ing its file onto the high one, as the copy
 * we make of its file when it took the low number first; only a copy
 * with close-on-exec (ours always are; dup2() makes none) is closed.
 * What is left is the instant between a check and the system call; a
 * program would have to close our descriptor and open another file at the
 * same number within it (or dup3() its file there close-on-exec).
 *
 * Threads: an fdown is owned by one thread (or guarded by its owner's
 * lock); fdown_ours() may be called from any thread.
 */
#ifndef FDOWN_H
#define FDOWN_H

#include <stdio.h>
#include <sys/types.h>

#define FDOWN_MIN 512 /* the lowest number an owned descriptor moves to */

struct fdown {
	int fd; /* -1: none */
	dev_t dev;
	ino_t ino;
};

/*
 * fd was just made by the caller (socket, accept4, pipe2: a socket or a
 * pipe).  Returns it moved to FDOWN_MIN or above, close-on-exec (the low
 * number closed), or left where it is when the descriptor limit is lower;
 * or -EBADF when the number is not the caller's socket or pipe any more
 * (the program closed it and reused the number: nothing of the program's
 * is closed).  fd < 0 is returned as it is.
 */
int fdown_new(int fd);

/* open(path, flags | O_CLOEXEC, mode), moved up as fdown_new (for the
 * agent's reads of /proc and its own files).  The descriptor, or -errno
 * (-EAGAIN: the number changed hands while it moved; it is not closed,
 * as it may be the program's). */
int fdown_open(const char *path, int flags, mode_t mode);

/* fdown_open into o, with the identity it was checked with (for a file
 * kept open: closed later with fdown_close).  0, or -errno (o->fd -1). */
int fdown_open_take(struct fdown *o, const char *path, int flags,
		    mode_t mode);

/*
 * For descriptors that are one of many (a per-thread /proc file, a client
 * session) and that the agent can do without: fdown_open_take and
 * fdown_take, but the descriptor must live at FDOWN_MIN or above and
 * leave FDOWN_SPARE numbers free below the soft RLIMIT_NOFILE.  When it
 * cannot (the limit is below FDOWN_MIN + FDOWN_SPARE, or the numbers up
 * there are taken), nothing is kept (the low number is closed while it
 * is still ours) and -EMFILE is returned: such descriptors never take a
 * number of the program's own range, nor the program's last ones.
 */
#define FDOWN_SPARE 64
int fdown_open_take_high(struct fdown *o, const char *path, int flags,
			 mode_t mode);
int fdown_take_high(struct fdown *o, int fd);

/* The whole of path (at most FDOWN_FOPEN_MAX bytes) as a stdio stream
 * in memory: the descriptor is owned (fdown_open_take) while the file is
 * read and closed with fdown_close before this returns, so fclose() of
 * the stream closes no number at all.  NULL with errno (EFBIG: larger). */
#define FDOWN_FOPEN_MAX (16 << 20)
FILE *fdown_fopen(const char *path);

/* Takes fd (made by the caller, as fdown_new) into o, with its identity.
 * 0, or -errno (fd closed when it was still ours, o->fd = -1). */
int fdown_take(struct fdown *o, int fd);

/* Takes fd, a file the caller just opened by a path it made unique (as
 * crash reports are: O_CREAT | O_EXCL), into o with the identity it has
 * now.  0, or -errno (o->fd -1, fd left alone). */
int fdown_adopt(struct fdown *o, int fd);

/* 1 while o's number still refers to the open file it was taken with. */
int fdown_ours(const struct fdown *o);

/* Closes o's descriptor if it is still ours (never a number the program
 * has reused), and empties o.  Idempotent. */
void fdown_close(struct fdown *o);

/* Empties o without closing anything: its number is not ours now. */
void fdown_forget(struct fdown *o);

#endif
