/*
 * torch_ring: the SPSC queue between the torch hooks and the recorder.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "test.h"
#include "torch/torch_ring.h"

struct rec {
	uint64_t n;
	uint64_t check;
	char pad[48];
};

static void test_basic(void)
{
	struct torch_ring r;
	struct rec a = {0}, b;

	CHECK(torch_ring_init(&r, 0, 8) == -EINVAL);
	CHECK(torch_ring_init(&r, 4, 0) == -EINVAL);
	CHECK(torch_ring_init(&r, 4, TORCH_RING_ELEM_MAX + 1) == -EINVAL);
	CHECK(torch_ring_init(&r, 3, sizeof(struct rec)) == 0);
	CHECK(r.cap == 4);
	CHECK(torch_ring_pop(&r, &b) == -EAGAIN);
	for (int i = 0; i < 4; i++) {
		a.n = (uint64_t)i;
		CHECK(torch_ring_push(&r, &a) == 0);
	}
	CHECK(torch_ring_push(&r, &a) == -ENOSPC);
	CHECK(atomic_load(&r.dropped) == 1);
	CHECK(torch_ring_count(&r) == 4);
	for (int i = 0; i < 4; i++) {
		CHECK(torch_ring_pop(&r, &b) == 0);
		CHECK(b.n == (uint64_t)i);
	}
	CHECK(torch_ring_pop(&r, &b) == -EAGAIN);
	torch_ring_release(&r);
	/* A released ring refuses, never crashes. */
	CHECK(torch_ring_push(&r, &a) == -ENOSPC);
	CHECK(torch_ring_pop(&r, &b) == -EAGAIN);
}

#define N 300000

static void *producer(void *arg)
{
	struct torch_ring *r = arg;
	struct rec a = {0};

	for (uint64_t i = 0; i < N; i++) {
		a.n = i;
		a.check = i * 2654435761u;
		while (torch_ring_push(r, &a) != 0)
			atomic_fetch_sub(&r->dropped, 1); /* retry, uncounted */
	}
	return NULL;
}

static void test_threads(void)
{
	struct torch_ring r;
	struct rec b;
	pthread_t t;
	uint64_t next = 0, bad = 0;

	CHECK(torch_ring_init(&r, 1024, sizeof(struct rec)) == 0);
	CHECK(pthread_create(&t, NULL, producer, &r) == 0);
	while (next < N) {
		if (torch_ring_pop(&r, &b) != 0)
			continue;
		if (b.n != next || b.check != next * 2654435761u)
			bad++;
		next++;
	}
	pthread_join(t, NULL);
	CHECK(bad == 0);
	CHECK(atomic_load(&r.dropped) == 0);
	torch_ring_release(&r);
}

TEST_MAIN(test_basic, test_threads)
