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
 * What is left is the instant between the check and the system call; a
 * program would have to close our descriptor and open another file at the
 * same number within it.
 *
 * Threads: an fdown is owned by one thread (or guarded by its owner's
 * lock); fdown_ours() may be called from any thread.
 */
#ifndef FDOWN_H
#define FDOWN_H

#include <sys/types.h>

#define FDOWN_MIN 512 /* the lowest number an owned descriptor moves to */

struct fdown {
	int fd; /* -1: none */
	dev_t dev;
	ino_t ino;
};

/* Moves fd to FDOWN_MIN or above, close-on-exec (closing the old number),
 * when the descriptor limit allows; else leaves it where it is.  Returns
 * the descriptor to use (fd itself on failure). */
int fdown_raise(int fd);

/* Takes fd (raised as fdown_raise) into o, with its identity.  0, or
 * -errno (fd closed, o->fd = -1). */
int fdown_take(struct fdown *o, int fd);

/* 1 while o's number still refers to the open file it was taken with. */
int fdown_ours(const struct fdown *o);

/* Closes o's descriptor if it is still ours (never a number the program
 * has reused), and empties o.  Idempotent. */
void fdown_close(struct fdown *o);

/* Empties o without closing anything: its number is not ours now. */
void fdown_forget(struct fdown *o);

#endif
