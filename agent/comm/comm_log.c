/*
 * comm_log: the ring of torch.distributed call records.  See comm_log.h.
 *
 * Record id i lives in slot (i - 1) & (cap - 1).  `next` is published
 * with release after the record's first write, so a reader that sees
 * next > i finds slot i written at least once (or overwritten since:
 * the copied id tells).
 */
#include "comm_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int comm_log_init(struct comm_log *l, size_t cap)
{
	size_t c = 1;

	memset(l, 0, sizeof(*l));
	if (cap == 0 || cap > COMM_LOG_CAP_MAX)
		return -EINVAL;
	while (c < cap)
		c <<= 1;
	l->slots = calloc(c, sizeof(*l->slots));
	if (!l->slots)
		return -ENOMEM;
	l->cap = c;
	atomic_init(&l->next, 1);
	atomic_init(&l->running, 0);
	l->base = 1;
	atomic_init(&l->ngroups, 0);
	return 0;
}

void comm_log_release(struct comm_log *l)
{
	free(l->slots);
	l->slots = NULL;
	l->cap = 0;
	atomic_store(&l->next, 0);
}

void comm_log_forget(struct comm_log *l)
{
	l->base = atomic_load(&l->next);
	atomic_store(&l->running, 0);
}

uint64_t comm_log_running(struct comm_log *l)
{
	return atomic_load_explicit(&l->running, memory_order_relaxed);
}

double comm_log_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writer: a kept record of state from leaves (-1) or enters (+1) the
 * running count. */
static void count(struct comm_log *l, int state, int d)
{
	if (state == COMM_RUNNING)
		atomic_fetch_add_explicit(&l->running, (uint64_t)(int64_t)d,
					  memory_order_relaxed);
}

static struct comm_slot *slot_of(struct comm_log *l, uint64_t id)
{
	return &l->slots[(id - 1) & (l->cap - 1)];
}

static void write_open(struct comm_slot *s)
{
	uint32_t v = atomic_load_explicit(&s->lock, memory_order_relaxed);

	atomic_store_explicit(&s->lock, v + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void write_close(struct comm_slot *s)
{
	uint32_t v = atomic_load_explicit(&s->lock, memory_order_relaxed);

	atomic_store_explicit(&s->lock, v + 1, memory_order_release);
}

uint64_t comm_log_begin(struct comm_log *l, const struct comm_rec *r)
{
	uint64_t id = atomic_load_explicit(&l->next, memory_order_relaxed);
	struct comm_slot *s;

	if (!l->slots)
		return 0;
	s = slot_of(l, id);
	if (s->rec.id >= l->base) /* the record overwritten was kept */
		count(l, s->rec.state, -1);
	count(l, r->state, +1);
	write_open(s);
	s->rec = *r;
	s->rec.id = id;
	write_close(s);
	atomic_store_explicit(&l->next, id + 1, memory_order_release);
	return id;
}

int comm_log_end(struct comm_log *l, uint64_t id, int state, double t1,
		 const char *error)
{
	struct comm_slot *s;

	if (!l->slots || id == 0 || id < l->base)
		return -ENOENT;
	s = slot_of(l, id);
	if (s->rec.id != id) /* overwritten: only the writer writes it */
		return -ENOENT;
	count(l, s->rec.state, -1);
	count(l, state, +1);
	write_open(s);
	s->rec.state = state;
	s->rec.t1 = t1;
	if (error)
		snprintf(s->rec.error, sizeof(s->rec.error), "%s", error);
	write_close(s);
	return 0;
}

int comm_log_set_pg_seq(struct comm_log *l, uint64_t id, int64_t pg_seq)
{
	struct comm_slot *s;

	if (!l->slots || id == 0 || id < l->base)
		return -ENOENT;
	s = slot_of(l, id);
	if (s->rec.id != id)
		return -ENOENT;
	write_open(s);
	s->rec.pg_seq = pg_seq;
	write_close(s);
	return 0;
}

void comm_log_span(struct comm_log *l, uint64_t *first, uint64_t *end)
{
	uint64_t e = atomic_load_explicit(&l->next, memory_order_acquire);
	uint64_t f = l->base;

	if (e == 0 || !l->slots) {
		*first = *end = 0;
		return;
	}
	if (e > l->cap && e - l->cap > f)
		f = e - l->cap;
	*first = f < e ? f : e;
	*end = e;
}

int comm_log_read(struct comm_log *l, uint64_t id, struct comm_rec *out)
{
	struct comm_slot *s;
	uint32_t v0, v1;

	if (!l->slots || id == 0)
		return -ENOENT;
	s = slot_of(l, id);
	v0 = atomic_load_explicit(&s->lock, memory_order_acquire);
	if (v0 & 1)
		return -EAGAIN;
	memcpy(out, &s->rec, sizeof(*out));
	atomic_thread_fence(memory_order_acquire);
	v1 = atomic_load_explicit(&s->lock, memory_order_relaxed);
	if (v0 != v1)
		return -EAGAIN;
	if (out->id != id)
		return -ENOENT;
	/* Torn text cannot happen here, but a reader trusts nothing. */
	out->shape[sizeof(out->shape) - 1] = '\0';
	out->dtype[sizeof(out->dtype) - 1] = '\0';
	out->error[sizeof(out->error) - 1] = '\0';
	return 0;
}

int comm_log_find(struct comm_log *l, const char *name)
{
	int n = atomic_load_explicit(&l->ngroups, memory_order_relaxed);

	for (int i = 0; i < n; i++)
		if (strncmp(l->groups[i].name, name, COMM_NAME_MAX - 1) == 0)
			return i;
	return -1;
}

int comm_log_group(struct comm_log *l, const char *name, const char *ranks)
{
	int n = comm_log_find(l, name);
	struct comm_group *g;
	size_t len;

	if (n >= 0)
		return n;
	n = atomic_load_explicit(&l->ngroups, memory_order_relaxed);
	if (n >= COMM_GROUPS_MAX)
		return -1;
	g = &l->groups[n];
	snprintf(g->name, sizeof(g->name), "%s", name);
	len = strlen(ranks);
	if (len < sizeof(g->ranks))
		memcpy(g->ranks, ranks, len + 1);
	else
		snprintf(g->ranks, sizeof(g->ranks), "%.*s...",
			 (int)sizeof(g->ranks) - 4, ranks);
	g->next_seq = 1;
	atomic_store_explicit(&l->ngroups, n + 1, memory_order_release);
	return n;
}

int64_t comm_log_next_seq(struct comm_log *l, int g)
{
	if (g < 0 ||
	    g >= atomic_load_explicit(&l->ngroups, memory_order_relaxed))
		return 0;
	return l->groups[g].next_seq++;
}

int comm_log_groups(struct comm_log *l)
{
	return atomic_load_explicit(&l->ngroups, memory_order_acquire);
}

const struct comm_group *comm_log_group_at(struct comm_log *l, int g)
{
	if (g < 0 || g >= comm_log_groups(l))
		return NULL;
	return &l->groups[g];
}
