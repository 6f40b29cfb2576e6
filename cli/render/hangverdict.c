/*
 * hangverdict: the one-line verdict of `probing cluster hang`.  See
 * hangverdict.h.
 */
#include "hangverdict.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stackgroup.h"

enum role {
	R_WAITER,
	R_MISSING,
	R_MISMATCH,
	R_FAILED,
	R_BEHIND,
	R_ELSEWHERE,
	R_AHEAD,
	R_PAST
};

struct out {
	char *p;
	size_t len, cap;
};

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (o->len + 1 >= o->cap)
		return;
	va_start(ap, fmt);
	k = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (k > 0)
		o->len += (size_t)k < o->cap - o->len ? (size_t)k
						      : o->cap - o->len - 1;
}

/* Is rank in the comma-separated list ("" or NULL: unknown, yes)? */
static int member_of(const char *list, int64_t rank)
{
	const char *s = list;
	char *end;

	if (!s || !*s)
		return 1;
	while (*s) {
		long long r = strtoll(s, &end, 10);

		if (end == s)
			return 0;
		if (r == rank)
			return 1;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return 0;
	}
	return 0;
}

static const struct hv_call *on_group(const struct hv_rank *r, const char *pg)
{
	for (size_t i = 0; i < r->nlast && i < HV_GROUPS_MAX; i++)
		if (!strcmp(r->last[i].pg, pg))
			return &r->last[i];
	return NULL;
}

/* Is a the same call as b, or a later one (by torch's numbers where
 * both have them)? */
static int same_call(const struct hv_call *a, const struct hv_call *b)
{
	if (a->pg_seq && b->pg_seq)
		return a->pg_seq == b->pg_seq;
	return a->seq == b->seq;
}

static int same_or_later(const struct hv_call *a, const struct hv_call *b)
{
	if (a->pg_seq && b->pg_seq)
		return a->pg_seq >= b->pg_seq;
	return a->seq >= b->seq;
}

static int waits_in(const struct hv_rank *r, const struct hv_call *f)
{
	const struct hv_call *c = r->answered ? on_group(r, f->pg) : NULL;

	return c && c->running && same_call(c, f) && !strcmp(c->op, f->op);
}

/* The call most ranks wait in (ties: the longest wait); NULL: none. */
static const struct hv_call *focus(const struct hv_rank *ranks, size_t n)
{
	const struct hv_call *best = NULL;
	size_t best_n = 0;

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; ranks[i].answered && j < ranks[i].nlast &&
				   j < HV_GROUPS_MAX;
		     j++) {
			const struct hv_call *c = &ranks[i].last[j];
			size_t k = 0;

			if (!c->running)
				continue;
			for (size_t m = 0; m < n; m++)
				k += waits_in(&ranks[m], c);
			if (k > best_n ||
			    (k == best_n && best && c->waited > best->waited)) {
				best = c;
				best_n = k;
			}
		}
	}
	return best;
}

static enum role role_of(const struct hv_rank *r, const struct hv_call *f)
{
	const struct hv_call *c;

	if (!r->answered)
		return R_MISSING;
	if (waits_in(r, f))
		return R_WAITER;
	c = on_group(r, f->pg);
	if (c && c->running && same_call(c, f))
		return R_MISMATCH;
	if (c && c->failed && same_or_later(c, f))
		return R_FAILED;
	if (c && c->running)
		return R_ELSEWHERE;
	if (c && same_or_later(c, f))
		return R_PAST;
	/* Behind by its records; torch's own count says whether it went
	 * on through calls made in C++. */
	if (c && f->pg_seq && c->torch_last >= f->pg_seq)
		return R_AHEAD;
	return R_BEHIND;
}

