/*
 * webroutes: what the web page may ask `probing web` for, each one a
 * command of this CLI with its words built from checked parameters (the
 * ops.h parts), answered with what it printed.
 *
 * Nothing here writes to a target but starting and stopping its sampler
 * (POST); no route runs code in the target or changes its settings.
 */
#ifndef CLI_WEBROUTES_H
#define CLI_WEBROUTES_H

#include "serve/ops.h"

struct web_route {
	const char *path; /* "/api/backtrace" */
	int post;	  /* 1: POST only (changes the target's state) */
	const char *type; /* the answer's Content-Type */
	const struct op_param *params;
	int timeout_ms; /* past the duration parameter, if any */
	int (*build)(const cJSON *args, struct op_words *w, char *err,
		     size_t errlen);
};

/* The route for path, or NULL. */
const struct web_route *web_route_find(const char *path);

#endif
