/*
 * comm_log: the record of torch.distributed calls, kept in C so that it
 * can be read while the rank's Python thread is blocked inside one.
 *
 * A fixed ring of records, newest last.  A call writes its record when it
 * starts (state running) and updates it in place when it ends (done or
 * failed): the row of a collective that never returns is there to query.
 * When the ring is full the oldest record is overwritten, whatever its
 * state.  The process groups the records name are kept beside, with each
 * group's next sequence number.
 *
 *   comm_log_init(&log, 16384);
 *   uint64_t id = comm_log_begin(&log, &rec);     (state running)
 *   ...the call...
 *   comm_log_end(&log, id, COMM_DONE, t1, NULL);
 *   comm_log_read(&log, i, &copy);                (any thread, no lock)
 *
 * Threads: one writer at a time (the callers hold the GIL, which
 * serialises begin, end and the group functions); any number of readers
 * on any thread, lock-free: each record has a sequence lock (odd while
 * written), so a read copies a whole record or reports it torn.  Groups
 * are published by their count: an entry below comm_log_groups() is
 * complete and its name and ranks never change.
 */
#ifndef COMM_LOG_H
#define COMM_LOG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define COMM_LOG_CAP_MAX (1u << 22)
#define COMM_GROUPS_MAX 256
#define COMM_NAME_MAX 32   /* a group's name */
#define COMM_RANKS_MAX 120 /* a group's ranks, "0,1,2,3" (cut with "...") */
#define COMM_SHAPE_MAX 48
#define COMM_DTYPE_MAX 16
#define COMM_ERROR_MAX 120

enum comm_state { COMM_RUNNING = 0, COMM_DONE, COMM_FAILED };

struct comm_rec {
	uint64_t id;	/* call number in this process, from 1 */
	int64_t seq;	/* in its group, from 1; 0: group unknown */
	int64_t pg_seq; /* torch's own number for it (the same on every rank,
			 * counting calls made before the agent came); 0: none */
	int64_t bytes;	/* the data this rank contributes; -1 unknown */
	int64_t thread; /* the caller's thread id (threading.get_ident) */
	double ts;	/* start, Unix seconds */
	double t0, t1;	/* start and end on the monotonic clock */
	int32_t op;	/* index into the caller's op names */
	int32_t group;	/* comm_log group index; -1 unknown */
	int32_t rank;	/* this process's global rank; -1 unknown */
	int32_t peer;	/* src/dst/root rank; -1 none */
	int32_t async;	/* async_op=True (or isend/irecv) */
	int32_t state;	/* enum comm_state */
	int32_t native; /* the caller's kernel thread id; 0 unknown */
	char shape[COMM_SHAPE_MAX];
	char dtype[COMM_DTYPE_MAX];
	char error[COMM_ERROR_MAX];
};

struct comm_slot {
	_Atomic uint32_t lock; /* odd while written */
	struct comm_rec rec;
};

struct comm_group {
	char name[COMM_NAME_MAX];
	char ranks[COMM_RANKS_MAX];
	int64_t next_seq; /* writer only */
};

struct comm_log {
	struct comm_slot *slots;
	size_t cap;	       /* a power of two */
	_Atomic uint64_t next; /* the id the next call gets */
	_Atomic uint64_t running; /* records kept in state running */
	uint64_t base;	       /* ids below it are not this process's */
	struct comm_group groups[COMM_GROUPS_MAX];
	_Atomic int ngroups;
};

/* Makes a log of cap records (rounded up to a power of two).  0, -EINVAL
 * (0 or past COMM_LOG_CAP_MAX) or -ENOMEM. */
int comm_log_init(struct comm_log *l, size_t cap);

/* Frees the ring; nobody may be using it. */
void comm_log_release(struct comm_log *l);

/* After fork, in the child: the records so far were the parent's calls;
 * they are no longer read.  Groups and sequence numbers are kept. */
void comm_log_forget(struct comm_log *l);

/* Writer: stores r (its id is assigned; state as given) as the newest
 * record.  Returns the id (from 1). */
uint64_t comm_log_begin(struct comm_log *l, const struct comm_rec *r);

/* Writer: the call id ended at t1 (monotonic) with state; error may be
 * NULL.  Does nothing when its record has been overwritten.  Returns 0,
 * or -ENOENT then. */
int comm_log_end(struct comm_log *l, uint64_t id, int state, double t1,
		 const char *error);

/* Writer: the call id's torch sequence number, learnt after it began
 * (a point-to-point call: whether this torch counts them is seen when the
 * first one returns).  0, or -ENOENT when its record has been overwritten. */
int comm_log_set_pg_seq(struct comm_log *l, uint64_t id, int64_t pg_seq);

/* Records kept now in state running (any thread). */
uint64_t comm_log_running(struct comm_log *l);

/* The clock of t0 and t1: monotonic, in seconds.  Any thread. */
double comm_log_clock(void);

/* The ids a reader may read now: [*first, *end). */
void comm_log_span(struct comm_log *l, uint64_t *first, uint64_t *end);

/* Reader: copies the record of call id.  0; -EAGAIN when it was being
 * written (try again), -ENOENT when it has been overwritten or is not
 * written yet. */
int comm_log_read(struct comm_log *l, uint64_t id, struct comm_rec *out);

/* Writer: the index of the group named name; -1 when there is none. */
int comm_log_find(struct comm_log *l, const char *name);

/* Writer: the index of the group named name, added with its ranks text
 * when new; -1 when the table is full. */
int comm_log_group(struct comm_log *l, const char *name, const char *ranks);

/* Writer: the next sequence number of group g (from 1). */
int64_t comm_log_next_seq(struct comm_log *l, int g);

/* Reader: groups published so far, and group g's entry (NULL past them). */
int comm_log_groups(struct comm_log *l);
const struct comm_group *comm_log_group_at(struct comm_log *l, int g);

#endif
