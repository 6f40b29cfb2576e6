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

/* Stdin -> agent.  Returns 0, 1 at end of input, or an exit code. */
static int stdin_to_agent(struct dap_client *c, struct dap_framer *fr,
			  const char *token)
{
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
	dap_framer_init(&fr, 0);
	for (int stdin_open = 1;;) {
		struct pollfd p[2] = {
			{.fd = stdin_open ? 0 : -1, .events = POLLIN},
			{.fd = dap_client_fd(ctx->client), .events = POLLIN},
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			rc = cli_error(CLI_EFAIL, "poll: %s", strerror(errno));
			break;
		}
		if (p[1].revents) {
			rc = agent_to_stdout(ctx->client);
			if (rc)
				break;
		}
		if (p[0].revents) {
			rc = stdin_to_agent(ctx->client, &fr,
					    has_token ? token : NULL);
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
	}
	dap_framer_release(&fr);
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
		"either side closes.  Sends nothing of its own: the editor "
		"sends initialize.\n"
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
