/*
 * tracereq: see tracereq.h.
 */
#include "tracereq.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dap_msg.h"
#include "errbuf.h"
#include "flamegraph.h"
#include "outbuf.h"
#include "sampler_intern.h"
#include "store.h"

/* A track's span, in Unix seconds; end as shown (cut to nest). */
struct span {
	double start, end;
	long tid;
	size_t order; /* insertion: ties keep it */
	const char *cat;
	char *name, *args; /* heap; args a JSON object's text */
};

struct thread {
	int64_t id;
	long native;
	char *name;
};

/* A traced step: from its start (the end of the optimizer step before
 * it) to the end of its last stage, on the optimizer's thread. */
struct step {
	int64_t n;
	double base, end;
	long tid;
	int has_opt;
};

struct trace {
	struct store *st;
	double since, until;
	long pid;
	struct outbuf b;
	struct span *spans;
	size_t nspans, capspans;
	struct thread *threads;
	size_t nthreads, capthreads;
	long *tracks; /* tids written to, for their names */
	size_t ntracks, captracks;
	struct step *steps;
	size_t nsteps, capsteps;
	struct sampler_map step_map; /* step + 1 -> index */
	size_t nevents, nsamples, ncounters, nasync;
	cJSON *notes;
	int rc;
	char *err;
	size_t errlen;
};

/* ---- helpers ---------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? *cap * 2 : 64;
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*arr, c * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static void fail(struct trace *t, int rc, const char *msg)
{
	if (t->rc)
		return;
	t->rc = rc;
	errbuf_set(t->err, t->errlen, "%s", msg);
}

/* ts as whole nanoseconds from the window's start, in [0, 10^18]: a time
 * before the window (a clock a few microseconds apart) is its start, one
 * not finite too.  Written as microseconds with three decimals. */
static long long ns_of(const struct trace *t, double ts)
{
	double ns = (ts - t->since) * 1e9;

	if (!(ns > 0))
		return 0;
	return ns < 1e18 ? llround(ns) : 1000000000000000000LL;
}

static void put_us(struct outbuf *b, const char *key, long long ns)
{
	outbuf_printf(b, ",\"%s\":%lld.%03lld", key, ns / 1000, ns % 1000);
}

/* A number for args: null when not finite. */
static void put_num(struct outbuf *b, const char *key, double v)
{
	if (isfinite(v))
		outbuf_printf(b, ",\"%s\":%.6f", key, v);
	else
		outbuf_printf(b, ",\"%s\":null", key);
}

/* A source left out: said in notes. */
static void note(struct trace *t, const char *what, const char *why)
{
	char line[400];

	snprintf(line, sizeof(line), "%s: %s", what, why);
	cJSON_AddItemToArray(t->notes, cJSON_CreateString(line));
}

/* A statement over an optional table, the window bound to ?1 and ?2
 * when window; NULL (noted) when it cannot be made: the store has no
 * such table, or not those columns. */
static struct store_stmt *optional(struct trace *t, const char *what,
				   const char *sql, int window)
{
	struct store_stmt *q = NULL;
	char err[300];

	if (store_stmt_new(t->st, sql, &q, err, sizeof(err))) {
		note(t, what, err);
		return NULL;
	}
	if (window) {
		store_stmt_real(q, 1, t->since);
		store_stmt_real(q, 2, t->until);
	}
	return q;
}

static int step_row(struct trace *t, struct store_stmt *q, char *err,
		    size_t errlen)
{
	int rc = store_stmt_step(q, err, errlen);

	if (rc < 0)
		fail(t, rc, err);
	return rc == 1;
}

static void track(struct trace *t, long tid)
{
	for (size_t i = t->ntracks; i-- > 0;)
		if (t->tracks[i] == tid)
			return;
	if (grow((void **)&t->tracks, &t->captracks, t->ntracks,
		 sizeof(*t->tracks))) {
		fail(t, -ENOMEM, "out of memory");
		return;
	}
	t->tracks[t->ntracks++] = tid;
}

/* The track of a thread_id (threading.get_ident()): its native id where
 * profile.threads knows it, else its low 31 bits (as the samples'). */
