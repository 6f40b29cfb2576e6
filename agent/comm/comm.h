/*
 * comm: torch.distributed calls recorded (python.comm_collective), with
 * the ones in flight, switched by the comm.* settings.
 *
 * On by default (comm.record): once the program has imported
 * torch.distributed, its collectives and point-to-point functions are
 * wrapped (comm_wrap.h) and DistributedDataParallel's gradient
 * all-reduces recorded (comm_ddp.h).  Each call is a row from the moment
 * it starts, so the collective a rank is stuck in is there to query while
 * its Python thread is blocked in C:
 *
 *   python.comm_collective(id, ts, rank, pg, pg_ranks, op, seq, shape,
 *                          dtype, bytes, async, peer, state, duration,
 *                          waited, thread_id, error)
 *   python.comm_metrics    the original Probing's name: a view of it
 *                          (src_rank, dst_rank, latency, bandwidth)
 *
 * state is running, done or failed; duration (s) once it ended, waited
 * (s) while it runs.  seq counts the calls on group pg from 1, the same
 * way on every rank, so rows of different ranks with the same pg and seq
 * are the same collective.  The last comm.max_rows calls are kept (in
 * the agent's memory, not SQLite: the table is live).
 *
 * Threads: comm_init on the agent thread at start-up; comm_tick on the
 * recorder thread (memory.h), which it may block for a bounded time
 * waiting for the GIL; the table is read on the querying thread without
 * the GIL.
 */
#ifndef COMM_H
#define COMM_H

#include <stddef.h>

struct store;

/* Creates the tables and listens to the comm.* settings.  0, or a
 * negative error with err. */
int comm_init(struct store *st, char *err, size_t errlen);

/* Applies settings that changed and waits for torch.distributed to be
 * imported (with the GIL).  Returns the ms after which it wants to run
 * again (-1: only when a setting changes). */
int comm_tick(void);

/* Settings changed: for the recorder thread's wake-up.  Any thread. */
int comm_pending(void);

/* In a forked child: the records so far are the parent's. */
void comm_atfork_child(void);

#endif
