/*
 * flamegraph_json: speedscope's file format and Chrome trace events.
 * Both walk the samples of each thread in time order.
 */
#include "flamegraph_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

static int cmp_thread_time(const void *a, const void *b, void *arg)
{
	const struct flamegraph *fg = arg;
	const struct fg_sample *x = &fg->samples[*(const uint32_t *)a];
	const struct fg_sample *y = &fg->samples[*(const uint32_t *)b];

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return 0;
}

/* Sample indexes sorted by (thread, time); NULL when out of memory. */
static uint32_t *time_order(struct flamegraph *fg)
{
	uint32_t *idx = malloc((fg->nsamples ? fg->nsamples : 1) *
			       sizeof(*idx));

	if (!idx)
		return NULL;
	for (size_t i = 0; i < fg->nsamples; i++)
		idx[i] = (uint32_t)i;
	qsort_r(idx, fg->nsamples, sizeof(*idx), cmp_thread_time, fg);
	return idx;
}

static double first_ts(const struct flamegraph *fg)
{
	double t0 = INFINITY;

	for (size_t i = 0; i < fg->nsamples; i++)
		if (fg->samples[i].ts < t0)
			t0 = fg->samples[i].ts;
	return fg->nsamples ? t0 : 0;
}

static void thread_label(const struct fg_thread *t, char *out, size_t len)
{
	if (t->name && t->native > 0)
		snprintf(out, len, "%s (thread %ld)", t->name, t->native);
	else if (t->name)
		snprintf(out, len, "%s", t->name);
	else
		snprintf(out, len, "thread %llu", (unsigned long long)t->id);
}

/* A thread's track in a Chrome trace: its native id, else (none known)
 * the low 31 bits of its thread_id. */
static long track_of(const struct fg_thread *t)
{
	return t->native > 0 ? t->native : (long)(t->id & 0x7fffffff);
}

/* ---- speedscope ------------------------------------------------------- */

static void speedscope_frame(struct outbuf *b, const struct fg_name *n)
{
	outbuf_puts(b, "{\"name\":");
	if (n->kind == FG_PY || n->kind == FG_NATIVE) {
		outbuf_json_str(b, n->func);
		if (n->file && *n->file) {
			outbuf_puts(b, ",\"file\":");
			outbuf_json_str(b, n->file);
		}
		if (n->line >= 0)
			outbuf_printf(b, ",\"line\":%d", n->line);
	} else {
		outbuf_json_str(b, n->label);
	}
	outbuf_puts(b, "}");
}

int fg_render_speedscope(struct flamegraph *fg, struct outbuf *b)
{
	struct outbuf prof = {.max = FLAMEGRAPH_OUTPUT_MAX};
	uint32_t *order = time_order(fg);
	double interval = fg->o->interval > 0 ? fg->o->interval : 0.01;
	size_t i = 0, nprof = 0, best = 0, best_n = 0;

	if (!order)
		return -ENOMEM;
	/* The profiles first (they name the frames), into their own
	 * buffer; then the document around them. */
	while (i < fg->nsamples && !prof.err && !fg->err) {
		uint32_t th = fg->samples[order[i]].thread;
		char label[512];
		size_t start = i, nsamp = 0;
		double total = 0;

		thread_label(&fg->threads[th], label, sizeof(label));
		outbuf_puts(&prof, nprof ? ",{" : "{");
		outbuf_puts(&prof, "\"type\":\"sampled\",\"name\":");
		outbuf_json_str(&prof, label);
		outbuf_puts(&prof, ",\"unit\":\"seconds\",\"samples\":[");
		/* Runs of the same stack and state are one weighted
		 * sample. */
		while (i < fg->nsamples && fg->samples[order[i]].thread == th) {
			const struct fg_sample *s = &fg->samples[order[i]];
			size_t n = fg_path(fg, s);

			outbuf_puts(&prof, nsamp++ ? ",[" : "[");
			for (size_t k = 0; k < n; k++)
				outbuf_printf(&prof, k ? ",%u" : "%u", fg->path[k]);
			outbuf_puts(&prof, "]");
			do
				i++;
			while (i < fg->nsamples &&
			       fg->samples[order[i]].thread == th &&
			       fg->samples[order[i]].stack == s->stack &&
			       fg->samples[order[i]].state == s->state);
		}
		outbuf_puts(&prof, "],\"weights\":[");
		for (size_t j = start, w = 0; j < i; w++) {
			const struct fg_sample *s = &fg->samples[order[j]];
			double run = 0;

			while (j < i && fg->samples[order[j]].stack == s->stack &&
			       fg->samples[order[j]].state == s->state) {
				run += fg->o->cpu
					       ? fg->samples[order[j]].weight / 1e6
					       : interval;
				j++;
			}
			outbuf_printf(&prof, w ? ",%.9g" : "%.9g", run);
			total += run;
		}
		outbuf_printf(&prof, "],\"startValue\":0,\"endValue\":%.9g}",
			  total);
		if (i - start > best_n) {
			best_n = i - start;
			best = nprof;
		}
		nprof++;
	}
	free(order);
	if (prof.err || fg->err) {
		free(prof.p);
		return prof.err ? prof.err : fg->err;
	}
	outbuf_puts(b, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\"exporter\":"
		   "\"probing\",\"name\":");
	outbuf_json_str(b, fg->o->title ? fg->o->title : "probing profile");
	outbuf_printf(b, ",\"activeProfileIndex\":%zu,\"shared\":{\"frames\":[",
		  best);
	for (size_t k = 0; k < fg->nnames; k++) {
		if (k)
			outbuf_puts(b, ",");
		speedscope_frame(b, &fg->names[k]);
	}
	outbuf_puts(b, "]},\"profiles\":[");
	if (prof.p)
		outbuf_putn(b, prof.p, prof.len);
	outbuf_puts(b, "]}\n");
	free(prof.p);
	return 0;
}