static long track_of_ident(const struct trace *t, int64_t ident)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].id == ident && t->threads[i].native > 0)
			return t->threads[i].native;
	return (long)(ident & 0x7fffffff);
}

/* Takes name and args (heap; freed on failure). */
static void add_span(struct trace *t, long tid, double start, double end,
		     const char *cat, char *name, char *args)
{
	struct span *s;

	if (t->rc || !name || !args) {
		free(name);
		free(args);
		if (!t->rc)
			fail(t, -ENOMEM, "out of memory");
		return;
	}
	if (t->nspans >= TRACEREQ_SPANS_MAX ||
	    grow((void **)&t->spans, &t->capspans, t->nspans,
		 sizeof(*t->spans))) {
		free(name);
		free(args);
		if (t->nspans >= TRACEREQ_SPANS_MAX) {
			char msg[160];

			snprintf(msg, sizeof(msg),
				 "more than %d spans in the window: take a "
				 "shorter one",
				 TRACEREQ_SPANS_MAX);
			fail(t, -E2BIG, msg);
		} else {
			fail(t, -ENOMEM, "out of memory");
		}
		return;
	}
	s = &t->spans[t->nspans];
	s->start = start;
	s->end = end > start ? end : start;
	s->tid = tid;
	s->order = t->nspans++;
	s->cat = cat;
	s->name = name;
	s->args = args;
}

/* The text a cJSON object prints as, unformatted; NULL when out of
 * memory.  Frees o. */
static char *args_text(cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;

	cJSON_Delete(o);
	return s;
}

static void add_num(cJSON *o, struct store_stmt *q, int col, const char *key,
		    double scale)
{
	if (!store_stmt_col_null(q, col))
		cJSON_AddNumberToObject(o, key,
					store_stmt_col_real(q, col) * scale);
}

static void add_text(cJSON *o, struct store_stmt *q, int col, const char *key)
{
	const char *v = store_stmt_col_text(q, col);
	char text[512];

	if (store_stmt_col_null(q, col) || !v)
		return;
	snprintf(text, sizeof(text), "%s", v);
	outbuf_utf8_scrub(text); /* cJSON writes any byte */
	cJSON_AddStringToObject(o, key, text);
}

/* ---- threads ---------------------------------------------------------- */

static void load_threads(struct trace *t)
{
	struct store_stmt *q = optional(
		t, "profile.threads",
		"SELECT thread_id, native_id, name FROM profile.threads WHERE "
		"last_ts >= ?1 AND first_ts <= ?2",
		1);
	char err[300];

	while (q && !t->rc && step_row(t, q, err, sizeof(err))) {
		const char *name = store_stmt_col_text(q, 2);
		struct thread *th;

		if (grow((void **)&t->threads, &t->capthreads, t->nthreads,
			 sizeof(*t->threads))) {
			fail(t, -ENOMEM, "out of memory");
			break;
		}
		th = &t->threads[t->nthreads++];
		th->id = store_stmt_col_int(q, 0);
		th->native = (long)store_stmt_col_int(q, 1);
		th->name = strdup(name ? name : "");
		if (!th->name)
			fail(t, -ENOMEM, "out of memory");
	}
	store_stmt_free(q);
}

/* ---- torch: module stages, optimizer steps, traced steps -------------- */

static struct step *step_of(struct trace *t, int64_t n)
{
	uint32_t i;

	if (!sampler_map_get(&t->step_map, (uint64_t)n + 1, &i))
		return &t->steps[i];
	if (grow((void **)&t->steps, &t->capsteps, t->nsteps,
		 sizeof(*t->steps)) ||
	    sampler_map_put(&t->step_map, (uint64_t)n + 1,
			    (uint32_t)t->nsteps)) {
		fail(t, -ENOMEM, "out of memory");
		return NULL;
	}
	t->steps[t->nsteps] = (struct step){.n = n, .base = -1};
	return &t->steps[t->nsteps++];
}

static int cmp_step(const void *a, const void *b)
{
	const struct step *x = a, *y = b;

	return x->base < y->base ? -1 : x->base > y->base;
}

