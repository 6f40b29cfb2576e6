/*
 * stackgroup: ranks grouped by their main thread's stack, rank ranges.
 */
#include "render/stackgroup.h"
#include "test.h"

static const struct sg_frame waiting[] = {
	{"all_reduce", "torch/distributed/distributed_c10d.py", 1500},
	{"train", "train.py", 40},
	{"<module>", "train.py", 80},
};
static const struct sg_frame waiting_l2[] = {
	{"all_reduce", "torch/distributed/distributed_c10d.py", 1502},
	{"train", "train.py", 40},
	{"<module>", "train.py", 80},
};
static const struct sg_frame loading[] = {
	{"__next__", "torch/utils/data/dataloader.py", 630},
	{"train", "train.py", 38},
	{"<module>", "train.py", 80},
};
/* A prefix of waiting: a different stack. */
static const struct sg_frame shallow[] = {
	{"train", "train.py", 40},
	{"<module>", "train.py", 80},
};

static void test_groups(void)
{
	struct sg_stack st[16] = {{0}};
	struct sg_group *g;
	size_t ng, n = 0;

	/* Ranks 0-6 and 8-15 wait, rank 7 loads: given out of order. */
	for (int r = 15; r >= 0; r--) {
		st[n].rank = r;
		st[n].frames = r == 7 ? loading : r == 3 ? waiting_l2 : waiting;
		st[n].n = 3;
		n++;
	}
	CHECK(stackgroup_build(st, n, 0, &g, &ng) == 0);
	CHECK(ng == 2);
	/* The odd one out first; members in rank order. */
	CHECK(g[0].n == 1 && st[g[0].members[0]].rank == 7);
	CHECK(g[1].n == 15);
	for (size_t i = 0; i < g[1].n; i++)
		CHECK(st[g[1].members[i]].rank == (int64_t)(i < 7 ? i : i + 1));
	stackgroup_free(g, ng);

	/* With lines, rank 3 (another line of all_reduce) stands apart;
	 * equal sizes go by lowest rank. */
	CHECK(stackgroup_build(st, n, 1, &g, &ng) == 0);
	CHECK(ng == 3);
	CHECK(g[0].n == 1 && st[g[0].members[0]].rank == 3);
	CHECK(g[1].n == 1 && st[g[1].members[0]].rank == 7);
	CHECK(g[2].n == 14);
	stackgroup_free(g, ng);

	/* A rank marked lead (the one a verdict names) leads whatever the
	 * sizes and ranks: rank 7 before rank 3; then the group of 14. */
	st[15 - 7].lead = 1;
	CHECK(stackgroup_build(st, n, 1, &g, &ng) == 0);
	CHECK(ng == 3 && st[g[0].members[0]].rank == 7 &&
	      st[g[1].members[0]].rank == 3);
	stackgroup_free(g, ng);
	/* Two ranks, two stacks (a tie): the lead one first. */
	CHECK(stackgroup_build(st + 15 - 7, 2, 0, &g, &ng) == 0);
	CHECK(ng == 2 && st[15 - 7 + g[0].members[0]].rank == 7);
	stackgroup_free(g, ng);
	st[15 - 7].lead = 0;

	/* A stack that is a prefix of another is not the same. */
	st[0].frames = shallow;
	st[0].n = 2;
	CHECK(stackgroup_build(st, n, 0, &g, &ng) == 0);
	CHECK(ng == 3 && g[0].n == 1 && g[1].n == 1);
	stackgroup_free(g, ng);

	/* Nothing in, nothing out; empty stacks group together. */
	CHECK(stackgroup_build(st, 0, 0, &g, &ng) == 0 && ng == 0 && !g);
	st[0].n = st[1].n = 0;
	CHECK(stackgroup_build(st, 2, 0, &g, &ng) == 0 && ng == 1 &&
	      g[0].n == 2);
	stackgroup_free(g, ng);
}

static void test_ranges(void)
{
	int64_t a[] = {8, 0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 2};
	int64_t b[] = {7};
	int64_t c[] = {0, 2, 4, 5};
	char out[64], tiny[6];

	CHECK_STR(stackgroup_ranges(a, 16, out, sizeof(out)), "0-6,8-15");
	CHECK_STR(stackgroup_ranges(b, 1, out, sizeof(out)), "7");
	CHECK_STR(stackgroup_ranges(c, 4, out, sizeof(out)), "0,2,4-5");
	CHECK_STR(stackgroup_ranges(c, 0, out, sizeof(out)), "");
	/* Cut short, still a string. */
	stackgroup_ranges(a, 16, tiny, sizeof(tiny));
	CHECK(strlen(tiny) < sizeof(tiny));
}

TEST_MAIN(test_groups, test_ranges)