/* "rank 3" / "ranks 0-2" of the ranks of role in members. */
static size_t name_ranks(const struct hv_rank *ranks, const int *roles,
			 size_t n, enum role role, char *out, size_t outlen)
{
	int64_t *v = malloc((n ? n : 1) * sizeof(*v));
	char text[1024];
	size_t k = 0;

	out[0] = '\0';
	if (!v)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (roles[i] == (int)role)
			v[k++] = ranks[i].rank;
	stackgroup_ranges(v, k, text, sizeof(text));
	if (k)
		snprintf(out, outlen, "%s %s", k == 1 ? "rank" : "ranks", text);
	free(v);
	return k;
}

/* The failed call of r that is judged: its call on group pg, or its
 * newest call when pg is NULL; NULL when that one did not fail. */
static const struct hv_call *failed_call(const struct hv_rank *r,
					 const char *pg)
{
	const struct hv_call *c;

	if (!r->answered || !r->nlast)
		return NULL;
	c = pg ? on_group(r, pg) : &r->last[0];
	return c && c->failed ? c : NULL;
}

/* Ranks whose call failed (on group pg, or the newest: failed_call),
 * those of role R_FAILED only when roles is given, grouped by the call
 * and said with the first one's error.  Returns how many. */
static size_t say_failed(const struct hv_rank *ranks, size_t n,
			 const int *roles, const char *pg, struct out *o)
{
	int64_t *v = malloc((n ? n : 1) * sizeof(*v));
	char *done = calloc(n ? n : 1, 1);
	char text[1024];
	size_t total = 0;

	for (size_t i = 0; v && done && i < n; i++) {
		const struct hv_call *c, *d;
		size_t k = 0;

		if (done[i] || (roles && roles[i] != R_FAILED) ||
		    !(c = failed_call(&ranks[i], pg)))
			continue;
		for (size_t m = i; m < n; m++) {
			if (done[m] || (roles && roles[m] != R_FAILED) ||
			    !(d = failed_call(&ranks[m], pg)))
				continue;
			if (!strcmp(d->pg, c->pg) && same_call(d, c) &&
			    !strcmp(d->op, c->op)) {
				v[k++] = ranks[m].rank;
				done[m] = 1;
			}
		}
		stackgroup_ranges(v, k, text, sizeof(text));
		put(o, "%s%s %s: %s #%lld on group %s failed (%s)",
		    o->len ? "; " : "", k == 1 ? "rank" : "ranks", text, c->op,
		    (long long)c->seq, c->pg, c->error);
		total += k;
	}
	free(v);
	free(done);
	return total;
}

static void say_none(const struct hv_rank *ranks, size_t n, struct out *o,
		     struct hv_verdict *v)
{
	size_t any = 0;

	for (size_t i = 0; i < n; i++)
		any += ranks[i].answered && ranks[i].nlast;
	if (say_failed(ranks, n, NULL, NULL, o))
		v->kind = HV_FAILED;
	else if (!any)
		put(o, "no collectives recorded on any rank that answered "
		       "(comm.record off, or no torch.distributed calls "
		       "through its Python API)");
	else
		put(o, "no rank waits in a collective: not a communication "
		       "hang");
	for (size_t i = 0; i < n; i++)
		if (!ranks[i].answered)
			put(o, "; rank %lld did not answer (%s)",
			    (long long)ranks[i].rank,
			    ranks[i].why ? ranks[i].why : "?");
}

/* The members not waiting in f, in the order that explains most first:
 * missing, failed, behind, elsewhere, ahead, past. */