/* A step ends where the next one on its thread begins: the two are
 * placed apart (each from its own first row), and the clock shift read
 * between them may put the next one's start a few microseconds before
 * this one's end; nested, the next would be cut to a sliver. */
static void chain_steps(struct trace *t)
{
	if (t->nsteps < 2)
		return;
	qsort(t->steps, t->nsteps, sizeof(*t->steps), cmp_step);
	for (size_t i = 0; i + 1 < t->nsteps; i++)
		for (size_t j = i + 1; j < t->nsteps && j < i + 8; j++) {
			struct step *a = &t->steps[i], *b = &t->steps[j];

			if (a->tid != b->tid)
				continue;
			if (a->end > b->base && a->end - b->base < 1e-3)
				a->end = b->base;
			break;
		}
}

/* One row: step, module, stage, ts, cpu_duration, duration, clock,
 * native_id, time_offset, allocated, max_allocated, seq. */
static void torch_row(struct trace *t, struct store_stmt *q)
{
	const char *module = store_stmt_col_text(q, 1);
	const char *stage = store_stmt_col_text(q, 2);
	const char *clock = store_stmt_col_text(q, 6);
	int64_t n = store_stmt_col_int(q, 0);
	double ts = store_stmt_col_real(q, 3);
	double cpu = store_stmt_col_real(q, 4);
	double offset = store_stmt_col_real(q, 8);
	long tid = store_stmt_col_null(q, 7) ? t->pid
					     : (long)store_stmt_col_int(q, 7);
	struct step *s = step_of(t, n);
	cJSON *a = cJSON_CreateObject();
	char name[300];

	if (!s) {
		cJSON_Delete(a);
		return;
	}
	/* Within a step every stage is placed from the step's start by its
	 * offset (one clock): rows stored apart may carry clock shifts a
	 * few microseconds apart, which would unnest them. */
	if (s->base < 0)
		s->base = ts - offset;
	ts = s->base + offset;
	if (ts + cpu > s->end)
		s->end = ts + cpu;
	if (stage && !strcmp(stage, "step")) {
		s->tid = tid;
		s->has_opt = 1;
	} else if (!s->has_opt && !s->tid) {
		s->tid = tid;
	}
	snprintf(name, sizeof(name), "%s %s", module ? module : "?",
		 stage ? stage : "?");
	if (a) {
		cJSON_AddNumberToObject(a, "step", (double)n);
		add_num(a, q, 11, "seq", 1);
		add_text(a, q, 1, "module");
		add_text(a, q, 2, "stage");
		cJSON_AddNumberToObject(a, "ms", cpu * 1e3);
		if (clock && !strcmp(clock, "cuda"))
			add_num(a, q, 5, "gpu_ms", 1e3);
		if (store_stmt_col_real(q, 10) > 0) {
			add_num(a, q, 9, "allocated_mb", 1);
			add_num(a, q, 10, "max_allocated_mb", 1);
		}
	}
	add_span(t, tid, ts, ts + cpu, "torch", strdup(name), args_text(a));
}

static void load_torch(struct trace *t)
{
	static const char sql_fmt[] =
		"SELECT step, module, stage, ts, cpu_duration, duration, "
		"clock, %s, time_offset, allocated, max_allocated, seq FROM "
		"python.torch_trace WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts";
	char sql[sizeof(sql_fmt) + 16], err[300];
	struct store_stmt *q = NULL;

	/* native_id came later: a recording of before has none (the
	 * stages then go on the main thread's track). */
	snprintf(sql, sizeof(sql), sql_fmt, "native_id");
	if (store_stmt_new(t->st, sql, &q, err, sizeof(err))) {
		snprintf(sql, sizeof(sql), sql_fmt, "NULL");
		q = optional(t, "python.torch_trace", sql, 1);
		if (q)
			note(t, "python.torch_trace",
			     "recorded without threads: its stages are on the "
			     "main thread's track");
	} else {
		store_stmt_real(q, 1, t->since);
		store_stmt_real(q, 2, t->until);
	}
	while (q && !t->rc && step_row(t, q, err, sizeof(err)))
		torch_row(t, q);
	store_stmt_free(q);
	chain_steps(t);
	for (size_t i = 0; i < t->nsteps && !t->rc; i++) {
		const struct step *s = &t->steps[i];
		cJSON *a = cJSON_CreateObject();
		double start = s->base < t->since ? t->since : s->base;
		char name[48];

		snprintf(name, sizeof(name), "step %lld", (long long)s->n);
		if (a) {
			cJSON_AddNumberToObject(a, "step", (double)s->n);
			cJSON_AddNumberToObject(a, "ms",
						(s->end - s->base) * 1e3);
			if (s->base < t->since)
				cJSON_AddBoolToObject(a, "began_before_window",
						      1);
		}
		add_span(t, s->tid ? s->tid : t->pid, start, s->end, "step",
			 strdup(name), args_text(a));
	}
}