/* ---- Chrome trace events ---------------------------------------------- */

static const char *category(enum fg_kind k)
{
	switch (k) {
	case FG_PY:
		return "python";
	case FG_NATIVE:
		return "native";
	case FG_STATE:
		return "state";
	case FG_TASK:
		return "task";
	default:
		return "other";
	}
}

struct timeline {
	struct flamegraph *fg;
	struct outbuf *b;
	long pid, tid;
	double t0;
	uint32_t *open; /* names, root first */
	double *start;
	size_t nopen;
	size_t nevents;
};

/* Closes the open frames deeper than keep at time t (innermost first). */
static void close_to(struct timeline *tl, size_t keep, double t)
{
	while (tl->nopen > keep) {
		size_t d = --tl->nopen;
		const struct fg_name *n = &tl->fg->names[tl->open[d]];
		/* In whole nanoseconds, so that a frame ends exactly where
		 * the next one starts (no rounding overlap). */
		long long ts = llround((tl->start[d] - tl->t0) * 1e9);
		long long end = llround((t - tl->t0) * 1e9);
		long long dur = end > ts ? end - ts : 0;

		outbuf_puts(tl->b, ",\n{\"ph\":\"X\",\"name\":");
		outbuf_json_str(tl->b, n->label);
		outbuf_printf(tl->b,
			  ",\"cat\":\"%s\",\"pid\":%ld,\"tid\":%ld,"
			  "\"ts\":%lld.%03lld,\"dur\":%lld.%03lld}",
			  category(n->kind), tl->pid, tl->tid, ts / 1000,
			  ts % 1000, dur / 1000, dur % 1000);
		tl->nevents++;
	}
}

static void metadata(struct outbuf *b, const char *what, long pid, long tid,
		     const char *name)
{
	outbuf_printf(b, ",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%ld,"
		     "\"tid\":%ld,\"args\":{\"name\":",
		  what, pid, tid);
	outbuf_json_str(b, name);
	outbuf_puts(b, "}}");
}

