/*
 * dx_leak: does the process's memory grow, how fast, and what grows with
 * it.
 *
 *   1. process.memory over the last 15 minutes: RSS's growth per minute
 *      (least squares over the later half) and from what to what.
 *   2. Two snapshots the window apart (10 s): Python objects by type
 *      (`memory`) and live tensors by who holds them (python.tensors,
 *      when torch is imported): what grew in between.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diagnose/dx.h"

#define WINDOW_MS 10000
#define GROWS_MB_MIN 1.0 /* slower than this is not called a leak, */
#define GROWN_MB_MIN 5.0 /* nor less than this in all */
#define SPAN_MIN_MS 60000 /* series (its later half) to tell, by default:
			   * a process's warm-up grows it for a minute */
#define TOP 3

#define HOLDERS_SQL                                                            \
	"SELECT coalesce(CASE WHEN instr(holder, '[') > 0 THEN "               \
	"substr(holder, 1, instr(holder, '[') - 1) ELSE holder END, "          \
	"'(no known holder)') AS holder, count(*) AS n, sum(bytes) AS bytes "  \
	"FROM python.tensors GROUP BY 1"

struct snap {
	cJSON *mem;	/* `memory -f json` */
	cJSON *holders; /* rows of HOLDERS_SQL, or NULL without torch */
};

static int take(struct dx *d, struct snap *s)
{
	const char *words[] = {"-f", "json", "memory", NULL};

	if (dx_json(d, &s->mem, words))
		return -1;
	if (dx_query(d, &s->holders, HOLDERS_SQL)) {
		/* No torch in the process: no tensors to follow. */
		s->holders = NULL;
		dx_forgive(d);
	}
	return 0;
}

static void snap_free(struct snap *s)
{
	cJSON_Delete(s->mem);
	cJSON_Delete(s->holders);
}

/* RSS's slope (MB per minute) over the later half of rows {ts, rss} (a
 * young process's start — imports, the first batches — is not a leak). */
static double slope(const cJSON *rows, double *first, double *last,
		    double *span)
{
	double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, t0 = 0;
	int skip = cJSON_GetArraySize(rows) / 2;
	const cJSON *r;

	*first = *last = *span = 0;
	cJSON_ArrayForEach(r, rows)
	{
		double t = dx_num(r, "ts"), y = dx_num(r, "rss");

		if (skip-- > 0)
			continue;
		if (n == 0) {
			t0 = t;
			*first = y;
		}
		t -= t0;
		n++;
		sx += t;
		sy += y;
		sxx += t * t;
		sxy += t * y;
		*last = y;
		*span = t;
	}
	if (n < 3 || sxx * n - sx * sx <= 0)
		return 0;
	return (n * sxy - sx * sy) / (n * sxx - sx * sx) * 60;
}

static const cJSON *find(const cJSON *rows, const char *key, const char *v)
{
	const cJSON *r;

	cJSON_ArrayForEach(r, rows)
	{
		if (!strcmp(dx_str(r, key), v))
			return r;
	}
	return NULL;
}

struct growth {
	char name[256];
	double n, bytes;
};

static double rank_of(const struct growth *g, int by_count)
{
	return by_count ? g->n : g->bytes;
}

/* The rows of b that grew since a (by key; count n, size bytes), the
 * TOP most grown by bytes (or by count). */
static int grown(const cJSON *a, const cJSON *b, const char *key,
		 const char *n_key, const char *bytes_key, int by_count,
		 struct growth *out)
{
	const cJSON *r;
	int k = 0;

	cJSON_ArrayForEach(r, b)
	{
		const cJSON *before = find(a, key, dx_str(r, key));
		struct growth g;
		int at;

		g.n = dx_num(r, n_key) - (before ? dx_num(before, n_key) : 0);
		g.bytes = dx_num(r, bytes_key) -
			  (before ? dx_num(before, bytes_key) : 0);
		if (g.n <= 0)
			continue;
		snprintf(g.name, sizeof(g.name), "%s", dx_str(r, key));
		/* Into out[0..k), most bytes first, TOP at most. */
		if (k == TOP &&
		    rank_of(&out[TOP - 1], by_count) >= rank_of(&g, by_count))
			continue;
		at = k < TOP ? k : TOP - 1;
		for (; at > 0 &&
		       rank_of(&out[at - 1], by_count) < rank_of(&g, by_count);
		     at--)
			out[at] = out[at - 1];
		out[at] = g;
		if (k < TOP)
			k++;
	}
	return k;
}

/* "; growing: tensors held by history (+332 in 10 s), and 177 MB in
 * tensors no name holds (+1332)": the named holder that grew most in
 * count, and the nameless ones (saved for a backward pass, or cached). */