/* ---- collectives ------------------------------------------------------ */

/* Columns: id, ts, op, pg, seq, pg_seq, shape, dtype, bytes, async, peer,
 * state, duration, thread_id, error, native_id. */
static cJSON *comm_args(struct store_stmt *q)
{
	cJSON *a = cJSON_CreateObject();

	if (!a)
		return NULL;
	add_text(a, q, 3, "pg");
	add_num(a, q, 4, "seq", 1);
	add_num(a, q, 5, "pg_seq", 1);
	add_text(a, q, 6, "shape");
	add_text(a, q, 7, "dtype");
	add_num(a, q, 8, "bytes", 1);
	add_num(a, q, 10, "peer", 1);
	add_text(a, q, 11, "state");
	add_num(a, q, 12, "ms", 1e3);
	add_text(a, q, 14, "error");
	return a;
}

static void comm_row(struct trace *t, struct store_stmt *q)
{
	const char *op = store_stmt_col_text(q, 2);
	const char *state = store_stmt_col_text(q, 11);
	double ts = store_stmt_col_real(q, 1), end = ts;
	long tid = store_stmt_col_null(q, 15)
			   ? track_of_ident(t, store_stmt_col_int(q, 13))
			   : (long)store_stmt_col_int(q, 15);
	cJSON *a = comm_args(q);
	char *args;

	/* Running: to the window's end; ended unobserved: no length. */
	if (!store_stmt_col_null(q, 12))
		end = ts + store_stmt_col_real(q, 12);
	else if (state && !strcmp(state, "running"))
		end = t->until;
	if (!store_stmt_col_int(q, 9)) {
		add_span(t, tid, ts, end, "collective",
			 strdup(op ? op : "?"), args_text(a));
		return;
	}
	/* Asynchronous: they overlap each other and what the thread does
	 * meanwhile, so not a span of its track but an async pair. */
	args = args_text(a);
	track(t, tid);
	outbuf_puts(&t->b, ",\n{\"ph\":\"b\",\"cat\":\"collective\",\"name\":");
	outbuf_json_str(&t->b, op ? op : "?");
	outbuf_printf(&t->b,
		      ",\"id2\":{\"local\":\"comm%lld\"},\"pid\":%ld,"
		      "\"tid\":%ld",
		      (long long)store_stmt_col_int(q, 0), t->pid, tid);
	put_us(&t->b, "ts", ns_of(t, ts));
	outbuf_printf(&t->b, ",\"args\":%s}", args ? args : "{}");
	outbuf_puts(&t->b, ",\n{\"ph\":\"e\",\"cat\":\"collective\",\"name\":");
	outbuf_json_str(&t->b, op ? op : "?");
	outbuf_printf(&t->b,
		      ",\"id2\":{\"local\":\"comm%lld\"},\"pid\":%ld,"
		      "\"tid\":%ld",
		      (long long)store_stmt_col_int(q, 0), t->pid, tid);
	put_us(&t->b, "ts",
	       ns_of(t, ts) > ns_of(t, end) ? ns_of(t, ts) : ns_of(t, end));
	outbuf_puts(&t->b, "}");
	free(args);
	t->nasync++;
	t->nevents += 2;
}

