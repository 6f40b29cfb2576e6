/*
 * hangverdict: the one line `probing cluster hang` leads with.
 */
#include "render/hangverdict.h"
#include "test.h"

static void call(struct hv_rank *r, const char *pg, const char *op, int64_t seq,
		 const char *state, double waited)
{
	struct hv_call *c = &r->last[r->nlast++];

	memset(c, 0, sizeof(*c));
	snprintf(c->pg, sizeof(c->pg), "%s", pg);
	snprintf(c->pg_ranks, sizeof(c->pg_ranks), "0,1,2,3");
	snprintf(c->op, sizeof(c->op), "%s", op);
	c->seq = seq;
	c->running = !strcmp(state, "running");
	c->failed = !strcmp(state, "failed");
	c->waited = waited;
	if (c->failed)
		snprintf(c->error, sizeof(c->error), "RuntimeError: reset");
}

static void ranks(struct hv_rank *r, size_t n)
{
	memset(r, 0, n * sizeof(*r));
	for (size_t i = 0; i < n; i++) {
		r[i].rank = (int64_t)i;
		r[i].answered = 1;
	}
}

static void test_behind(void)
{
	struct hv_rank r[4];
	struct hv_verdict v;

	ranks(r, 4);
	for (int i = 0; i < 3; i++)
		call(&r[i], "0", "all_reduce", 812, "running", 31.04);
	call(&r[3], "0", "all_reduce", 811, "done", 0);
	r[3].where = "load_batch (train.py:88)";
	CHECK(hangverdict(r, 4, &v) == 0);
	CHECK(v.kind == HV_BEHIND);
	CHECK_STR(v.text, "ranks 0-2 wait in all_reduce #812 on group 0 (for "
			  "31.0 s); rank 3 has not reached it (it is in "
			  "load_batch (train.py:88))");
	/* A rank with no call on the group yet is behind too. */
	ranks(r, 2);
	call(&r[0], "0", "barrier", 1, "running", 2);
	CHECK(hangverdict(r, 2, &v) == 0);
	CHECK(v.kind == HV_BEHIND);
	CHECK(strstr(v.text, "rank 1 has not reached it") != NULL);
}

static void test_mismatch(void)
{
	struct hv_rank r[4];
	struct hv_verdict v;

	ranks(r, 4);
	for (int i = 0; i < 3; i++)
		call(&r[i], "0", "all_reduce", 5, "running", 9);
	call(&r[3], "0", "broadcast", 5, "running", 9);
	CHECK(hangverdict(r, 4, &v) == 0);
	CHECK(v.kind == HV_MISMATCH);
	CHECK_STR(v.text, "rank 3 is in broadcast #5 on group 0 while ranks "
			  "0-2 are in all_reduce #5: mismatched collectives");
}

static void test_missing_and_failed(void)
{
	struct hv_rank r[4];
	struct hv_verdict v;

	ranks(r, 4);
	call(&r[0], "0", "all_reduce", 15, "failed", 0);
	call(&r[1], "0", "all_reduce", 15, "running", 13);
	call(&r[2], "0", "all_reduce", 15, "failed", 0);
	r[3].answered = 0;
	r[3].why = "connection refused";
	CHECK(hangverdict(r, 4, &v) == 0);
	CHECK(v.kind == HV_MISSING);
	CHECK_STR(v.text, "rank 1 waits in all_reduce #15 on group 0 (for "
			  "13.0 s); rank 3 did not answer (connection "
			  "refused); ranks 0,2: all_reduce #15 on group 0 "
			  "failed (RuntimeError: reset)");
	/* No rank waits: the failures and the missing rank. */
	r[1].nlast = 0;
	call(&r[1], "0", "all_reduce", 15, "failed", 0);
	CHECK(hangverdict(r, 4, &v) == 0);
	CHECK(v.kind == HV_FAILED);
	CHECK(strstr(v.text, "ranks 0-2: all_reduce #15 on group 0 failed") ==
	      v.text);
	CHECK(strstr(v.text, "; rank 3 did not answer (connection refused)"));
}

static void test_all_wait_and_none(void)
{
	struct hv_rank r[2];
	struct hv_verdict v;

	ranks(r, 2);
	call(&r[0], "0", "all_reduce", 3, "running", 1);
	call(&r[1], "0", "all_reduce", 3, "running", 2);
	snprintf(r[0].last[0].pg_ranks, sizeof(r[0].last[0].pg_ranks), "0,1");
	CHECK(hangverdict(r, 2, &v) == 0);
	CHECK(v.kind == HV_ALL_WAIT);
	CHECK(strstr(v.text, "ranks 0-1 wait in all_reduce #3") == v.text);
	CHECK(strstr(v.text, "every member of group 0 waits in it"));
	ranks(r, 2);
	call(&r[0], "0", "all_reduce", 3, "done", 0);
	CHECK(hangverdict(r, 2, &v) == 0);
	CHECK(v.kind == HV_NONE);
	CHECK(strstr(v.text, "no rank waits in a collective") == v.text);
	ranks(r, 2);
	CHECK(hangverdict(r, 2, &v) == 0);
	CHECK(strstr(v.text, "no collectives recorded") == v.text);
	CHECK(hangverdict(NULL, 0, &v) == 0);
	CHECK(v.kind == HV_NONE);
}

