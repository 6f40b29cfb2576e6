/*
 * cmd_dap: a stdio <-> agent bridge, for editors that start a debug
 * adapter as a program (VS Code's "executable" adapters).
 *
 * Messages are copied whole in both directions, framed by Content-Length
 * (a dap_framer on stdin, the client's own framer on the socket); nothing
 * is added, not even `initialize`: the editor speaks for itself.  One
 * exception: when there is a token for the target (target.h), it goes
 * into the editor's `initialize` and `attach` requests as
 * arguments.probingToken, since an editor cannot know of it (VS Code
 * sends its own initialize).  Ends when either side closes.
 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "dap_frame.h"
#include "dap_hub.h"
#include "dap_job.h"
#include "dap_rank.h"
#include "dap_token.h"
#include "target.h"

#define BRIDGE_CHUNK (64u << 10)

/* Writes all of data to fd.  Returns 0 or -errno. */
static int write_all(int fd, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Frames body and writes it to fd. */
static int write_frame(int fd, const char *body, size_t len)
{
	char head[64];
	int n = dap_frame_header(head, sizeof(head), len);
	int rc = write_all(fd, head, (size_t)n);

	return rc < 0 ? rc : write_all(fd, body, len);
}

static int send_stdout(const char *body, size_t len)
{
	return write_frame(1, body, len);
}

/* A line of our own in the editor's Debug Console (category: DAP's
 * "console", "important", ...). */
static void say_console(const char *category, const char *text)
{
	cJSON *m = cJSON_CreateObject(), *b = cJSON_AddObjectToObject(m, "body");
	char *body;

	cJSON_AddNumberToObject(m, "seq", 0);
	cJSON_AddStringToObject(m, "type", "event");
	cJSON_AddStringToObject(m, "event", "output");
	cJSON_AddStringToObject(b, "category", category);
	cJSON_AddStringToObject(b, "output", text);
	body = cJSON_PrintUnformatted(m);
	if (body)
		send_stdout(body, strlen(body));
	free(body);
	cJSON_Delete(m);
}

/* The agent went away while the editor still listens (the process
 * exited, or was killed): said in the editor's console, and the session
 * ends there as well. */
static void agent_gone(const char *target)
{
	static const char ended[] =
		"{\"seq\":0,\"type\":\"event\",\"event\":\"terminated\"}";
	char text[300];

	snprintf(text, sizeof(text),
		 "probing: the agent of %s closed the connection (its process "
		 "exited?)\n",
		 target ? target : "the target");
	say_console("important", text);
	send_stdout(ended, sizeof(ended) - 1);
}

/* This session is a job's rank (dap_rank.h): its link to the job's. */
static struct dap_rank *rank_link;
static struct dap_client *agent;

static int send_agent(const char *body, size_t len)
{
	char head[64];
	int n = dap_frame_header(head, sizeof(head), len);
	int rc;

	if (!agent)
		return -ENOTCONN;
	rc = dap_client_write_raw(agent, head, (size_t)n);
	return rc ? rc : dap_client_write_raw(agent, body, len);
}

/* Agent -> stdout: every whole message already here.  Returns 0, 1 when
 * the agent closed, or an exit code after saying why. */
static int agent_to_stdout(struct dap_client *c)
{
	char err[256];

	for (;;) {
		char *raw = NULL;
		size_t len = 0;
		int rc = dap_client_read(c, 0, NULL, &raw, &len, err,
					 sizeof(err));

		if (rc == DAP_ECLOSED)
			return 1;
		if (rc < 0)
			return cli_error(CLI_ETIMEOUT, "from the agent: %s",
					 err);
		if (!raw)
			return 0;
		if (rank_link &&
		    dap_rank_from_agent(rank_link, raw, len, send_stdout)) {
			free(raw); /* the answer to a request of ours */
			continue;
		}
		rc = write_frame(1, raw, len);
		free(raw);
		if (rc == -EPIPE)
			return 1;
		if (rc < 0)
			return cli_error(CLI_EFAIL, "writing stdout: %s",
					 strerror(-rc));
	}
}

/*
 * When token is set and body is an initialize or attach request without
 * one, returns a new body with arguments.probingToken added (caller
 * frees), else NULL: the message goes as it is.
 */
static char *with_token(const char *body, size_t len, const char *token)
{
	cJSON *root, *cmd, *args;
	char *out = NULL;

	if (!token)
		return NULL;
	root = cJSON_ParseWithLength(body, len);
	cmd = root ? cJSON_GetObjectItemCaseSensitive(root, "command") : NULL;
	if (!cJSON_IsString(cmd) || (strcmp(cmd->valuestring, "initialize") &&
				     strcmp(cmd->valuestring, "attach")))
		goto done;
	args = cJSON_GetObjectItemCaseSensitive(root, "arguments");
	if (!args || cJSON_IsNull(args)) {
		cJSON_DeleteItemFromObjectCaseSensitive(root, "arguments");
		args = cJSON_AddObjectToObject(root, "arguments");
	}
	if (!cJSON_IsObject(args) ||
	    cJSON_GetObjectItemCaseSensitive(args, DAP_TOKEN_ARG))
		goto done;
	cJSON_AddStringToObject(args, DAP_TOKEN_ARG, token);
	out = cJSON_PrintUnformatted(root);
done:
	cJSON_Delete(root);
	return out;
}

/* The job's parent session (dap_job.h): an attach with "job": true
 * makes it, and from then on the client's messages are its. */
static struct dap_job *job;

/* A message of the client's for the job (1: it ends the session), or
 * -1: one for the agent. */
static int for_job(struct cmd_ctx *ctx, const char *body, size_t len)
{
	cJSON *msg;
	int rc = -1;

	if (!job && !memmem(body, len, "\"job\"", 5))
		return -1; /* the common case: no parse */
	msg = cJSON_ParseWithLength(body, len);
	if (job)
		rc = msg ? dap_job_handle(job, msg) : 0;
	else if (msg && dap_job_wanted(msg)) {
		/* Refused (no job there): said in the attach's response. */
		dap_job_start(ctx, msg, send_stdout, &job);
		rc = 0;
	}
	cJSON_Delete(msg);
	return rc;
}

/* The client asked the agent to end the session: its closing the
 * connection then is no news. */
static int disconnecting;

static void note_disconnect(const char *body, size_t len)
{
	cJSON *msg, *cmd;

	if (!memmem(body, len, "disconnect", 10) &&
	    !memmem(body, len, "terminate", 9))
		return;
	msg = cJSON_ParseWithLength(body, len);
	cmd = cJSON_GetObjectItemCaseSensitive(msg, "command");
	if (cJSON_IsString(cmd) && (!strcmp(cmd->valuestring, "disconnect") ||
				    !strcmp(cmd->valuestring, "terminate")))
		disconnecting = 1;
	cJSON_Delete(msg);
}

/* Stdin -> agent.  Returns 0, 1 at end of input, or an exit code. */
static int stdin_to_agent(struct cmd_ctx *ctx, struct dap_framer *fr,
			  const char *token)
{
	struct dap_client *c = ctx->client;
	char buf[BRIDGE_CHUNK], head[64];
	ssize_t n = read(0, buf, sizeof(buf));
	int rc;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n < 0)
		return cli_error(CLI_EFAIL, "reading stdin: %s",
				 strerror(errno));
	if (n == 0)
		return 1;
	rc = dap_framer_feed(fr, buf, (size_t)n);
	for (;;) {
		char *body = NULL;
		size_t len = 0;
		int k = dap_framer_next(fr, &body, &len);

		if (k == 0)
			break;
		if (k < 0)
			return cli_error(CLI_EUSAGE,
					 "bad DAP frame on stdin: "
					 "%s",
					 dap_strerror(k));
		int mine = for_job(ctx, body, len);

		if (mine >= 0) {
			free(body);
			if (mine == 1)
				return 1;
			continue;
		}
		note_disconnect(body, len);
		if (!rank_link) {
			char err[300], text[400];

			if (dap_rank_join(body, len, &rank_link, err,
					  sizeof(err)) < 0) {
				snprintf(text, sizeof(text),
					 "probing: %s: a stop here will not "
					 "pause the job's other ranks\n",
					 err);
				say_console("console", text);
			}
		}
		char *tok = with_token(body, len, token);
		if (tok) {
			free(body);
			body = tok;
			len = strlen(tok);
		}
		n = dap_frame_header(head, sizeof(head), len);
		k = dap_client_write_raw(c, head, (size_t)n);
		if (k == 0)
			k = dap_client_write_raw(c, body, len);
		free(body);
		if (k < 0)
			return k == DAP_ECLOSED
				       ? 1
				       : cli_error(CLI_ETIMEOUT,
						   "writing to the agent: %s",
						   dap_strerror(k));
	}
	if (rc < 0)
		return cli_error(CLI_EUSAGE, "bad DAP frame on stdin: %s",
				 dap_strerror(rc));
	return 0;
}

