/*
 * wake: a loop wake-up that never writes to a descriptor it lost.  See
 * wake.h.
 */
#include "wake.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "log.h"

static void on_readable(struct ev_loop *loop, ev_io *io, int revents);

static int open_pipe(struct wake *w)
{
	struct fdown rd, wr;
	int p[2], rc_rd, rc_wr;

	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	/* Both ends up at once, before either is used, each checked
	 * against what pipe2 made, not against a later look: a number the
	 * program took over meanwhile (it reopens the numbers it closed,
	 * while this rebuild runs) is left to it, never closed.  A raw
	 * close of an end the move left closed the program's file. */
	rc_rd = fdown_take(&rd, p[0]);
	rc_wr = fdown_take(&wr, p[1]);
	if (rc_rd || rc_wr) {
		fdown_close(&rd);
		fdown_close(&wr);
		return -EBADF;
	}
	w->rd = rd;
	pthread_mutex_lock(&w->lock);
	w->wr = wr;
	pthread_mutex_unlock(&w->lock);
	ev_io_init(&w->io, on_readable, w->rd.fd, EV_READ);
	w->io.data = w;
	ev_io_start(w->loop, &w->io);
	return 0;
}

/* The pipe is not (all) ours any more: close what still is, make another,
 * and run the callback for a wake that may have gone nowhere. */
static void rebuild(struct wake *w)
{
	ev_io_stop(w->loop, &w->io);
	fdown_close(&w->rd);
	pthread_mutex_lock(&w->lock);
	fdown_close(&w->wr);
	pthread_mutex_unlock(&w->lock);
	if (open_pipe(w) == 0 && w->rebuilt++ == 0)
		log_info("the program closed a descriptor of the agent's; "
			 "made a new one");
	atomic_store(&w->pending, 0);
	w->fn(w->data);
}

static void on_readable(struct ev_loop *loop, ev_io *io, int revents)
{
	struct wake *w = io->data;
	char buf[64];

	(void)loop;
	/* EV_ERROR: libev found the number closed.  Either end replaced:
	 * reading would take the program's bytes. */
	if ((revents & EV_ERROR) || !fdown_ours(&w->rd)) {
		rebuild(w);
		return;
	}
	atomic_store(&w->pending, 0);
	while (read(w->rd.fd, buf, sizeof(buf)) > 0)
		;
	w->fn(w->data);
}

static void on_check(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct wake *w = t->data;
	int wr_ours;

	(void)loop, (void)revents;
	pthread_mutex_lock(&w->lock);
	wr_ours = fdown_ours(&w->wr);
	pthread_mutex_unlock(&w->lock);
	if (!fdown_ours(&w->rd) || !wr_ours)
		rebuild(w);
	else if (atomic_exchange(&w->pending, 0))
		w->fn(w->data); /* a wake whose byte was not written */
}

int wake_init(struct wake *w, struct ev_loop *loop, wake_fn fn, void *data)
{
	int rc;

	w->loop = loop;
	w->fn = fn;
	w->data = data;
	w->rebuilt = 0;
	w->rd.fd = w->wr.fd = -1;
	atomic_init(&w->pending, 0);
	pthread_mutex_init(&w->lock, NULL);
	rc = open_pipe(w);
	if (rc) {
		pthread_mutex_destroy(&w->lock);
		return rc;
	}
	ev_timer_init(&w->check, on_check, WAKE_CHECK_S, WAKE_CHECK_S);
	w->check.data = w;
	ev_timer_start(loop, &w->check);
	/* The timer alone must not keep the loop running. */
	ev_unref(loop);
	return 0;
}

void wake_send(struct wake *w)
{
	if (atomic_exchange(&w->pending, 1))
		return;
	/* Not ours: no byte; the loop's check makes a new pipe and calls
	 * back. */
	pthread_mutex_lock(&w->lock);
	if (fdown_ours(&w->wr))
		(void)!write(w->wr.fd, "", 1);
	pthread_mutex_unlock(&w->lock);
}

void wake_atfork_child(struct wake *w)
{
	pthread_mutex_init(&w->lock, NULL);
	fdown_close(&w->rd);
	fdown_close(&w->wr);
}

void wake_release(struct wake *w)
{
	ev_io_stop(w->loop, &w->io);
	ev_ref(w->loop);
	ev_timer_stop(w->loop, &w->check);
	fdown_close(&w->rd);
	fdown_close(&w->wr);
	pthread_mutex_destroy(&w->lock);
}
