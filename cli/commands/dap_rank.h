/*
 * dap_rank: the bridge of one rank's session in a job (`probing dap`
 * started for a configuration of the job's startDebugging, dap_job.h).
 *
 * Its attach carries "jobHub" (the parent's hub, dap_hub.h) and "rank":
 * the bridge joins the hub, tells it each `stopped` of its agent, and
 * does what the hub asks (pause, continue) with requests of its own to
 * the agent.  Those requests' seq start at DAP_RANK_SEQ_FIRST, far above
 * any editor's; their responses (request_seq from DAP_RANK_SEQ_FIRST to
 * the last sent, while any is unanswered) are the bridge's, not passed
 * on, and no other message is parsed for them.  The
 * editor hears of the change as of any: a `stopped` event from the agent
 * after a pause, and a `continued` event (the bridge's, as DAP's
 * continue response has none) after a continue.
 *
 * Nothing of this runs for a session that is not a job's rank.
 */
#ifndef CLI_DAP_RANK_H
#define CLI_DAP_RANK_H

#include <stddef.h>

#define DAP_RANK_SEQ_FIRST 2000000000LL

struct dap_rank;

/* Writes one message (a JSON body): 0 or -errno. */
typedef int (*dap_rank_send_fn)(const char *body, size_t len);

/* When body (an editor's message) is an attach of a job's rank, joins
 * the hub it names: 0 with *out (the caller's: dap_rank_free()), 1 when
 * it is no such attach (*out NULL), or -errno with why in err (the
 * session goes on alone). */
int dap_rank_join(const char *body, size_t len, struct dap_rank **out,
		  char *err, size_t errlen);

/* The hub's descriptor, to poll for reading. */
int dap_rank_fd(const struct dap_rank *r);

/* A message of the agent's on its way to the editor: 1 when it is a
 * response to the bridge's own request (not passed on; a continue's
 * success is told with a `continued` event through to_editor), else 0
 * (a `stopped` event is told to the hub as well). */
int dap_rank_from_agent(struct dap_rank *r, const char *body, size_t len,
			dap_rank_send_fn to_editor);

/* The hub's descriptor is readable: what it asks is sent to the agent
 * through to_agent.  0; 1 when it asked for a disconnect (the agent's
 * closing the connection after it is no news; the editor is told
 * `terminated` when the agent answered); or -1 when the hub has gone
 * (the session goes on alone: dap_rank_free()). */
int dap_rank_heard(struct dap_rank *r, dap_rank_send_fn to_agent);

void dap_rank_free(struct dap_rank *r);

#endif