static void load_comm(struct trace *t)
{
	static const char sql_fmt[] =
		"SELECT id, ts, op, pg, seq, pg_seq, shape, dtype, bytes, "
		"async, peer, state, duration, thread_id, error, %s FROM "
		"python.comm_collective WHERE ts >= ?1 AND ts <= ?2 ORDER BY "
		"id";
	char sql[sizeof(sql_fmt) + 16], err[300];
	struct store_stmt *q = NULL;

	/* native_id came later: a recording of before has none (the calls
	 * go on their thread's track where the samples knew it). */
	snprintf(sql, sizeof(sql), sql_fmt, "native_id");
	if (store_stmt_new(t->st, sql, &q, err, sizeof(err))) {
		snprintf(sql, sizeof(sql), sql_fmt, "NULL");
		q = optional(t, "python.comm_collective", sql, 1);
	} else {
		store_stmt_real(q, 1, t->since);
		store_stmt_real(q, 2, t->until);
	}

	while (q && !t->rc && step_row(t, q, err, sizeof(err)))
		comm_row(t, q);
	store_stmt_free(q);
}

/* The program's markers (app.spans, app.steps: agent/app/app.h), on their
 * thread's track.  A recording made before they existed has neither
 * table: nothing to say then. */
static void load_app(struct trace *t)
{
	static const char *const sql[] = {
		"SELECT ts, end_ts, name, depth, step, native_id FROM app.spans "
		"WHERE end_ts >= ?1 AND ts <= ?2 ORDER BY rowid",
		"SELECT ts, end_ts, 'step ' || step, NULL, step, native_id "
		"FROM app.steps WHERE end_ts >= ?1 AND ts <= ?2 ORDER BY "
		"rowid"};
	char err[300];

	for (int i = 0; i < 2 && !t->rc; i++) {
		struct store_stmt *q = NULL;

		if (store_stmt_new(t->st, sql[i], &q, err, sizeof(err)))
			continue;
		store_stmt_real(q, 1, t->since);
		store_stmt_real(q, 2, t->until);
		while (!t->rc && step_row(t, q, err, sizeof(err))) {
			const char *name = store_stmt_col_text(q, 2);
			long tid = store_stmt_col_null(q, 5)
					   ? t->pid
					   : (long)store_stmt_col_int(q, 5);
			cJSON *a = cJSON_CreateObject();
			char text[300];

			snprintf(text, sizeof(text), "%s", name ? name : "?");
			outbuf_utf8_scrub(text);
			if (a) {
				add_num(a, q, 4, "step", 1);
				add_num(a, q, 3, "depth", 1);
				cJSON_AddNumberToObject(
					a, "ms",
					(store_stmt_col_real(q, 1) -
					 store_stmt_col_real(q, 0)) *
						1e3);
			}
			track(t, tid);
			add_span(t, tid, store_stmt_col_real(q, 0),
				 store_stmt_col_real(q, 1),
				 i ? "app.step" : "app", strdup(text),
				 args_text(a));
		}
		store_stmt_free(q);
	}
}

/* ---- spans, nested per track ------------------------------------------ */

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1; /* the outer first */
	return x->order < y->order ? -1 : x->order > y->order;
}

static void write_spans(struct trace *t)
{
	size_t *open, nopen = 0;

	if (!t->nspans)
		return;
	open = malloc(t->nspans * sizeof(*open));
	if (!open) {
		fail(t, -ENOMEM, "out of memory");
		return;
	}
	qsort(t->spans, t->nspans, sizeof(*t->spans), cmp_span);
	for (size_t i = 0; i < t->nspans && !t->b.err; i++) {
		struct span *s = &t->spans[i];
		long long ts, end;

		if (!i || s->tid != t->spans[i - 1].tid) {
			nopen = 0;
			track(t, s->tid);
		}
		while (nopen && t->spans[open[nopen - 1]].end <= s->start)
			nopen--;
		/* Nested in the open one: cut at its end (args.ms keeps
		 * what was measured). */
		if (nopen && s->end > t->spans[open[nopen - 1]].end)
			s->end = t->spans[open[nopen - 1]].end;
		open[nopen++] = i;
		outbuf_printf(&t->b,
			      ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":",
			      s->cat);
		outbuf_json_str(&t->b, s->name);
		/* Both ends in whole nanoseconds, rounded alike: a span
		 * cut at its parent's end ends there exactly. */
		ts = ns_of(t, s->start);
		end = ns_of(t, s->end);
		outbuf_printf(&t->b, ",\"pid\":%ld,\"tid\":%ld", t->pid,
			      s->tid);
		put_us(&t->b, "ts", ts);
		put_us(&t->b, "dur", end > ts ? end - ts : 0);
		outbuf_printf(&t->b, ",\"args\":%s}", s->args);
		t->nevents++;
	}
	free(open);
}

