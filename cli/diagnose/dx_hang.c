/*
 * dx_hang: is the program stuck, where, and — in a distributed job — who
 * holds it up.
 *
 *   1. In a torch.distributed job: `cluster hang` (the ranks' collectives
 *      and main threads); its verdict when a rank holds the others up.
 *   2. Three backtraces over the window (2 s): did the main thread move?
 *   3. process.hangs: how long the watchdog has seen it stuck.
 *   4. Where: the program's own innermost frame of the main thread, what
 *      it waits in, and where every other thread is.
 *   5. asyncio (the backtraces' tasks): a task running without letting its
 *      loop go, a cycle of awaits, or the chain of tasks that did not move
 *      and what its innermost task waits for — the verdict instead of the
 *      main thread's, which sits in the loop's select either way.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diagnose/dx.h"
#include "render/frames.h"

#define WINDOW_MS 2000

/* The ranks' side: 1 when the cluster's verdict is the answer. */
static int cluster(struct dx *d)
{
	const char *words[] = {"-f", "json", "cluster", "hang", NULL};
	const cJSON *rank, *last;
	cJSON *j;
	const char *kind;

	if (dx_json(d, &j, words)) {
		/* Not in a job (or its ranks unknown): the local looks. */
		dx_forgive(d);
		return 0;
	}
	kind = dx_str(j, "kind");
	cJSON_ArrayForEach(rank, cJSON_GetObjectItemCaseSensitive(j, "ranks"))
	{
		last = cJSON_GetArrayItem(
			cJSON_GetObjectItemCaseSensitive(rank, "last"), 0);
		if (!cJSON_IsTrue(
			    cJSON_GetObjectItemCaseSensitive(rank, "answered")))
			dx_evidence(d, "rank %.0f: did not answer: %s",
				    dx_num(rank, "rank"), dx_str(rank, "why"));
		else if (last)
			dx_evidence(d,
				    "rank %.0f: last collective %s #%.0f %s%s; "
				    "main thread in %s",
				    dx_num(rank, "rank"), dx_str(last, "op"),
				    dx_num(last, "seq"), dx_str(last, "state"),
				    !strcmp(dx_str(last, "state"), "running")
					    ? " (waiting)"
					    : "",
				    dx_str(rank, "where"));
		else
			dx_evidence(d,
				    "rank %.0f: no collective yet; main "
				    "thread in %s",
				    dx_num(rank, "rank"),
				    dx_str(rank, "where"));
	}
	dx_next(d, "probing -t %s cluster backtrace", d->target);
	if (strcmp(kind, "none")) {
		dx_verdict(d, "%s", dx_str(j, "verdict"));
		cJSON_Delete(j);
		return 1;
	}
	dx_evidence(d, "cluster: %s", dx_str(j, "verdict"));
	cJSON_Delete(j);
	return 0;
}

static int same_frames(const cJSON *a, const cJSON *b)
{
	char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
	int same = ta && tb && !strcmp(ta, tb);

	free(ta);
	free(tb);
	return same;
}

/* "state, innermost (where), in own (where)" for a thread. */
static void describe(const cJSON *th, char *out, size_t len)
{
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
	const cJSON *inner = cJSON_GetArrayItem(frames, 0);
	const cJSON *own = frames_own_innermost(frames);
	char w_inner[512], w_own[512];

	if (!inner) {
		snprintf(out, len, "%s, no Python frame", dx_str(th, "state"));
		return;
	}
	frame_where(inner, w_inner, sizeof(w_inner));
	frame_where(own, w_own, sizeof(w_own));
	if (own == inner)
		snprintf(out, len, "%s in %s", dx_str(th, "state"), w_inner);
	else
		snprintf(out, len, "%s in %s, in %s", dx_str(th, "state"),
			 w_own, w_inner);
}

/* ---- asyncio: which task chain is stuck, and on what ---- */

#define CHAIN_MAX 32	/* tasks followed along awaits */
#define WAITS_GROUPS 6	/* "N tasks wait for X" lines, at most */
#define WAITS_NAMED 3	/* tasks named in one */

/* A look's tasks by id (10,000 of them: no linear search). */
struct tix {
	double id;
	const cJSON *t;
	int still; /* (the last look's) as it was in the first: mark_still */
};

struct tasks {
	const cJSON *arr;
	struct tix *ix;
	size_t n;
};

static int tix_cmp(const void *a, const void *b)
{
	double x = ((const struct tix *)a)->id, y = ((const struct tix *)b)->id;

	return x < y ? -1 : x > y;
}

/* A task's id; -1 when it is no number (a total order for the sort). */
static double task_id(const cJSON *t)
{
	double id = dx_num(t, "id");

	return isfinite(id) ? id : -1;
}

