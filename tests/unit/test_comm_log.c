/*
 * comm_log: the records of torch.distributed calls, read while written.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "comm/comm_log.h"
#include "test.h"

static struct comm_rec rec(int op, int64_t seq)
{
	struct comm_rec r;

	memset(&r, 0, sizeof(r));
	r.op = op;
	r.seq = seq;
	r.state = COMM_RUNNING;
	r.bytes = -1;
	snprintf(r.shape, sizeof(r.shape), "[%lld]", (long long)seq);
	return r;
}

static void test_begin_end_read(void)
{
	struct comm_log l;
	struct comm_rec r = rec(3, 1), out;
	uint64_t first, end, id;

	CHECK(comm_log_init(&l, 0) == -EINVAL);
	CHECK(comm_log_init(&l, COMM_LOG_CAP_MAX + 1) == -EINVAL);
	CHECK(comm_log_init(&l, 3) == 0);
	CHECK(l.cap == 4);
	comm_log_span(&l, &first, &end);
	CHECK(first == end);
	id = comm_log_begin(&l, &r);
	CHECK(id == 1);
	CHECK(comm_log_read(&l, id, &out) == 0);
	CHECK(out.id == 1 && out.op == 3 && out.state == COMM_RUNNING);
	CHECK_STR(out.shape, "[1]");
	CHECK(comm_log_end(&l, id, COMM_FAILED, 2.5, "RuntimeError: x") == 0);
	CHECK(comm_log_read(&l, id, &out) == 0);
	CHECK(out.state == COMM_FAILED && out.t1 == 2.5);
	CHECK_STR(out.error, "RuntimeError: x");
	CHECK(comm_log_end(&l, 0, COMM_DONE, 1, NULL) == -ENOENT);
	CHECK(comm_log_end(&l, 99, COMM_DONE, 1, NULL) == -ENOENT);
	CHECK(comm_log_read(&l, 2, &out) == -ENOENT); /* not written yet */
	comm_log_release(&l);
}

static void test_wrap_overwrites_oldest(void)
{
	struct comm_log l;
	struct comm_rec r, out;
	uint64_t first, end;

	CHECK(comm_log_init(&l, 4) == 0);
	for (int i = 1; i <= 10; i++) {
		r = rec(0, i);
		CHECK(comm_log_begin(&l, &r) == (uint64_t)i);
	}
	comm_log_span(&l, &first, &end);
	CHECK(first == 7 && end == 11);
	CHECK(comm_log_read(&l, 6, &out) == -ENOENT); /* overwritten by 10 */
	CHECK(comm_log_read(&l, 7, &out) == 0 && out.seq == 7);
	/* The end of an overwritten call changes nothing. */
	CHECK(comm_log_end(&l, 3, COMM_DONE, 1, NULL) == -ENOENT);
	CHECK(comm_log_read(&l, 7, &out) == 0 && out.state == COMM_RUNNING);
	comm_log_release(&l);
}

static void test_forget_after_fork(void)
{
	struct comm_log l;
	struct comm_rec r = rec(0, 1), out;
	uint64_t first, end, id;

	CHECK(comm_log_init(&l, 8) == 0);
	id = comm_log_begin(&l, &r);
	comm_log_forget(&l);
	comm_log_span(&l, &first, &end);
	CHECK(first == end);
	CHECK(comm_log_end(&l, id, COMM_DONE, 1, NULL) == -ENOENT);
	r = rec(0, 2);
	id = comm_log_begin(&l, &r);
	comm_log_span(&l, &first, &end);
	CHECK(first == id && end == id + 1);
	CHECK(comm_log_read(&l, id, &out) == 0 && out.seq == 2);
	comm_log_release(&l);
}

/* The running count follows begins, ends, records overwritten and a
 * fork's forgetting. */