/* ---- samples ---------------------------------------------------------- */

static void write_samples(struct trace *t, const struct flamereq_env *env)
{
	struct flamegraph_opts o = {0};
	struct flamegraph *fg = flamegraph_new();
	char err[300], *out = NULL;
	size_t len = 0;
	int rc;

	if (!fg) {
		fail(t, -ENOMEM, "out of memory");
		return;
	}
	rc = flamereq_samples(t->st, t->since, t->until, fg, err, sizeof(err));
	if (rc && strstr(err, "no such table")) {
		/* A recording of a run whose sampler never ran. */
		note(t, "profile.samples",
		     "no samples: the sampler never ran in this run");
		flamegraph_free(fg);
		return;
	}
	if (rc) {
		fail(t, rc, err);
		flamegraph_free(fg);
		return;
	}
	o.states = 1;
	o.interval = env->hz > 0 ? 1.0 / env->hz : 0.01;
	o.pid = t->pid;
	o.origin = t->since;
	rc = flamegraph_render(fg, FLAMEGRAPH_INSTANTS, &o, &out, &len, err,
			       sizeof(err));
	if (rc) {
		fail(t, rc, rc == -E2BIG ? "the samples' events are larger "
					   "than the trace's cap: take a "
					   "shorter window"
					 : err);
	} else {
		outbuf_putn(&t->b, out, len);
		t->nsamples = flamegraph_samples(fg);
		t->nevents += t->nsamples;
	}
	free(out);
	flamegraph_free(fg);
}

/* ---- counters and hangs ----------------------------------------------- */

/* A counter event: name, then args (a JSON object's text). */
static void counter(struct trace *t, double ts, const char *name,
		    const char *args)
{
	outbuf_puts(&t->b, ",\n{\"ph\":\"C\",\"name\":");
	outbuf_json_str(&t->b, name);
	outbuf_printf(&t->b, ",\"pid\":%ld,\"tid\":0", t->pid);
	put_us(&t->b, "ts", ns_of(t, ts));
	outbuf_printf(&t->b, ",\"args\":%s}", args);
	t->ncounters++;
	t->nevents++;
}

static void load_memory(struct trace *t)
{
	struct store_stmt *q = optional(
		t, "process.memory",
		"SELECT ts, rss, cuda_allocated, cuda_reserved FROM "
		"process.memory WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts", 1);
	char err[300];

	while (q && !t->rc && step_row(t, q, err, sizeof(err))) {
		cJSON *a = cJSON_CreateObject();
		char *text;

		if (a) {
			add_num(a, q, 1, "rss", 1);
			add_num(a, q, 2, "cuda_allocated", 1);
			add_num(a, q, 3, "cuda_reserved", 1);
		}
		text = args_text(a);
		if (!text) {
			fail(t, -ENOMEM, "out of memory");
			break;
		}
		counter(t, store_stmt_col_real(q, 0), "memory (MB)", text);
		free(text);
	}
	store_stmt_free(q);
}

