/*
 * dx_loader: does the training loop wait for its data?
 *
 *   The main thread sampled for the window (5 s), waiting included: the
 *   share of its time inside torch's DataLoader (torch/utils/data/),
 *   split into loading on this thread (the dataset's code runs here:
 *   num_workers=0) and waiting for worker processes; and the dataset's
 *   own frame the loading time is in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose/dx.h"

#define WINDOW_MS 5000
#define BOUND 0.3 /* a share of the time in the loader called a bottleneck */

int dx_loader(struct dx *d)
{
	int window = d->window_ms > 0 ? d->window_ms : WINDOW_MS;
	long in_loader = 0, waiting = 0, workers = 0, best = 0;
	char own[600] = "", name[600];
	struct dx_samples s;
	struct {
		char name[600];
		long n;
	} where[64];
	int nwhere = 0;
	double share;

	if (dx_sample_main(d, window, 1, &s))
		return -1;
	for (int i = 0; i < s.n; i++) {
		const struct dx_stack *st = &s.v[i];
		int first = -1, own_at = -1;

		for (int k = 0; k < st->n; k++) {
			if (first < 0 &&
			    strstr(st->frames[k], "torch/utils/data/"))
				first = k;
			if (strstr(st->frames[k],
				   "_MultiProcessingDataLoaderIter"))
				workers += st->count;
			if (first >= 0 && dx_frame_own(st->frames[k]))
				own_at = k; /* the dataset's: inside the loader
					     */
		}
		if (first < 0)
			continue;
		in_loader += st->count;
		if (st->idle)
			waiting += st->count;
		if (own_at < 0)
			continue;
		dx_frame_short(st->frames[own_at], name, sizeof(name));
		for (int w = 0; w <= nwhere && w < 64; w++) {
			if (w == nwhere) {
				snprintf(where[w].name, sizeof(where[w].name),
					 "%s", name);
				where[w].n = 0;
				nwhere++;
			}
			if (!strcmp(where[w].name, name)) {
				where[w].n += st->count;
				if (where[w].n > best) {
					best = where[w].n;
					snprintf(own, sizeof(own), "%s", name);
				}
				break;
			}
		}
	}
	if (!s.total) {
		dx_samples_free(&s);
		dx_verdict(d, "no samples of the main thread in %.1f s",
			   window / 1000.0);
		return 0;
	}
	share = (double)in_loader / (double)s.total;
	dx_evidence(d,
		    "main thread, %ld samples in %.1f s: %.0f%% inside the "
		    "DataLoader (%.0f%% of it waiting, %.0f%% running)",
		    s.total, window / 1000.0, 100 * share,
		    in_loader ? 100.0 * waiting / in_loader : 0,
		    in_loader ? 100.0 * (in_loader - waiting) / in_loader : 0);
	if (*own)
		dx_evidence(d, "the dataset's code: %.0f%% of the time in %s",
			    100.0 * best / s.total, own);
	if (in_loader)
		dx_evidence(d, "%s",
			    workers ? "batches come from worker processes "
				      "(_MultiProcessingDataLoaderIter)"
				    : "batches are made on the main thread "
				      "(num_workers=0)");
	dx_samples_free(&s);
	if (!in_loader)
		dx_verdict(d,
			   "no DataLoader on the main thread's stack in %.1f s",
			   window / 1000.0);
	else if (share < BOUND)
		dx_verdict(
			d,
			"the DataLoader is not the bottleneck: %.0f%% of the "
			"main thread's time",
			100 * share);
	else if (workers)
		dx_verdict(d,
			   "the training loop waits for data %.0f%% of the "
			   "time: its DataLoader workers do not keep up%s%s",
			   100 * share, *own ? "; in the dataset: " : "", own);
	else
		dx_verdict(
			d,
			"the training loop spends %.0f%% of its time loading "
			"data on the main thread (num_workers=0)%s%s",
			100 * share, *own ? ", in " : "", own);
	dx_next(d, "probing -t %s flamegraph -d 30s -o loader.svg", d->target);
	return 0;
}