static void test_running_count(void)
{
	struct comm_log l;
	struct comm_rec r = rec(0, 1);
	uint64_t a, b;

	CHECK(comm_log_init(&l, 4) == 0);
	CHECK(comm_log_running(&l) == 0);
	a = comm_log_begin(&l, &r);
	b = comm_log_begin(&l, &r);
	CHECK(comm_log_running(&l) == 2);
	CHECK(comm_log_end(&l, a, COMM_DONE, 1, NULL) == 0);
	CHECK(comm_log_running(&l) == 1);
	CHECK(comm_log_end(&l, a, COMM_FAILED, 2, NULL) == 0); /* no change */
	CHECK(comm_log_running(&l) == 1);
	r.state = COMM_DONE;
	comm_log_begin(&l, &r);
	CHECK(comm_log_running(&l) == 1);
	r.state = COMM_RUNNING;
	comm_log_begin(&l, &r); /* 4 kept: a, b, and these two */
	comm_log_begin(&l, &r); /* overwrites a (done) */
	CHECK(comm_log_running(&l) == 3);
	comm_log_begin(&l, &r); /* overwrites b (running) */
	CHECK(comm_log_running(&l) == 3);
	CHECK(comm_log_end(&l, b, COMM_DONE, 1, NULL) == -ENOENT);
	CHECK(comm_log_running(&l) == 3);
	comm_log_forget(&l);
	CHECK(comm_log_running(&l) == 0);
	comm_log_begin(&l, &r); /* overwrites a parent's running record */
	CHECK(comm_log_running(&l) == 1);
	CHECK(comm_log_clock() > 0);
	comm_log_release(&l);
}

static void test_groups(void)
{
	static struct comm_log l; /* large: the group table */
	char name[16], ranks[300];

	CHECK(comm_log_init(&l, 8) == 0);
	CHECK(comm_log_find(&l, "0") == -1);
	CHECK(comm_log_group(&l, "0", "0,1,2,3") == 0);
	CHECK(comm_log_group(&l, "1", "0,2") == 1);
	CHECK(comm_log_group(&l, "0", "ignored") == 0);
	CHECK(comm_log_groups(&l) == 2);
	CHECK_STR(comm_log_group_at(&l, 1)->ranks, "0,2");
	CHECK(comm_log_group_at(&l, 2) == NULL);
	CHECK(comm_log_group_at(&l, -1) == NULL);
	CHECK(comm_log_next_seq(&l, 0) == 1);
	CHECK(comm_log_next_seq(&l, 0) == 2);
	CHECK(comm_log_next_seq(&l, 1) == 1);
	CHECK(comm_log_next_seq(&l, -1) == 0);
	CHECK(comm_log_next_seq(&l, 5) == 0);
	/* Ranks too long for the entry are cut with "...". */
	memset(ranks, '7', sizeof(ranks) - 1);
	ranks[sizeof(ranks) - 1] = '\0';
	CHECK(comm_log_group(&l, "2", ranks) == 2);
	CHECK(strlen(comm_log_group_at(&l, 2)->ranks) == COMM_RANKS_MAX - 1);
	CHECK(strstr(comm_log_group_at(&l, 2)->ranks, "...") != NULL);
	for (int i = 3; i < COMM_GROUPS_MAX; i++) {
		snprintf(name, sizeof(name), "%d", i);
		CHECK(comm_log_group(&l, name, "") == i);
	}
	CHECK(comm_log_group(&l, "full", "") == -1);
	comm_log_release(&l);
}

/* A reader copying records while the writer begins and ends them never
 * sees a torn one: each record's fields agree with each other. */
static struct comm_log shared;
static atomic_int stop;

static void *reader(void *arg)
{
	uint64_t first, end, bad = 0;
	struct comm_rec out;

	(void)arg;
	while (!atomic_load(&stop)) {
		comm_log_span(&shared, &first, &end);
		for (uint64_t id = first; id < end; id++) {
			int rc = comm_log_read(&shared, id, &out);

			if (rc == 0 &&
			    ((uint64_t)out.seq != id ||
			     out.bytes != out.seq * 3 ||
			     (out.state == COMM_DONE && out.t1 != (double)id)))
				bad++;
		}
	}
	return (void *)(uintptr_t)bad;
}

static void test_concurrent_reader(void)
{
	pthread_t t;
	void *bad;
	struct comm_rec r;

	CHECK(comm_log_init(&shared, 64) == 0);
	CHECK(pthread_create(&t, NULL, reader, NULL) == 0);
	for (int64_t i = 1; i <= 400000; i++) {
		uint64_t id;

		r = rec(1, i);
		r.bytes = i * 3;
		id = comm_log_begin(&shared, &r);
		comm_log_end(&shared, id, COMM_DONE, (double)id, NULL);
	}
	atomic_store(&stop, 1);
	pthread_join(t, &bad);
	CHECK(bad == NULL);
	comm_log_release(&shared);
}

TEST_MAIN(test_begin_end_read, test_wrap_overwrites_oldest,
	  test_forget_after_fork, test_running_count, test_groups, test_concurrent_reader)
