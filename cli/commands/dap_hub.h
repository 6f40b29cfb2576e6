/*
 * dap_hub: how the ranks' debug sessions of one job hear of each other.
 *
 * Each rank of a job has its own session (its own `probing dap`, started
 * by the editor on the job's startDebugging request, dap_job.h); a stop
 * on one rank is news to the others only through the job's parent
 * session.  The parent listens on an abstract unix socket
 * (@probing-job-PID-N), named in every rank's configuration
 * ("jobHub"); each rank's bridge joins it and says, a line each:
 *
 *   rank N                  who it is (first)
 *   stopped REASON          its agent sent `stopped` (DAP's reason)
 *
 * and the hub tells a rank's bridge, a line each:
 *
 *   pause | continue |      send that request to your agent (as the
 *   disconnect              bridge's own: its response is not the
 *                           editor's; after a disconnect, the rank's
 *                           session ends: `terminated` to the editor)
 *
 * Only processes of this user are heard (SO_PEERCRED, both ways).
 * Lines are at most DAP_HUB_LINE_MAX bytes; a peer that sends a longer
 * one, or more than DAP_HUB_PEERS_MAX peers, is hung up on.  Every
 * socket is non-blocking (a rank's connect() too); a line that cannot be
 * written whole at once (a peer that does not read) hangs that peer up.
 * One dap_hub_ready() takes at most 32 connections and 32 lines of each
 * peer; where accept() fails for want of descriptors, the listener is
 * left out of the poll for a second, or until a peer goes (the caller
 * polls with a timeout to come back to it).
 */
#ifndef CLI_DAP_HUB_H
#define CLI_DAP_HUB_H

#include <poll.h>
#include <stddef.h>

#define DAP_HUB_LINE_MAX 128
#define DAP_HUB_PEERS_MAX 1024

struct dap_hub;

/* What a rank said: rank is what its "rank N" line said (-1 before).
 * It may call dap_hub_tell(), never dap_hub_free(). */
typedef void (*dap_hub_heard_fn)(void *arg, long long rank,
				 const char *line);

/* Listens: 0 with *out (its name in name, "@..."), or -errno. */
int dap_hub_new(struct dap_hub **out, char *name, size_t namelen);

/* The descriptors to poll (the listener and each peer) into p[0..max):
 * how many.  dap_hub_ready() takes the same array back after poll(). */
int dap_hub_pollfds(const struct dap_hub *h, struct pollfd *p, int max);

/* Accepts, reads and hangs up as poll said; heard() for each whole
 * line. */
void dap_hub_ready(struct dap_hub *h, const struct pollfd *p, int n,
		   dap_hub_heard_fn heard, void *arg);

/* Sends line (without its newline) to every rank but except (-1: to
 * every one): how many got it.  A peer it cannot write to is hung up
 * (reaped by the next dap_hub_ready(): calls between dap_hub_pollfds()
 * and dap_hub_ready() are allowed). */
int dap_hub_tell(struct dap_hub *h, const char *line, long long except);

/* The ranks that said who they are. */
int dap_hub_ranks(const struct dap_hub *h);

void dap_hub_free(struct dap_hub *h);

/* A rank's side: connects to the hub named name ("@...") and says
 * "rank N".  The descriptor (non-blocking; the caller's, to close), or
 * -errno (-EPERM: the hub is another user's; -EAGAIN: its backlog is
 * full). */
int dap_hub_join(const char *name, long long rank);

/* A rank's side: one line to the hub (without its newline): 0 or
 * -errno. */
int dap_hub_say(int fd, const char *line);

/* A rank's side: the next whole line from the hub into line (its
 * newline dropped): 1, 0 when none is whole yet, -1 when the hub has
 * gone (or sent a line too long).  buf (DAP_HUB_LINE_MAX bytes) and
 * *have keep what is read between calls. */
int dap_hub_hear(int fd, char *buf, size_t *have, char *line,
		 size_t linelen);

#endif
