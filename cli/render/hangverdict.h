/*
 * hangverdict: what each rank of a stuck job is in, told in one line, for
 * `probing cluster hang`.
 *
 * The input is per rank: whether it answered, the last call it started on
 * each process group (python.comm_collective: op, sequence number, state,
 * time waited), and where its main thread is (a function and file:line).
 * The focus is the collective most ranks wait in (the same group,
 * sequence number and op; ties: the longest wait).  Calls are the same
 * call when torch's numbers (pg_seq) are equal, where both have one:
 * they count every collective of the group on every rank, whenever the
 * agent came; else when the ranks' own counts (seq) are.  Every other member of
 * its group is then one of:
 *
 *   missing     did not answer (dead, or unreachable)
 *   mismatched  waits in another op with the same sequence number
 *   elsewhere   waits in another call of the group (another seq)
 *   ahead       its last recorded call on the group is earlier, but
 *               torch has started that call's number or a later one
 *               there (torch_last): a call not made through the Python
 *               API (C++: DDP's broadcasts) — it skipped the waiters'
 *               call and went on
 *   behind      has not reached it (its last call on the group is
 *               earlier, or it has none): where it is instead
 *   past        finished that call and went on
 *
 * With no rank waiting, ranks whose last call failed (a peer that died:
 * "Connection reset by peer") are named with the error, with the ranks
 * that did not answer.
 *
 * and the verdict names them, e.g.
 *   "rank 3 is in broadcast #5 on group 0 while ranks 0-2 are in
 *    all_reduce #5: mismatched collectives"
 *   "ranks 0-2 wait in all_reduce #812 on group 0 (for 31.0 s); rank 3
 *    has not reached it (it is in load_batch, train.py:88)"
 *
 * Pure: no I/O.  Caps: HV_GROUPS_MAX groups per rank are looked at.
 */
#ifndef CLI_HANGVERDICT_H
#define CLI_HANGVERDICT_H

#include <stddef.h>
#include <stdint.h>

#define HV_GROUPS_MAX 16
#define HV_TEXT_MAX 64

/* A rank's last call on one process group. */
struct hv_call {
	char pg[HV_TEXT_MAX];
	char pg_ranks[1024]; /* "0,1,2,3": global ranks; "" unknown */
	char op[HV_TEXT_MAX];
	int64_t seq;	/* the rank's own count of calls on the group */
	int64_t pg_seq; /* torch's number for the call, 0: none */
	int64_t torch_last; /* torch's number of the last call started on
			       the group on this rank, from Python or C++
			       (python.comm_groups); 0: unknown */
	char torch_last_op[HV_TEXT_MAX]; /* that call's op, as torch's
					    Flight Recorder names it; "" */
	int running;
	int failed;
	double waited;	 /* s, when running */
	char error[256]; /* when failed */
};

struct hv_rank {
	int64_t rank;
	int answered;
	const char *why;		    /* when not answered */
	struct hv_call last[HV_GROUPS_MAX]; /* newest first */
	size_t nlast;
	const char *where; /* "load_batch (train.py:88)", or NULL */
};

enum hv_kind {
	HV_NONE = 0, /* no rank waits in a call (nor failed in one) */
	HV_MISMATCH, /* a member in another op at the same seq */
	HV_MISSING,  /* members that did not answer */
	HV_BEHIND,   /* members that have not reached it */
	HV_FAILED,   /* members whose call failed (alone: none waits) */
	HV_ALL_WAIT, /* every member waits in it */
	HV_OTHER,    /* members elsewhere or past it */
	HV_AHEAD,    /* members that skipped it (after HV_MISMATCH in the
			order: it explains the others) */
};

struct hv_verdict {
	enum hv_kind kind; /* the first that applies, in the order above
			      (mismatch first: it explains the others;
			      then ahead);
			      HV_FAILED also when no rank waits */
	char text[4096];
};

/* The verdict on n ranks (rank order not required).  Always fills v;
 * -ENOMEM only when it could not work (v says so). */
int hangverdict(const struct hv_rank *ranks, size_t n, struct hv_verdict *v);

#endif
