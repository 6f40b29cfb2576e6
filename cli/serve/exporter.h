/*
 * exporter: `probing exporter`, the agents' metrics for Prometheus
 * (docs/metrics.md).
 *
 * An HTTP server (libmicrohttpd, one thread) answering GET /metrics: at
 * each scrape every agent on this machine (or the one target given) is
 * asked for probing/metrics, all at once, and the answers are rendered in
 * Prometheus's text format (render/promtext.h), each agent's samples
 * labelled with its pid and, in a torch.distributed job, rank,
 * local_rank and run_id (its environment's RANK, LOCAL_RANK and
 * TORCHELASTIC_RUN_ID).  Nothing is kept between scrapes; nothing
 * listens inside a target.  What it serves only reads: no token (a
 * scraper has none to give); beyond loopback it says that anyone who
 * reaches the port reads the figures.
 */
#ifndef CLI_EXPORTER_H
#define CLI_EXPORTER_H

#include <stddef.h>
#include <stdio.h>

struct exporter_opts {
	const char *listen; /* "HOST:PORT" */
	const char *target; /* one agent (-t), or NULL: every local one */
	int timeout_ms;	    /* each agent's time to answer */
};

/* Serves until SIGINT or SIGTERM; says where on say.  0, or -1 with the
 * reason in err. */
int exporter_serve(const struct exporter_opts *o, FILE *say, char *err,
		   size_t errlen);

#endif