static void say_others(const struct hv_rank *ranks, size_t n, const int *roles,
		       const struct hv_call *f, struct out *o)
{
	for (size_t i = 0; i < n; i++)
		if (roles[i] == R_MISSING)
			put(o, "; rank %lld did not answer (%s)",
			    (long long)ranks[i].rank,
			    ranks[i].why ? ranks[i].why : "?");
	say_failed(ranks, n, roles, f->pg, o);
	for (size_t i = 0; i < n; i++) {
		const struct hv_rank *r = &ranks[i];
		const struct hv_call *c = on_group(r, f->pg);

		switch (roles[i]) {
		case R_BEHIND:
			put(o, "; rank %lld has not reached it",
			    (long long)r->rank);
			if (r->where)
				put(o, " (it is in %s)", r->where);
			break;
		case R_AHEAD:
			put(o, "; rank %lld skipped it and went on: torch has "
			       "started call %lld on group %s there (the "
			       "waiters' call is its %lld)",
			    (long long)r->rank, (long long)c->torch_last, c->pg,
			    (long long)f->pg_seq);
			if (c->torch_last_op[0])
				put(o, ", which torch's Flight Recorder names %s",
				    c->torch_last_op);
			put(o, ", after %s #%lld, through no call of "
			       "torch.distributed's Python API (one made in "
			       "C++, such as DDP's broadcast of its buffers)",
			    c->op, (long long)c->seq);
			if (r->where)
				put(o, " (it is in %s)", r->where);
			break;
		case R_ELSEWHERE:
			put(o, "; rank %lld is in %s #%lld on group %s",
			    (long long)r->rank, c->op, (long long)c->seq,
			    c->pg);
			break;
		case R_PAST:
			put(o, "; rank %lld finished %s #%lld and went on",
			    (long long)r->rank, c->op, (long long)c->seq);
			if (r->where)
				put(o, " (it is in %s)", r->where);
			break;
		default:
			break;
		}
	}
}

int hangverdict(const struct hv_rank *ranks, size_t n, struct hv_verdict *v)
{
	struct out o = {v->text, 0, sizeof(v->text)};
	const struct hv_call *f;
	int *roles;
	char waiters[1100];
	size_t count[R_PAST + 1] = {0};

	v->text[0] = '\0';
	v->kind = HV_NONE;
	f = focus(ranks, n);
	if (!f) {
		say_none(ranks, n, &o, v);
		return 0;
	}
	roles = calloc(n ? n : 1, sizeof(*roles));
	if (!roles) {
		put(&o, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		roles[i] = member_of(f->pg_ranks, ranks[i].rank)
				   ? (int)role_of(&ranks[i], f)
				   : -1;
		if (roles[i] >= 0)
			count[roles[i]]++;
	}
	name_ranks(ranks, roles, n, R_WAITER, waiters, sizeof(waiters));
	if (count[R_MISMATCH]) {
		v->kind = HV_MISMATCH;
		for (size_t i = 0; i < n; i++) {
			const struct hv_call *c;

			if (roles[i] != R_MISMATCH)
				continue;
			c = on_group(&ranks[i], f->pg);
			put(&o, "%srank %lld is in %s #%lld on group %s",
			    o.len ? "; " : "", (long long)ranks[i].rank, c->op,
			    (long long)c->seq, c->pg);
		}
		put(&o, " while %s %s in %s #%lld: mismatched collectives",
		    waiters, count[R_WAITER] == 1 ? "is" : "are", f->op,
		    (long long)f->seq);
	} else {
		put(&o, "%s %s in %s #%lld on group %s (for %.1f s)", waiters,
		    count[R_WAITER] == 1 ? "waits" : "wait", f->op,
		    (long long)f->seq, f->pg, f->waited);
	}
	say_others(ranks, n, roles, f, &o);
	if (v->kind == HV_NONE) {
		if (count[R_AHEAD])
			v->kind = HV_AHEAD;
		else if (count[R_MISSING])
			v->kind = HV_MISSING;
		else if (count[R_BEHIND])
			v->kind = HV_BEHIND;
		else if (count[R_FAILED])
			v->kind = HV_FAILED;
		else if (count[R_ELSEWHERE] || count[R_PAST])
			v->kind = HV_OTHER;
		else
			v->kind = HV_ALL_WAIT;
	}
	if (v->kind == HV_ALL_WAIT)
		put(&o,
		    "; every member of group %s waits in it: the "
		    "collective itself does not complete (the transport, "
		    "or a member outside these nodes)",
		    f->pg);
	free(roles);
	return 0;
}
