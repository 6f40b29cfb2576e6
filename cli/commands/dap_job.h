/*
 * dap_job: `probing dap` as the parent session of a whole job.
 *
 * An `attach` whose arguments carry "job": true is answered here, not by
 * the agent: the bridge becomes the job's parent session.  It asks a rank
 * of the job for its ranks (cluster.nodes, through a connection of its
 * own: the target may be any rank, or torchrun's launcher) and sends the
 * client one `startDebugging` reverse request per rank, a configuration
 * that attaches to that rank alone: "processId" for a rank on this host,
 * "host" and "port" for one elsewhere, named "rank N (HOST:PID)".  Every
 * DAP_JOB_LOOK_MS it looks again: a rank that is new (an elastic restart
 * gives new pids) gets its session too; a rank's own session ends when
 * its process does (the bridge of that session says so).
 *
 * The parent has no threads of its own: `threads` is answered with none,
 * the breakpoint requests and `configurationDone` with success (each
 * rank's session sets them in its rank); `pause`, `continue`,
 * `disconnect` and `terminate` act on the whole job: every rank's
 * session does it (dap_hub.h, dap_rank.h; a disconnect detaches each
 * rank's session from its rank, which runs on, and ends it); anything
 * else is refused, naming the rank sessions.  The parent's session ends
 * when the client closes its side.  Nothing the client sends goes to the agent once the
 * job's attach came.
 *
 * The ranks' sessions meet at the parent's hub (dap_hub.h: each rank's
 * configuration names it, "jobHub").  A rank's session that stops (a
 * breakpoint, a step, an exception: not a pause) pauses every other
 * rank's, unless the attach said "stopAll": false; the parent's console
 * says which rank stopped.
 */
#ifndef CLI_DAP_JOB_H
#define CLI_DAP_JOB_H

#include <poll.h>
#include <stddef.h>

#include "cJSON.h"
#include "cmd.h"

#define DAP_JOB_LOOK_MS 2000
#define DAP_JOB_RANKS_MAX 4096

struct dap_job;

/* Writes one message (a JSON body) to the client; 0 or -errno. */
typedef int (*dap_job_send_fn)(const char *body, size_t len);

/* Whether msg is an attach request asking for the whole job. */
int dap_job_wanted(const cJSON *msg);

/* Answers attach (msg) and starts the job's sessions: 0 with *out, or an
 * exit code after the attach was refused with why (no job there). */
int dap_job_start(struct cmd_ctx *ctx, const cJSON *msg, dap_job_send_fn send,
		  struct dap_job **out);

/* A message of the client's once the job's attach came: 0. */
int dap_job_handle(struct dap_job *j, const cJSON *msg);

/* The periodic look for ranks that are new (every DAP_JOB_LOOK_MS). */
void dap_job_look(struct dap_job *j);

/* Milliseconds until the next look is due (0: now). */
int dap_job_due_ms(const struct dap_job *j);

/* The descriptors of the job's hub to poll (dap_hub_pollfds()), and
 * what poll() said of them. */
int dap_job_pollfds(const struct dap_job *j, struct pollfd *p, int max);
void dap_job_ready(struct dap_job *j, const struct pollfd *p, int n);

void dap_job_free(struct dap_job *j);

#endif