static int tasks_index(struct tasks *ts, const cJSON *body)
{
	const cJSON *t;

	ts->arr = cJSON_GetObjectItemCaseSensitive(body, "tasks");
	ts->n = (size_t)cJSON_GetArraySize(ts->arr);
	ts->ix = ts->n ? calloc(ts->n, sizeof(*ts->ix)) : NULL;
	if (ts->n && !ts->ix)
		return -1;
	ts->n = 0;
	cJSON_ArrayForEach(t, ts->arr)
	{
		ts->ix[ts->n].id = task_id(t);
		ts->ix[ts->n++].t = t;
	}
	if (ts->n) /* (no array when none: qsort's NULL is undefined) */
		qsort(ts->ix, ts->n, sizeof(*ts->ix), tix_cmp);
	return 0;
}

static struct tix *tix_of(const struct tasks *ts, double id)
{
	struct tix key = {.id = id};

	return ts->n ? bsearch(&key, ts->ix, ts->n, sizeof(*ts->ix), tix_cmp)
		     : NULL;
}

static const cJSON *task_by_id(const struct tasks *ts, double id)
{
	const struct tix *hit = tix_of(ts, id);

	return hit ? hit->t : NULL;
}

/* Marks the tasks of the last look that are as they were in the first
 * (what they await, their frames): how many. */
static int mark_still(const struct tasks *first, struct tasks *last)
{
	int n = 0;

	for (size_t i = 0; i < last->n; i++) {
		const cJSON *t = last->ix[i].t;
		const cJSON *was = task_by_id(first, last->ix[i].id);

		last->ix[i].still =
			was &&
			!strcmp(dx_str(was, "awaits"), dx_str(t, "awaits")) &&
			same_frames(cJSON_GetObjectItemCaseSensitive(was,
								     "frames"),
				    cJSON_GetObjectItemCaseSensitive(t,
								     "frames"));
		n += last->ix[i].still;
	}
	return n;
}

/* Whether task t of the last look did not move (mark_still). */
static int task_still(const struct tasks *last, const cJSON *t)
{
	const struct tix *hit = tix_of(last, task_id(t));

	return hit && hit->still;
}

/* "NAME (in where)" for a task: its own innermost frame. */
static void task_where(const cJSON *t, char *out, size_t len)
{
	char where[512];

	frame_where(frames_own_innermost(
			    cJSON_GetObjectItemCaseSensitive(t, "frames")),
		    where, sizeof(where));
	snprintf(out, len, "%s (in %s)", dx_str(t, "name"), where);
}

static const cJSON *first_awaited(const struct tasks *ts, const cJSON *t)
{
	const cJSON *k = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(t, "awaitsTasks"), 0);

	return k ? task_by_id(ts, k->valuedouble) : NULL;
}

/* The cycle of awaits through t, path[0] = t: its length, 0 when none. */
static int cycle_through(const struct tasks *ts, const cJSON *t,
			 const cJSON *path[CHAIN_MAX])
{
	const cJSON *at = t;

	for (int n = 1; n < CHAIN_MAX; n++) {
		path[n - 1] = at;
		at = first_awaited(ts, at);
		if (!at)
			return 0;
		if (at == t)
			return n;
	}
	return 0;
}

/* The tasks awaiting t through each other, up to one no task awaits:
 * path[0] = t, path[n - 1] that one; n. */
static int chain_up(const struct tasks *ts, const cJSON *t,
		    const cJSON *path[CHAIN_MAX])
{
	int n = 1;

	path[0] = t;
	while (n < CHAIN_MAX) {
		const cJSON *by = cJSON_GetArrayItem(
			cJSON_GetObjectItemCaseSensitive(path[n - 1],
							 "awaitedBy"),
			0);
		const cJSON *up = by ? task_by_id(ts, by->valuedouble) : NULL;

		if (!up || up == t)
			break;
		path[n++] = up;
	}
	return n;
}

/* "A (in where) awaits B (in where) ...": path from its end to path[0],
 * or from path[0] on (forward). */
