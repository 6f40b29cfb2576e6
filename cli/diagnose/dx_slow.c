/*
 * dx_slow: where the main thread's time goes.
 *
 *   1. The main thread sampled for the window (5 s), waiting included:
 *      how much of it runs, and where — the innermost functions, and the
 *      program's own frames the time is under.
 *   2. With torch in the stacks: module times (`perf --torch`, 3 s).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/dx.h"

#define WINDOW_MS 5000
#define TORCH_MS 3000
#define TOP 3

struct tally {
	char name[512];
	long n;
};

static void count(struct tally *t, int *nt, int cap, const char *name, long n)
{
	for (int i = 0; i < *nt; i++)
		if (!strcmp(t[i].name, name)) {
			t[i].n += n;
			return;
		}
	if (*nt < cap) {
		snprintf(t[*nt].name, sizeof(t[*nt].name), "%s", name);
		t[(*nt)++].n = n;
	}
}

static int most(const void *a, const void *b)
{
	const struct tally *x = a, *y = b;

	return (y->n > x->n) - (y->n < x->n);
}

#define TALLY_MAX 4096

int dx_slow(struct dx *d)
{
	int window = d->window_ms > 0 ? d->window_ms : WINDOW_MS, rc = -1;
	int nleaf = 0, nown = 0, torch = 0;
	struct tally *leaf = calloc(TALLY_MAX, sizeof(*leaf));
	struct tally *own = calloc(TALLY_MAX, sizeof(*own));
	struct dx_samples s;
	long running = 0, total;
	char name[512], top_own[600] = "", top_leaf[600] = "";

	if (!leaf || !own) {
		snprintf(d->err, sizeof(d->err), "out of memory");
		d->status = 1;
		goto out;
	}
	if (dx_sample_main(d, window, 1, &s))
		goto out;
	for (int i = 0; i < s.n; i++) {
		const struct dx_stack *st = &s.v[i];
		int own_at = -1;

		if (!st->idle)
			running += st->count;
		for (int k = 0; k < st->n; k++) {
			if (strstr(st->frames[k], "(torch/") ||
			    strstr(st->frames[k], "/torch/"))
				torch = 1;
			if (dx_frame_own(st->frames[k]))
				own_at = k; /* the innermost one */
		}
		if (st->n && !st->idle) {
			dx_frame_short(st->frames[st->n - 1], name,
				       sizeof(name));
			count(leaf, &nleaf, TALLY_MAX, name, st->count);
		}
		if (own_at >= 0 && !st->idle) {
			dx_frame_short(st->frames[own_at], name, sizeof(name));
			count(own, &nown, TALLY_MAX, name, st->count);
		}
	}
	if (!s.total) {
		dx_samples_free(&s);
		dx_verdict(d, "no samples of the main thread in %.1f s",
			   window / 1000.0);
		rc = 0;
		goto out;
	}
	total = s.total;
	dx_samples_free(&s);
	qsort(leaf, (size_t)nleaf, sizeof(*leaf), most);
	qsort(own, (size_t)nown, sizeof(*own), most);
	dx_evidence(d,
		    "main thread, %ld samples in %.1f s: running %.0f%%, "
		    "waiting %.0f%%",
		    total, window / 1000.0, 100.0 * running / total,
		    100.0 * (total - running) / total);
	for (int i = 0; i < nleaf && i < TOP; i++)
		dx_evidence(d, "innermost: %.0f%% in %s",
			    100.0 * leaf[i].n / total, leaf[i].name);
	for (int i = 0; i < nown && i < TOP; i++)
		dx_evidence(d, "program's own code: %.0f%% under %s",
			    100.0 * own[i].n / total, own[i].name);
	if (nown)
		snprintf(top_own, sizeof(top_own), "%.0f%% of it under %s",
			 100.0 * own[0].n / total, own[0].name);
	if (nleaf)
		snprintf(top_leaf, sizeof(top_leaf), "%.0f%% in %s",
			 100.0 * leaf[0].n / total, leaf[0].name);
	if (torch) {
		char dur[32];
		const char *words[] = {"perf", "--torch", dur, "-f", "json",
				       NULL};
		cJSON *rows = NULL, *row;
		int n = 0;

		snprintf(dur, sizeof(dur), "--duration=%dms", TORCH_MS);
		/* perf --torch's rows: [module, stage, clock, calls,
		 * total_ms, mean_ms, max_ms, max_allocated_mb] (module
		 * names may hold spaces: "Net [compiled]"). */
		if (!dx_json(d, &rows, words)) {
			cJSON_ArrayForEach(row, rows)
			{
				const cJSON *mod = cJSON_GetArrayItem(row, 0);
				const cJSON *st = cJSON_GetArrayItem(row, 1);
				const cJSON *clk = cJSON_GetArrayItem(row, 2);
				const cJSON *calls = cJSON_GetArrayItem(row, 3);
				const cJSON *ms = cJSON_GetArrayItem(row, 4);
				const cJSON *mean = cJSON_GetArrayItem(row, 5);

				if (n++ >= TOP)
					break;
				if (!cJSON_IsString(mod) || !cJSON_IsString(st) ||
				    !cJSON_IsNumber(calls) ||
				    !cJSON_IsNumber(ms) || !cJSON_IsNumber(mean))
					continue;
				dx_evidence(d,
					    "torch module %.255s %.31s%s: %.0f "
					    "calls, %.3f ms each (%.0f ms in "
					    "%.0f s)",
					    mod->valuestring, st->valuestring,
					    cJSON_IsString(clk) &&
						    !strcmp(clk->valuestring,
							    "cuda")
						    ? " (GPU time)"
						    : "",
					    calls->valuedouble,
					    mean->valuedouble, ms->valuedouble,
					    TORCH_MS / 1000.0);
			}
			cJSON_Delete(rows);
		} else {
			dx_evidence(d, "torch module times: %s", d->err);
			dx_forgive(d);
		}
		dx_next(d, "probing -t %s perf --torch --duration 10s",
			d->target);
	}
	if (running * 2 < total)
		dx_verdict(
			d,
			"the main thread mostly waits (%.0f%% of %.1f s)%s%s",
			100.0 * (total - running) / total, window / 1000.0,
			*top_own ? "; running, " : "", top_own);
	else
		dx_verdict(d, "the main thread runs %.0f%% of the time: %s%s%s",
			   100.0 * running / total,
			   *top_own ? top_own : top_leaf,
			   *top_own && *top_leaf ? "; innermost " : "",
			   *top_own ? top_leaf : "");
	dx_next(d, "probing -t %s flamegraph -d 30s -o profile.svg", d->target);
	rc = 0;
out:
	free(leaf);
	free(own);
	return rc;
}
