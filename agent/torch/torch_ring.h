/*
 * torch_ring: a bounded single-producer single-consumer queue of fixed-size
 * records, for handing what the torch hooks record (on the training
 * thread, GIL held) to the recorder thread (which writes SQLite without
 * the GIL).  The hot path never blocks and never allocates: a push into a
 * full ring drops the record and counts it.
 *
 * Threads: one producer at a time (the torch hooks run with the GIL held,
 * which serialises them) and one consumer (the recorder thread).  The
 * head and tail are C11 atomics (release on publish, acquire on read), so
 * a popped record is always whole.
 */
#ifndef TORCH_RING_H
#define TORCH_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TORCH_RING_CAP_MAX (1u << 22) /* records */
#define TORCH_RING_ELEM_MAX 4096      /* bytes per record */

struct torch_ring {
	unsigned char *buf;
	size_t cap;	     /* records, a power of two */
	size_t size;	     /* bytes per record */
	_Atomic size_t head; /* next to write (producer) */
	_Atomic size_t tail; /* next to read (consumer) */
	_Atomic uint64_t dropped;
};

/* Makes a ring of cap records (rounded up to a power of two) of size
 * bytes each.  Returns 0, -EINVAL (out of the caps) or -ENOMEM. */
int torch_ring_init(struct torch_ring *r, size_t cap, size_t size);

/* Frees the buffer; no producer or consumer may be using it. */
void torch_ring_release(struct torch_ring *r);

/* Producer: copies size bytes of rec in.  0, or -ENOSPC when full (the
 * record is dropped and counted). */
int torch_ring_push(struct torch_ring *r, const void *rec);

/* Consumer: copies the oldest record out.  0, or -EAGAIN when empty. */
int torch_ring_pop(struct torch_ring *r, void *rec);

/* Records waiting now (a snapshot). */
size_t torch_ring_count(struct torch_ring *r);

#endif