static void path_text(const cJSON *path[], int n, int forward, char *out,
		      size_t len)
{
	char one[700];

	out[0] = '\0';
	for (int k = 0; k < n; k++) {
		size_t at = strlen(out);

		task_where(path[forward ? k : n - 1 - k], one, sizeof(one));
		snprintf(out + at, len - at, "%s%s", k ? " awaits " : "", one);
	}
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* What the tasks wait for, the most common first: "asyncio: 9998 tasks
 * wait for asyncio Event.wait (idle-0, idle-1, idle-2, ...)". */
static void waits_evidence(struct dx *d, const struct tasks *ts)
{
	const char **w = calloc(ts->n ? ts->n : 1, sizeof(*w));
	const char *top[WAITS_GROUPS];
	size_t count[WAITS_GROUPS], ntop = 0, n = 0;
	const cJSON *t;

	if (!w)
		return;
	cJSON_ArrayForEach(t, ts->arr) if (*dx_str(t, "awaits")) w[n++] =
		dx_str(t, "awaits");
	qsort(w, n, sizeof(*w), str_cmp);
	for (size_t i = 0, j; i < n; i = j) {
		size_t k;

		for (j = i; j < n && !strcmp(w[i], w[j]); j++)
			;
		/* Kept among the WAITS_GROUPS largest, largest first. */
		for (k = ntop; k > 0 && count[k - 1] < j - i; k--)
			if (k < WAITS_GROUPS) {
				top[k] = top[k - 1];
				count[k] = count[k - 1];
			}
		if (k < WAITS_GROUPS) {
			top[k] = w[i];
			count[k] = j - i;
			if (ntop < WAITS_GROUPS)
				ntop++;
		}
	}
	for (size_t g = 0; g < ntop; g++) {
		char names[512] = "";
		size_t named = 0;

		cJSON_ArrayForEach(t, ts->arr)
		{
			size_t at = strlen(names);

			if (named == WAITS_NAMED)
				break;
			if (strcmp(dx_str(t, "awaits"), top[g]))
				continue;
			snprintf(names + at, sizeof(names) - at, "%s%s",
				 named++ ? ", " : "", dx_str(t, "name"));
		}
		dx_evidence(d, "asyncio: %zu task%s wait%s for %s (%s%s)",
			    count[g], count[g] == 1 ? "" : "s",
			    count[g] == 1 ? "s" : "", top[g], names,
			    count[g] > WAITS_NAMED ? ", ..." : "");
	}
	free(w);
}

/* The stuck chain: the task that has waited longest (to 0.1 s) on
 * something that is no task, of those the one most tasks await through
 * each other; its chain in best (leaf first), its length, 0 if none. */
static int stuck_chain(const struct tasks *last, const cJSON *best[CHAIN_MAX],
		       double *longest)
{
	const cJSON *t;
	int depth = 0;

	cJSON_ArrayForEach(t, last->arr)
	{
		double w = dx_num(t, "waited");
		const cJSON *path[CHAIN_MAX];
		int up;

		/* To 0.1 s; a figure out of range (a garbled reply) is 0. */
		w = w >= 0 && w < 1e9 ? (double)(long long)(w * 10) / 10 : 0;
		if (first_awaited(last, t) || !task_still(last, t))
			continue;
		up = chain_up(last, t, path);
		if (!depth || w > *longest || (w == *longest && up > depth)) {
			*longest = w;
			depth = up;
			memcpy(best, path, sizeof(path));
		}
	}
	return depth;
}

/* 1 when the tasks give the verdict: a task running without letting the
 * loop go, a cycle of awaits, or the chain nothing moved in. */
static int tasks_verdict(struct dx *d, const cJSON *bt1, const cJSON *bt2,
			 int window)
{
	struct tasks first = {0}, last = {0};
	const cJSON *t, *path[CHAIN_MAX];
	char text[4096], where[700];
	int still = 0, len, decided = 1;
	double longest = -1, left = dx_num(bt2, "tasksLeftOut");

	if (tasks_index(&first, bt1) || tasks_index(&last, bt2) || !last.n) {
		decided = 0;
		goto out;
	}
	still = mark_still(&first, &last);
	dx_evidence(d, "asyncio: %zu task%s, %d of them did not move in %.1f s%s",
		    last.n, last.n == 1 ? "" : "s", still, window / 1000.0,
		    left > 0 ? " (more not listed)" : "");
	waits_evidence(d, &last);
	dx_next(d, "probing -t %s backtrace --tasks", d->target);
	cJSON_ArrayForEach(t, last.arr)
	{
		if (strcmp(dx_str(t, "state"), "running") ||
		    !task_still(&last, t))
			continue;
		task_where(t, where, sizeof(where));
		dx_verdict(d,
			   "the event loop is blocked: task %s has run for "
			   "at least %.1f s without giving control back (a "
			   "blocking call in a coroutine)",
			   where, window / 1000.0);
		goto out;
	}
	cJSON_ArrayForEach(t, last.arr)
	{
		if (!(len = cycle_through(&last, t, path)) ||
		    !task_still(&last, t))
			continue;
		path[len] = t;
		path_text(path, len + 1, 1, text, sizeof(text));
		dx_verdict(d, "asyncio deadlock: %s (a cycle of awaits: none "
			      "of them can end)",
			   text);
		goto out;
	}
	if (!(len = stuck_chain(&last, path, &longest))) {
		dx_verdict(d, "not stuck: the asyncio tasks moved within %.1f s",
			   window / 1000.0);
		dx_next(d, "probing -t %s diagnose slow", d->target);
		goto out;
	}
	path_text(path, len, 0, text, sizeof(text));
	dx_verdict(d,
		   "no asyncio task moved in %.1f s%s: %s, which waits for %s",
		   longest > window / 1000.0 ? longest : window / 1000.0,
		   longest > window / 1000.0 ? " (seen waiting that long)" : "",
		   text, *dx_str(path[0], "awaits") ? dx_str(path[0], "awaits")
						    : "nothing known");
out:
	free(first.ix);
	free(last.ix);
	return decided;
}

int dx_hang(struct dx *d)
{
	const char *bt_words[] = {"-f", "json", "backtrace", "--tasks", NULL};
	cJSON *bt1 = NULL, *mid = NULL, *bt2 = NULL, *hangs = NULL;
	const cJSON *m1, *m2, *th, *hang, *own, *inner;
	char where[512], waits[512], line[1200];
	int window = d->window_ms > 0 ? d->window_ms : WINDOW_MS, rc = -1;

	if (cluster(d))
		return 0;
	if (dx_json(d, &bt1, bt_words))
		goto out;
	dx_step("watching the main thread for %.1f s", window / 1000.0);
	usleep((useconds_t)window * 500);
	if (dx_json(d, &mid, bt_words))
		goto out;
	dx_step("watching the main thread for %.1f s", window / 1000.0);
	usleep((useconds_t)window * 500);
	if (dx_json(d, &bt2, bt_words))
		goto out;
	if (dx_query(d, &hangs,
		     "SELECT id, seconds, func, file, lineno, resumed IS NULL "
		     "AS stuck FROM process.hangs ORDER BY id DESC LIMIT 1"))
		goto out;
	m1 = frames_main_thread(bt1);
	m2 = frames_main_thread(bt2);
	if (!m2) {
		snprintf(d->err, sizeof(d->err), "no threads in the backtrace");
		d->status = 1;
		goto out;
	}
	hang = cJSON_GetArrayItem(hangs, 0);
	own = frames_own_innermost(
		cJSON_GetObjectItemCaseSensitive(m2, "frames"));
	inner = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(m2, "frames"), 0);
	frame_where(own, where, sizeof(where));
	frame_where(inner, waits, sizeof(waits));
	describe(m1, line, sizeof(line));
	dx_evidence(d, "main thread, first look: %s", line);
	describe(m2, line, sizeof(line));
	dx_evidence(d, "main thread, %.1f s later: %s", window / 1000.0, line);
	if (tasks_verdict(d, bt1, bt2, window)) {
		rc = 0;
		goto out;
	}
	if (!same_frames(cJSON_GetObjectItemCaseSensitive(m1, "frames"),
			 cJSON_GetObjectItemCaseSensitive(m2, "frames")) ||
	    !same_frames(cJSON_GetObjectItemCaseSensitive(
				 frames_main_thread(mid), "frames"),
			 cJSON_GetObjectItemCaseSensitive(m2, "frames"))) {
		dx_verdict(d,
			   "not stuck: the main thread moved within %.1f s "
			   "(now in %s)",
			   window / 1000.0, where);
		dx_next(d, "probing -t %s diagnose slow", d->target);
		rc = 0;
		goto out;
	}
	if (hang && dx_num(hang, "stuck") > 0)
		dx_evidence(d,
			    "the hang watchdog has seen it stuck for %.0f s "
			    "(process.hangs id %.0f)",
			    dx_num(hang, "seconds"), dx_num(hang, "id"));
	else
		dx_evidence(d, "the hang watchdog has no hang in progress "
			       "(hang.timeout: probing config)");
	cJSON_ArrayForEach(th, cJSON_GetObjectItemCaseSensitive(bt2, "threads"))
	{
		if (th == m2)
			continue;
		describe(th, line, sizeof(line));
		dx_evidence(d, "thread %s: %s", dx_str(th, "name"), line);
	}
	if (hang && dx_num(hang, "stuck") > 0)
		dx_verdict(d, "the main thread is stuck in %s for %.0f s%s%s",
			   where, dx_num(hang, "seconds"),
			   own != inner ? ", waiting in " : "",
			   own != inner ? waits : "");
	else
		dx_verdict(d,
			   "the main thread has not moved for at least %.1f s: "
			   "in %s%s%s",
			   window / 1000.0, where,
			   own != inner ? ", waiting in " : "",
			   own != inner ? waits : "");
	dx_next(d, "probing -t %s backtrace --locals", d->target);
	if (hang)
		dx_next(d, "probing -t %s hangs", d->target);
	rc = 0;
out:
	cJSON_Delete(bt1);
	cJSON_Delete(mid);
	cJSON_Delete(bt2);
	cJSON_Delete(hangs);
	return rc;
}