static void say_holders(char *out, size_t len, const struct growth *h, int n,
			int window)
{
	const struct growth *named = NULL, *nameless = NULL;
	size_t at;

	for (int i = 0; i < n; i++) {
		if (h[i].name[0] == '(' && !nameless)
			nameless = &h[i];
		else if (h[i].name[0] != '(' && !named)
			named = &h[i];
	}
	at = (size_t)snprintf(out, len, "; growing:");
	if (named && at < len)
		at += (size_t)snprintf(out + at, len - at,
				       " tensors held by %s (%+.0f in %.0f s)",
				       named->name, named->n, window / 1000.0);
	if (nameless && at < len)
		snprintf(out + at, len - at,
			 "%s %.0f MB in tensors no name holds (%+.0f: saved "
			 "for a backward pass, or cached)",
			 named ? ", and" : "", nameless->bytes / 1048576,
			 nameless->n);
}

static const cJSON *by_count(const cJSON *mem)
{
	return cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(mem, "python"), "byCount");
}

int dx_leak(struct dx *d)
{
	int window = d->window_ms > 0 ? d->window_ms : WINDOW_MS, rc = -1;
	double need = (d->history_ms > 0 ? d->history_ms : SPAN_MIN_MS) / 1000.0;
	struct snap a = {0}, b = {0};
	struct growth types[TOP], holders[TOP];
	int ntypes, nholders = 0;
	double rate, first, last, span;
	cJSON *series = NULL;
	char what[DX_TEXT_MAX] = "";

	/* The series first: the snapshots below make the agent walk every
	 * object and tensor, which raises the RSS it would then read as
	 * growth (its own, not the program's). */
	if (dx_query(d, &series,
		     "SELECT ts, rss FROM process.memory WHERE ts > ago('15m') "
		     "ORDER BY ts"))
		goto out;
	if (take(d, &a))
		goto out;
	dx_step("watching memory for %.1f s", window / 1000.0);
	usleep((useconds_t)window * 1000);
	if (take(d, &b))
		goto out;
	rate = slope(series, &first, &last, &span);
	if (span > 0)
		dx_evidence(d,
			    "RSS %.1f MB -> %.1f MB over %.1f min "
			    "(the later half of process.memory's %d rows): "
			    "%+.1f MB/min",
			    first, last, span / 60, cJSON_GetArraySize(series),
			    rate);
	else
		dx_evidence(d, "process.memory has no series yet "
			       "(memory.interval_ms)");
	ntypes = grown(by_count(a.mem), by_count(b.mem), "type", "count",
		       "bytes", 0, types);
	for (int i = 0; i < ntypes; i++)
		dx_evidence(d, "in %.1f s: %s objects %+.0f (%+.2f MB)",
			    window / 1000.0, types[i].name, types[i].n,
			    types[i].bytes / 1048576);
	if (a.holders && b.holders) {
		nholders = grown(a.holders, b.holders, "holder", "n", "bytes",
				 1, holders);
		for (int i = 0; i < nholders; i++)
			dx_evidence(d,
				    "in %.1f s: tensors held by %s %+.0f "
				    "(%+.2f MB)",
				    window / 1000.0, holders[i].name,
				    holders[i].n, holders[i].bytes / 1048576);
	}
	if (nholders)
		say_holders(what, sizeof(what), holders, nholders, window);
	else if (ntypes)
		snprintf(what, sizeof(what),
			 "; growing: %s objects (%+.0f in %.0f s)",
			 types[0].name, types[0].n, window / 1000.0);
	if (span < need)
		dx_verdict(d,
			   "too early to tell: %.0f s of RSS history past the "
			   "start, a verdict needs %.0f s (--history)%s",
			   span, need, what);
	else if (rate >= GROWS_MB_MIN && last - first >= GROWN_MB_MIN)
		dx_verdict(d,
			   "memory grows: RSS %+.1f MB/min (%.0f -> %.0f MB "
			   "over %.1f min)%s",
			   rate, first, last, span / 60, what);
	else if (rate >= GROWS_MB_MIN)
		dx_verdict(d,
			   "not clear yet: RSS rises %+.1f MB/min but by %+.1f "
			   "MB in all over %.1f min (%.0f -> %.0f MB); ask "
			   "again in a few minutes%s",
			   rate, last - first, span / 60, first, last, what);
	else
		dx_verdict(d,
			   "no leak seen: RSS %+.1f MB/min over %.1f min "
			   "(%.0f -> %.0f MB)",
			   rate, span / 60, first, last);
	dx_next(d,
		"probing -t %s query \"SELECT ts, rss FROM process.memory "
		"WHERE ts > ago('15m')\"",
		d->target);
	for (int i = 0; i < nholders; i++)
		if (holders[i].name[0] != '(') {
			dx_next(d,
				"probing -t %s query \"SELECT holder, grad_fn, "
				"shape FROM python.tensors WHERE holder LIKE "
				"'%s%%'\"",
				d->target, holders[i].name);
			break;
		}
	rc = 0;
out:
	snap_free(&a);
	snap_free(&b);
	cJSON_Delete(series);
	return rc;
}
