/*
 * torch_ring: the SPSC record queue.  See torch_ring.h.
 */
#include "torch_ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int torch_ring_init(struct torch_ring *r, size_t cap, size_t size)
{
	size_t c = 1;

	memset(r, 0, sizeof(*r));
	if (cap == 0 || cap > TORCH_RING_CAP_MAX || size == 0 ||
	    size > TORCH_RING_ELEM_MAX)
		return -EINVAL;
	while (c < cap)
		c <<= 1;
	r->buf = calloc(c, size);
	if (!r->buf)
		return -ENOMEM;
	r->cap = c;
	r->size = size;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	atomic_init(&r->dropped, 0);
	return 0;
}

void torch_ring_release(struct torch_ring *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
}

int torch_ring_push(struct torch_ring *r, const void *rec)
{
	size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);

	if (!r->buf || head - tail >= r->cap) {
		atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
		return -ENOSPC;
	}
	memcpy(r->buf + (head & (r->cap - 1)) * r->size, rec, r->size);
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
	return 0;
}

int torch_ring_pop(struct torch_ring *r, void *rec)
{
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	size_t head = atomic_load_explicit(&r->head, memory_order_acquire);

	if (!r->buf || tail == head)
		return -EAGAIN;
	memcpy(rec, r->buf + (tail & (r->cap - 1)) * r->size, r->size);
	atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
	return 0;
}

size_t torch_ring_count(struct torch_ring *r)
{
	size_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);

	return head - tail;
}