int fg_render_chrome(struct flamegraph *fg, struct outbuf *b)
{
	struct timeline tl = {.fg = fg, .b = b};
	double interval = fg->o->interval > 0 ? fg->o->interval : 0.01;
	uint32_t *order = time_order(fg);
	char label[512];
	size_t i = 0;

	tl.open = malloc((FLAMEGRAPH_DEPTH_MAX + 4) * sizeof(*tl.open));
	tl.start = malloc((FLAMEGRAPH_DEPTH_MAX + 4) * sizeof(*tl.start));
	if (!order || !tl.open || !tl.start) {
		free(order);
		free(tl.open);
		free(tl.start);
		return -ENOMEM;
	}
	tl.pid = fg->o->pid > 0 ? fg->o->pid : 1;
	tl.t0 = first_ts(fg);
	outbuf_printf(b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":"
		     "\"probing\",\"startTime\":%.6f,\"interval\":%.9g},"
		     "\"traceEvents\":[\n{\"ph\":\"M\",\"name\":"
		     "\"process_name\",\"pid\":%ld,\"tid\":0,\"args\":"
		     "{\"name\":",
		  tl.t0, interval, tl.pid);
	snprintf(label, sizeof(label), "%s",
		 fg->o->title ? fg->o->title : "python");
	outbuf_json_str(b, label);
	outbuf_puts(b, "}}");
	while (i < fg->nsamples && !b->err && !fg->err) {
		const struct fg_thread *t = &fg->threads[fg->samples[order[i]].thread];
		uint32_t th = fg->samples[order[i]].thread;
		double last = 0;

		tl.tid = track_of(t);
		thread_label(t, label, sizeof(label));
		metadata(b, "thread_name", tl.pid, tl.tid,
			 t->name ? t->name : label);
		tl.nopen = 0;
		for (; i < fg->nsamples && fg->samples[order[i]].thread == th;
		     i++) {
			const struct fg_sample *s = &fg->samples[order[i]];
			size_t n, k = 0;

			/* A gap (the thread was not sampled): what was
			 * open ends one interval after the last sample. */
			if (tl.nopen && s->ts - last > 2.5 * interval)
				close_to(&tl, 0, last + interval);
			n = fg_path(fg, s);
			while (k < n && k < tl.nopen && tl.open[k] == fg->path[k])
				k++;
			close_to(&tl, k, s->ts);
			for (; k < n; k++) {
				tl.open[tl.nopen] = fg->path[k];
				tl.start[tl.nopen++] = s->ts;
			}
			last = s->ts;
		}
		close_to(&tl, 0, last + interval);
	}
	outbuf_puts(b, "\n]}\n");
	free(order);
	free(tl.open);
	free(tl.start);
	return 0;
}

/* ---- Chrome trace instant events (probing/trace) ---------------------- */

/* A sample's stack in its event's args, outermost first as folded stacks
 * are; past this many bytes its outermost frames give way to "...". */
#define INSTANT_STACK_MAX 4096

static const char *const state_names[] = {
	[FLAMEGRAPH_RUNNING] = "running",
	[FLAMEGRAPH_GIL_WAIT] = "gil_wait",
	[FLAMEGRAPH_IDLE] = "idle",
};

/* same: the thread's sample before had this stack (its events then say
 * no stack again: a thread that waits in one place for seconds is
 * hundreds of samples alike). */
static void instant(struct flamegraph *fg, struct outbuf *b,
		    const struct fg_sample *s, int same)
{
	size_t n = fg_path(fg, s), first = 0, used = 0;

	for (size_t k = n; k-- > 0;) {
		size_t l = strlen(fg->names[fg->path[k]].label) + 1;

		if (used + l > INSTANT_STACK_MAX) {
			first = k + 1;
			break;
		}
		used += l;
	}
	outbuf_puts(b, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"sample\","
		       "\"name\":");
	outbuf_json_str(b, n ? fg->names[fg->path[n - 1]].label : "(empty)");
	outbuf_printf(b,
		      ",\"pid\":%ld,\"tid\":%ld,\"ts\":%.3f,\"args\":{"
		      "\"state\":\"%s\"",
		      fg->o->pid > 0 ? fg->o->pid : 1,
		      track_of(&fg->threads[s->thread]),
		      (s->ts - fg->o->origin) * 1e6,
		      s->state <= FLAMEGRAPH_IDLE ? state_names[s->state] : "?");
	if (same) {
		outbuf_puts(b, "}}");
		return;
	}
	outbuf_printf(b, ",\"stack\":\"%s", first ? "...;" : "");
	for (size_t k = first; k < n; k++) {
		if (k > first)
			outbuf_putn(b, ";", 1);
		outbuf_json_chars(b, fg->names[fg->path[k]].label);
	}
	outbuf_puts(b, "\"}}");
}

int fg_render_instants(struct flamegraph *fg, struct outbuf *b)
{
	uint32_t *order = time_order(fg);

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < fg->nsamples && !b->err && !fg->err; i++) {
		const struct fg_sample *s = &fg->samples[order[i]];
		const struct fg_sample *p =
			i ? &fg->samples[order[i - 1]] : NULL;

		instant(fg, b, s,
			p && p->thread == s->thread && p->stack == s->stack &&
				p->state == s->state);
	}
	free(order);
	return 0;
}