static void load_gpu(struct trace *t)
{
	struct store_stmt *q = optional(
		t, "gpu.utilization",
		"SELECT ts, device, gpu_util, mem_util, memory_used FROM "
		"gpu.utilization WHERE ts >= ?1 AND ts <= ?2 ORDER BY ts", 1);
	char err[300];

	while (q && !t->rc && step_row(t, q, err, sizeof(err))) {
		long dev = (long)store_stmt_col_int(q, 1);
		double ts = store_stmt_col_real(q, 0);
		char name[64], args[160];

		if (!store_stmt_col_null(q, 2) && !store_stmt_col_null(q, 3)) {
			snprintf(name, sizeof(name), "GPU %ld busy (%%)", dev);
			snprintf(args, sizeof(args),
				 "{\"kernels\":%lld,\"memory\":%lld}",
				 (long long)store_stmt_col_int(q, 2),
				 (long long)store_stmt_col_int(q, 3));
			counter(t, ts, name, args);
		}
		if (!store_stmt_col_null(q, 4) &&
		    isfinite(store_stmt_col_real(q, 4))) {
			snprintf(name, sizeof(name), "GPU %ld memory (MB)",
				 dev);
			snprintf(args, sizeof(args), "{\"used\":%.3f}",
				 store_stmt_col_real(q, 4));
			counter(t, ts, name, args);
		}
	}
	store_stmt_free(q);
}

static void load_hangs(struct trace *t)
{
	struct store_stmt *q = optional(
		t, "process.hangs",
		"SELECT id, started, detected, resumed FROM process.hangs "
		"WHERE detected >= ?1 AND detected <= ?2 ORDER BY detected",
		1);
	char err[300];

	while (q && !t->rc && step_row(t, q, err, sizeof(err))) {
		outbuf_printf(&t->b,
			      ",\n{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"hang\","
			      "\"name\":\"hang %lld: the main thread stuck\","
			      "\"pid\":%ld,\"tid\":0",
			      (long long)store_stmt_col_int(q, 0), t->pid);
		put_us(&t->b, "ts", ns_of(t, store_stmt_col_real(q, 2)));
		outbuf_printf(&t->b, ",\"args\":{\"id\":%lld",
			      (long long)store_stmt_col_int(q, 0));
		put_num(&t->b, "started", store_stmt_col_real(q, 1));
		put_num(&t->b, "detected", store_stmt_col_real(q, 2));
		if (!store_stmt_col_null(q, 3))
			put_num(&t->b, "resumed", store_stmt_col_real(q, 3));
		outbuf_puts(&t->b, "}}");
		t->nevents++;
	}
	store_stmt_free(q);
}

/* ---- names ------------------------------------------------------------ */

static void write_names(struct trace *t)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].native > 0)
			track(t, t->threads[i].native);
	for (size_t i = 0; i < t->ntracks && !t->rc; i++) {
		long tid = t->tracks[i];
		const char *name = NULL;
		char label[320];

		for (size_t k = 0; k < t->nthreads && !name; k++)
			if ((t->threads[k].native > 0
				     ? t->threads[k].native
				     : (long)(t->threads[k].id & 0x7fffffff)) ==
				    tid &&
			    t->threads[k].name[0])
				name = t->threads[k].name;
		if (name)
			snprintf(label, sizeof(label), "%s (thread %ld)", name,
				 tid);
		else if (tid == t->pid)
			snprintf(label, sizeof(label), "main thread (%ld)",
				 tid);
		else
			snprintf(label, sizeof(label), "thread %ld", tid);
		outbuf_printf(&t->b,
			      ",\n{\"ph\":\"M\",\"name\":\"thread_name\","
			      "\"pid\":%ld,\"tid\":%ld,\"args\":{\"name\":",
			      t->pid, tid);
		outbuf_json_str(&t->b, label);
		outbuf_printf(&t->b,
			      "}},\n{\"ph\":\"M\",\"name\":"
			      "\"thread_sort_index\",\"pid\":%ld,\"tid\":%ld,"
			      "\"args\":{\"sort_index\":%d}}",
			      t->pid, tid, tid == t->pid ? 0 : 1);
	}
}

/* ---- the request ------------------------------------------------------ */

/* The process's name without " (pid N)": the viewers add that
 * themselves (Perfetto " N", chrome://tracing's " (pid N)"). */
static void process_label(const char *name, long pid, char *out, size_t len)
{
	char tail[40];
	size_t n = strlen(name), k;

	k = (size_t)snprintf(tail, sizeof(tail), " (pid %ld)", pid);
	if (n > k && !strcmp(name + n - k, tail))
		n -= k;
	snprintf(out, len, "%.*s", (int)n, name);
}

