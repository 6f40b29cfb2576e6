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

/* ---- speedscope ------------------------------------------------------- */

static void speedscope_frame(struct fg_buf *b, const struct fg_name *n)
{
	fg_puts(b, "{\"name\":");
	if (n->kind == FG_PY || n->kind == FG_NATIVE) {
		fg_json_str(b, n->func);
		if (n->file && *n->file) {
			fg_puts(b, ",\"file\":");
			fg_json_str(b, n->file);
		}
		if (n->line >= 0)
			fg_printf(b, ",\"line\":%d", n->line);
	} else {
		fg_json_str(b, n->label);
	}
	fg_puts(b, "}");
}

int fg_render_speedscope(struct flamegraph *fg, struct fg_buf *b)
{
	struct fg_buf prof = {0};
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
		fg_puts(&prof, nprof ? ",{" : "{");
		fg_puts(&prof, "\"type\":\"sampled\",\"name\":");
		fg_json_str(&prof, label);
		fg_puts(&prof, ",\"unit\":\"seconds\",\"samples\":[");
		/* Runs of the same stack and state are one weighted
		 * sample. */
		while (i < fg->nsamples && fg->samples[order[i]].thread == th) {
			const struct fg_sample *s = &fg->samples[order[i]];
			size_t n = fg_path(fg, s);

			fg_puts(&prof, nsamp++ ? ",[" : "[");
			for (size_t k = 0; k < n; k++)
				fg_printf(&prof, k ? ",%u" : "%u", fg->path[k]);
			fg_puts(&prof, "]");
			do
				i++;
			while (i < fg->nsamples &&
			       fg->samples[order[i]].thread == th &&
			       fg->samples[order[i]].stack == s->stack &&
			       fg->samples[order[i]].state == s->state);
		}
		fg_puts(&prof, "],\"weights\":[");
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
			fg_printf(&prof, w ? ",%.9g" : "%.9g", run);
			total += run;
		}
		fg_printf(&prof, "],\"startValue\":0,\"endValue\":%.9g}",
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
	fg_puts(b, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\"exporter\":"
		   "\"probing\",\"name\":");
	fg_json_str(b, fg->o->title ? fg->o->title : "probing profile");
	fg_printf(b, ",\"activeProfileIndex\":%zu,\"shared\":{\"frames\":[",
		  best);
	for (size_t k = 0; k < fg->nnames; k++) {
		if (k)
			fg_puts(b, ",");
		speedscope_frame(b, &fg->names[k]);
	}
	fg_puts(b, "]},\"profiles\":[");
	if (prof.p)
		fg_putn(b, prof.p, prof.len);
	fg_puts(b, "]}\n");
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
	default:
		return "other";
	}
}

struct timeline {
	struct flamegraph *fg;
	struct fg_buf *b;
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

		fg_puts(tl->b, ",\n{\"ph\":\"X\",\"name\":");
		fg_json_str(tl->b, n->label);
		fg_printf(tl->b,
			  ",\"cat\":\"%s\",\"pid\":%ld,\"tid\":%ld,"
			  "\"ts\":%lld.%03lld,\"dur\":%lld.%03lld}",
			  category(n->kind), tl->pid, tl->tid, ts / 1000,
			  ts % 1000, dur / 1000, dur % 1000);
		tl->nevents++;
	}
}

static void metadata(struct fg_buf *b, const char *what, long pid, long tid,
		     const char *name)
{
	fg_printf(b, ",\n{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%ld,"
		     "\"tid\":%ld,\"args\":{\"name\":",
		  what, pid, tid);
	fg_json_str(b, name);
	fg_puts(b, "}}");
}

int fg_render_chrome(struct flamegraph *fg, struct fg_buf *b)
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
	fg_printf(b, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":"
		     "\"probing\",\"startTime\":%.6f,\"interval\":%.9g},"
		     "\"traceEvents\":[\n{\"ph\":\"M\",\"name\":"
		     "\"process_name\",\"pid\":%ld,\"tid\":0,\"args\":"
		     "{\"name\":",
		  tl.t0, interval, tl.pid);
	snprintf(label, sizeof(label), "%s",
		 fg->o->title ? fg->o->title : "python");
	fg_json_str(b, label);
	fg_puts(b, "}}");
	while (i < fg->nsamples && !b->err && !fg->err) {
		const struct fg_thread *t = &fg->threads[fg->samples[order[i]].thread];
		uint32_t th = fg->samples[order[i]].thread;
		double last = 0;

		tl.tid = t->native > 0 ? t->native
				       : (long)(t->id & 0x7fffffff);
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
	fg_puts(b, "\n]}\n");
	free(order);
	free(tl.open);
	free(tl.start);
	return 0;
}
