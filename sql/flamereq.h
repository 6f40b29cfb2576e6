/*
 * flamereq: probing/flamegraph's work over a store — the agent's own, or
 * a recording's (cli/recorded.c) — from the request's arguments to the
 * response's body: the samples of a time window with their stacks,
 * frames and threads (profile.*) rendered as folded, speedscope, chrome
 * or svg (common/flamegraph.h).  Arguments and body: docs/protocol.md.
 */
#ifndef FLAMEREQ_H
#define FLAMEREQ_H

#include <stddef.h>

#include <cJSON.h>

struct store;

/* What the request needs that the store does not say. */
struct flamereq_env {
	double since;	  /* the window's start when none is asked for */
	double now;	  /* negative times count back from it */
	int hz;		  /* the sampler's rate (0: not known) */
	const char *name; /* "train.py (pid 42)", for the title */
	int pid;
	const char *tasks_note; /* why samples may lack their asyncio task
				   now (the agent's), or NULL */
};

struct flamegraph;

/* The window args ask for: since? and until? in Unix seconds (negative:
 * seconds before env->now); since 0 or absent: env->since; until absent:
 * env->now.  0, or -EINVAL with err. */
int flamereq_window(const cJSON *args, const struct flamereq_env *env,
		    double *since, double *until, char *err, size_t errlen);

/* The samples of [since, until], every state, with their stacks, frames
 * and threads, into fg (probing/trace's).  0, or a negative error with
 * err. */
int flamereq_samples(struct store *st, double since, double until,
		     struct flamegraph *fg, char *err, size_t errlen);

/* Fills body; 0, or -EINVAL / -E2BIG / -ENOMEM / STORE_ESQL with err
 * (a sentence for the user). */
int flamereq_answer(struct store *st, const cJSON *args,
		    const struct flamereq_env *env, cJSON *body, char *err,
		    size_t errlen);

#endif
