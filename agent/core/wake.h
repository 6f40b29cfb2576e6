/*
 * wake: another thread wakes the agent's loop — in place of libev's
 * ev_async, whose eventfd libev writes to without asking whether it is
 * still the one it opened.
 *
 * A wake is a pipe of the agent's own (fdown.h: raised out of the
 * program's way, its identity checked before every write and read).  When
 * the program has closed either end, wake_send() writes nothing and the
 * loop notices within WAKE_CHECK_S (a timer of the wake's own) or at once
 * (libev reports the descriptor bad): the wake makes itself a new pipe,
 * quietly, and runs its callback once for what may have been missed.
 *
 * Threads: wake_init, wake_release and the callback on the loop's thread;
 * wake_send from any thread (not from a signal handler: it takes a
 * mutex).
 */
#ifndef WAKE_H
#define WAKE_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>

#include "fdown.h"

#define WAKE_CHECK_S 1.0 /* how often the loop checks the pipe */

typedef void (*wake_fn)(void *data);

/* Embedded by its owner; fields private. */
struct wake {
	struct ev_loop *loop;
	ev_io io;
	ev_timer check;
	struct fdown rd;
	pthread_mutex_t lock; /* wr, for senders against a rebuild */
	struct fdown wr;
	atomic_int pending; /* a byte is on its way: no need for another */
	wake_fn fn;
	void *data;
	unsigned rebuilt;   /* times the pipe was made again */
};

/* Makes w's pipe and starts watching it on loop; fn(data) runs on the
 * loop's thread after one or more wake_send()s.  0 or -errno. */
int wake_init(struct wake *w, struct ev_loop *loop, wake_fn fn, void *data);

/* Asks the loop to run w's callback soon.  Any thread. */
void wake_send(struct wake *w);

/* Stops watching and closes the pipe (what is still ours of it).  Loop
 * thread; no wake_send() may run concurrently. */
void wake_release(struct wake *w);

/* In a forked child: closes the pipe (what is still ours of it) without
 * touching the loop, which the child does not run; w is unusable after. */
void wake_atfork_child(struct wake *w);

#endif