static void release(struct trace *t)
{
	for (size_t i = 0; i < t->nspans; i++) {
		free(t->spans[i].name);
		free(t->spans[i].args);
	}
	for (size_t i = 0; i < t->nthreads; i++)
		free(t->threads[i].name);
	free(t->spans);
	free(t->threads);
	free(t->tracks);
	free(t->steps);
	sampler_map_release(&t->step_map);
	outbuf_release(&t->b);
}

int tracereq_answer(struct store *st, const cJSON *args,
		    const struct flamereq_env *env, cJSON *body, char *err,
		    size_t errlen)
{
	struct trace t = {.st = st,
			  .b = {.max = TRACEREQ_OUTPUT_MAX},
			  .err = err,
			  .errlen = errlen};
	int samples = 1;
	const char *title = NULL;
	char label[320];

	if (dap_arg_bool(args, "samples", &samples, err, errlen) < 0 ||
	    dap_arg_string(args, "title", &title, err, errlen) < 0 ||
	    flamereq_window(args, env, &t.since, &t.until, err, errlen))
		return -EINVAL;
	if (t.until - t.since > TRACEREQ_WINDOW_MAX) {
		errbuf_set(err, errlen,
			   "the window is longer than %d days: give since and "
			   "until closer",
			   TRACEREQ_WINDOW_MAX / 86400);
		return -EINVAL;
	}
	if (!(t.until > t.since)) {
		errbuf_set(err, errlen,
			   "the window is empty: since (%.3f) is not before "
			   "until (%.3f)",
			   t.since, t.until);
		return -EINVAL;
	}
	t.pid = env->pid > 0 ? env->pid : 1;
	t.notes = cJSON_AddArrayToObject(body, "notes");
	if (!t.notes) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	outbuf_printf(&t.b,
		      "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":"
		      "\"probing\",\"startTime\":%.6f,\"until\":%.6f,"
		      "\"pid\":%ld},\"traceEvents\":[\n{\"ph\":\"M\",\"name\":"
		      "\"process_name\",\"pid\":%ld,\"tid\":0,\"args\":"
		      "{\"name\":",
		      t.since, t.until, t.pid, t.pid);
	process_label(title ? title : env->name ? env->name : "python", t.pid,
		      label, sizeof(label));
	outbuf_json_str(&t.b, label);
	outbuf_puts(&t.b, "}}");
	load_threads(&t);
	if (!t.rc)
		load_torch(&t);
	if (!t.rc)
		load_comm(&t);
	if (!t.rc)
		load_app(&t);
	if (!t.rc)
		write_spans(&t);
	if (!t.rc && samples)
		write_samples(&t, env);
	if (!t.rc)
		load_memory(&t);
	if (!t.rc)
		load_gpu(&t);
	if (!t.rc)
		load_hangs(&t);
	if (!t.rc)
		write_names(&t);
	outbuf_puts(&t.b, "\n]}\n");
	if (!t.rc && t.b.err)
		fail(&t, t.b.err,
		     t.b.err == -E2BIG ? "the trace is larger than its cap "
					 "(8 MiB): take a shorter window "
					 "(-d), or fewer samples (--hz, "
					 "--no-samples) or steps "
					 "(--step-rate)"
				       : "out of memory");
	if (!t.rc) {
		cJSON_AddNumberToObject(body, "since", t.since);
		cJSON_AddNumberToObject(body, "until", t.until);
		cJSON_AddNumberToObject(body, "events", (double)t.nevents);
		cJSON_AddNumberToObject(body, "spans", (double)t.nspans);
		cJSON_AddNumberToObject(body, "async", (double)t.nasync);
		cJSON_AddNumberToObject(body, "samples", (double)t.nsamples);
		cJSON_AddNumberToObject(body, "counters",
					(double)t.ncounters);
		if (!cJSON_AddStringToObject(body, "data", t.b.p))
			fail(&t, -ENOMEM, "out of memory");
	}
	release(&t);
	return t.rc;
}