static int cmd_dap_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct dap_framer fr;
	struct dap_addr addr;
	char token[DAP_TOKEN_MAX + 1], src[1024], err[512];
	int rc, has_token = 0;

	(void)argv;
	if (argc > 1)
		return cli_usage_error(&cmd_dap_entry,
				       "dap takes no arguments");
	rc = cli_connect(ctx, 0);
	if (rc != CLI_OK)
		return rc;
	if (cli_target_resolve(ctx->target, &addr, err, sizeof(err)) == CLI_OK)
		has_token = cli_target_token(&addr, token, sizeof(token), src,
					     sizeof(src));
	signal(SIGPIPE, SIG_IGN);
	agent = ctx->client;
	dap_framer_init(&fr, 0);
	for (int stdin_open = 1, agent_open = 1;;) {
		/* stdin, the agent, this rank's link to its job's session,
		 * then the job's hub (a job's session). */
		struct pollfd p[3 + 1 + DAP_HUB_PEERS_MAX] = {
			{.fd = stdin_open ? 0 : -1, .events = POLLIN},
			{.fd = agent_open ? dap_client_fd(ctx->client) : -1,
			 .events = POLLIN},
			{.fd = rank_link ? dap_rank_fd(rank_link) : -1,
			 .events = POLLIN},
		};
		int nhub = job ? dap_job_pollfds(job, p + 3,
						 DAP_HUB_PEERS_MAX + 1)
			       : 0;
		int ready = poll(p, 3 + (nfds_t)nhub,
				 job ? dap_job_due_ms(job) : -1);

		if (ready < 0) {
			if (errno == EINTR)
				continue;
			rc = cli_error(CLI_EFAIL, "poll: %s", strerror(errno));
			break;
		}
		if (job && dap_job_due_ms(job) == 0)
			dap_job_look(job);
		if (ready == 0)
			continue;
		if (job && nhub)
			dap_job_ready(job, p + 3, nhub);
		if (p[2].revents && rank_link) {
			int said = dap_rank_heard(rank_link, send_agent);

			if (said == 1)
				disconnecting = 1; /* the job's disconnect */
			if (said < 0) {
				/* The job's session ended: this rank's goes
				 * on. */
				dap_rank_free(rank_link);
				rank_link = NULL;
			}
		}
		if (p[1].revents) {
			rc = agent_to_stdout(ctx->client);
			if (rc == 1 && job) {
				/* The rank bridged went: the job's session
				 * goes on with the others. */
				agent_open = 0;
				rc = 0;
			} else if (rc) {
				if (rc == 1 && stdin_open && !disconnecting)
					agent_gone(ctx->target);
				break;
			}
		}
		if (p[0].revents) {
			rc = stdin_to_agent(ctx, &fr,
					    has_token ? token : NULL);
			if (rc == 1 && job) {
				/* The job's session ended (disconnect, or the
				 * editor went): nothing of its is in flight. */
				rc = 0;
				break;
			}
			if (rc == 1) {
				/* End of input: half-close, so the agent answers
				 * what is in flight and then closes. */
				shutdown(dap_client_fd(ctx->client), SHUT_WR);
				stdin_open = 0;
				rc = 0;
				continue;
			}
			if (rc)
				break;
		}
		if (job && agent_open) {
			/* The job's session speaks to no agent (it asks its
			 * rank on a connection of its own): one connection
			 * less on the target.  (No rank's link either: a
			 * session is a job's or a rank's.) */
			cli_close(ctx);
			agent = NULL;
			agent_open = 0;
			dap_rank_free(rank_link);
			rank_link = NULL;
		}
	}
	dap_framer_release(&fr);
	dap_job_free(job);
	job = NULL;
	dap_rank_free(rank_link);
	rank_link = NULL;
	return rc == 1 ? CLI_OK : rc;
}

const struct cmd_entry cmd_dap_entry = {
	.name = "dap",
	.alias = NULL,
	.usage = "",
	.summary = "Bridge DAP between stdio and the agent, for editors",
	.help = "Connects to the agent, then copies DAP messages "
		"(Content-Length framed)\n"
		"from stdin to the agent and from the agent to stdout, "
		"unchanged, until\n"
		"either side closes.  Sends the agent nothing of its own: the "
		"editor sends\n"
		"initialize.  A whole job (docs/debugging.md): an attach with "
		"\"job\": true is\n"
		"answered here, this becoming the job's parent session (a "
		"startDebugging\n"
		"request per rank); a rank's session (its attach names the "
		"parent's jobHub)\n"
		"sends its agent the pause and continue the parent asks for.\n"
		"When there is a token for the target (--token, "
		"PROBING_TOKEN, or for HOST:PORT\n"
		"the token file), it is added to the editor's initialize and "
		"attach requests\n"
		"(arguments.probingToken).\n"
		"Errors go to stderr only.  A malformed frame on stdin ends "
		"the bridge\n"
		"with exit code 2.\n",
	.flags = CMD_TARGET | CMD_NOTABLE,
	.exec = cmd_dap_exec,
};
