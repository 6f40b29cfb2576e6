/*
 * webroutes: what the web page may ask `probing web` for, each one a
 * command of this CLI with its words built from checked parameters (the
 * ops.h parts), answered with what it printed.
 *
 * No route runs code of the page's choosing in the target or changes its
 * settings.  A route that acts — costs the target work of the caller's
 * choosing, or changes its state: SQL, sampling, tracing, the playbooks,
 * locals' reprs, the sampler's start and stop — is POST only, and POST
 * needs the token in a header that no other page can send (web.h); GET
 * routes only read.
 */
#ifndef CLI_WEBROUTES_H
#define CLI_WEBROUTES_H

#include "serve/ops.h"

struct web_route {
	const char *path; /* "/api/backtrace" */
	int post;	  /* 1: POST only (it acts: see above) */
	int stored;	  /* POST: the answer is kept and the POST answered
			   * {"url": ...}, where a GET (an iframe's src)
			   * reads it, without acting again */
	const char *type; /* the answer's Content-Type */
	const struct op_param *params;
	int timeout_ms; /* past the duration parameter, if any */
	int (*build)(const cJSON *args, struct op_words *w, char *err,
		     size_t errlen);
};

/* The route for path, or NULL. */
const struct web_route *web_route_find(const char *path);

#endif
