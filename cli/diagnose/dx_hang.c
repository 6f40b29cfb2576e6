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
 */
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

int dx_hang(struct dx *d)
{
	const char *bt_words[] = {"-f", "json", "backtrace", NULL};
	cJSON *bt1 = NULL, *mid = NULL, *bt2 = NULL, *hangs = NULL;
	const cJSON *m1, *m2, *th, *hang, *own, *inner;
	char where[512], waits[512], line[1200];
	int window = d->window_ms > 0 ? d->window_ms : WINDOW_MS, rc = -1;

	if (cluster(d))
		return 0;
	if (dx_json(d, &bt1, bt_words))
		goto out;
	usleep((useconds_t)window * 500);
	if (dx_json(d, &mid, bt_words))
		goto out;
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
