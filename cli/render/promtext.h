/*
 * promtext: the agents' probing/metrics answers in Prometheus's text
 * exposition format (version 0.0.4), as `probing exporter` serves them.
 *
 * Every family once, in the order first seen, with its HELP and TYPE,
 * then each agent's samples, the agent's labels (pid, rank, ...) before
 * the sample's own.  probing_up says, per agent, whether it answered.
 * Names and label names are Prometheus's ([a-zA-Z_:][a-zA-Z0-9_:]*, or
 * the sample is left out); label values and HELP are escaped; values are
 * printed as Go's strconv would read them (NaN, +Inf, -Inf).
 *
 * Pure: no I/O, no threads.  The output is capped at PROMTEXT_MAX.
 */
#ifndef CLI_PROMTEXT_H
#define CLI_PROMTEXT_H

#include <stddef.h>

#include <cJSON.h>

#define PROMTEXT_MAX (64u << 20)

struct prom_agent {
	const char *const *labels; /* name, value, name, value, ..., NULL */
	const cJSON *metrics;	   /* probing/metrics' "metrics"; NULL: no
				      answer */
};

/* The text for n agents; scrape_s, the time the scrape took, is said as
 * probing_exporter_scrape_seconds.  A heap string (its length in *len),
 * or NULL when out of memory or past the cap. */
char *promtext_render(const struct prom_agent *agents, size_t n,
		      double scrape_s, size_t *len);

#endif
