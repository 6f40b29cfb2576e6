/*
 * sampling: the sampler run for a while on a client's behalf, as
 * `probing flamegraph` and `probing trace` record (probing/profile start,
 * status, stop): started for the duration (with it as the agent's lease,
 * so that it stops by itself if the client dies), or — when it already
 * runs (`probing perf --cc`, another client) — borrowed: its samples of
 * the coming duration are used and it is left running.  A progress line
 * on stderr (a terminal only) counts down; Ctrl-C ends early.
 *
 *   struct sampling_opts so = {.duration_ms = 10000};
 *   double since, until;
 *   rc = sampling_record(ctx, &so, &since, &until);
 *   ... probing/flamegraph {since, until} ...
 */
#ifndef CLI_SAMPLING_H
#define CLI_SAMPLING_H

#include "cmd.h"

struct sampling_opts {
	int duration_ms;
	int hz;	    /* 0: the agent's profile.hz */
	int native; /* native stacks too */
};

/* Records for o->duration_ms; *since and *until bound the samples taken
 * (Unix seconds, the agent's clock).  CLI_OK or an exit code after
 * saying why. */
int sampling_record(struct cmd_ctx *ctx, const struct sampling_opts *o,
		    double *since, double *until);

#endif