static void test_groups_and_members(void)
{
	struct hv_rank r[4];
	struct hv_verdict v;

	/* Ranks 0 and 2 wait on group 1 (ranks 0,2) in different calls;
	 * 1 and 3 are not its members and are left out.  The focus is the
	 * longer wait (rank 2's). */
	ranks(r, 4);
	call(&r[0], "1", "broadcast", 7, "running", 4);
	snprintf(r[0].last[0].pg_ranks, sizeof(r[0].last[0].pg_ranks), "0,2");
	call(&r[2], "1", "all_gather", 6, "running", 5);
	snprintf(r[2].last[0].pg_ranks, sizeof(r[2].last[0].pg_ranks), "0,2");
	call(&r[1], "0", "all_reduce", 2, "done", 0);
	call(&r[3], "0", "all_reduce", 2, "done", 0);
	CHECK(hangverdict(r, 4, &v) == 0);
	CHECK(v.kind == HV_OTHER);
	CHECK(strstr(v.text, "rank 2 waits in all_gather #6 on group 1") ==
	      v.text);
	CHECK(strstr(v.text, "; rank 0 is in broadcast #7 on group 1"));
	CHECK(strstr(v.text, "rank 1") == NULL);
	CHECK(strstr(v.text, "rank 3") == NULL);
}

/* The ranks' own counts differ (an agent that came late counts from
 * its first call); torch's numbers decide. */
static void test_torch_numbers_decide(void)
{
	struct hv_rank r[3];
	struct hv_verdict v;

	ranks(r, 3);
	call(&r[0], "0", "all_reduce", 9, "running", 4);
	call(&r[1], "0", "all_reduce", 9, "running", 4);
	call(&r[2], "0", "broadcast", 2, "running", 4); /* came late */
	r[0].last[0].pg_seq = r[1].last[0].pg_seq = r[2].last[0].pg_seq = 1000;
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(v.kind == HV_MISMATCH);
	/* By its own count rank 2 would be far behind; by torch's it has
	 * finished the call and gone on. */
	r[2].nlast = 0;
	call(&r[2], "0", "all_reduce", 3, "done", 0);
	r[2].last[0].pg_seq = 1001;
	r[2].where = "eval (x.py:5)";
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(v.kind == HV_OTHER);
	CHECK(strstr(v.text, "rank 2 finished all_reduce #3 and went on"));
	r[2].last[0].pg_seq = 999;
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(v.kind == HV_BEHIND);
}

/* Issue 28: rank 1 skipped an all_reduce and went on into DDP's C++
 * broadcast, which nothing records: by its records it is behind; torch's
 * count of calls started on the group says it is ahead. */
static void test_skipped_into_cpp_is_ahead(void)
{
	struct hv_rank r[3];
	struct hv_verdict v;

	ranks(r, 3);
	call(&r[0], "0", "all_reduce", 3, "running", 8);
	call(&r[2], "0", "all_reduce", 3, "running", 8);
	call(&r[1], "0", "all_reduce", 2, "done", 0);
	r[0].last[0].pg_seq = r[2].last[0].pg_seq = 3;
	r[1].last[0].pg_seq = 2;
	r[1].last[0].torch_last = 3;
	r[1].where = "_sync_module_states (distributed.py:998)";
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(v.kind == HV_AHEAD);
	CHECK_STR(v.text,
		  "ranks 0,2 wait in all_reduce #3 on group 0 (for 8.0 s); "
		  "rank 1 skipped it and went on: torch has started call 3 "
		  "on group 0 there (the waiters' call is its 3), after "
		  "all_reduce #2, through no call of torch.distributed's "
		  "Python API (one made in C++, such as DDP's broadcast of "
		  "its buffers) (it is in _sync_module_states "
		  "(distributed.py:998))");
	/* The call named by torch's Flight Recorder. */
	snprintf(r[1].last[0].torch_last_op, sizeof(r[1].last[0].torch_last_op),
		 "allgather");
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(strstr(v.text, "(the waiters' call is its 3), which torch's "
			     "Flight Recorder names allgather, after "
			     "all_reduce #2, through no call") != NULL);
	r[1].last[0].torch_last_op[0] = '\0';
	/* torch's count not known (the GIL did not come): behind, as the
	 * records say. */
	r[1].last[0].torch_last = 0;
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(v.kind == HV_BEHIND);
	/* torch's count no further than its last record: behind. */
	r[1].last[0].torch_last = 2;
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(v.kind == HV_BEHIND);
}

/* A rank whose call on the waited-in group failed is named with that
 * call's error, also when its newest call is on another group. */
static void test_failed_on_the_focus_group(void)
{
	struct hv_rank r[3];
	struct hv_verdict v;

	ranks(r, 3);
	call(&r[0], "0", "all_reduce", 7, "running", 5);
	call(&r[1], "0", "all_reduce", 7, "running", 5);
	call(&r[2], "1", "barrier", 2, "done", 0); /* newest */
	call(&r[2], "0", "all_reduce", 7, "failed", 0);
	CHECK(hangverdict(r, 3, &v) == 0);
	CHECK(v.kind == HV_FAILED);
	CHECK(strstr(v.text, "; rank 2: all_reduce #7 on group 0 failed "
			     "(RuntimeError: reset)"));
}

TEST_MAIN(test_behind, test_torch_numbers_decide,
	  test_skipped_into_cpp_is_ahead,
	  test_failed_on_the_focus_group, test_mismatch, test_missing_and_failed,
	  test_all_wait_and_none, test_groups_and_members)
