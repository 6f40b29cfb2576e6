/*
 * target: see target.h.
 */
#include "target.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "dap_frame.h"
#include "dap_token.h"

static const char *given_token; /* --token or PROBING_TOKEN */

static int proc_exists(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) == 0;
}

int cli_target_cmdline(pid_t pid, char *out, size_t outlen, size_t max)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	if (outlen < 2)
		return -EINVAL;
	strcpy(out, "?");
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	buf[n] = '\0';
	if (n == 0) {
		/* A kernel thread or a zombie: the short name. */
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0)
			return -errno;
		while (n > 0 && buf[n - 1] == '\n')
			n--;
		buf[n] = '\0';
		if (n > 0 && (size_t)n + 2 < sizeof(buf)) {
			memmove(buf + 1, buf, (size_t)n);
			buf[0] = '[';
			buf[n + 1] = ']';
			buf[n + 2] = '\0';
		}
	}
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	if (max > outlen - 1)
		max = outlen - 1;
	if (max < sizeof(buf) && strlen(buf) > max) {
		/* Cut at a UTF-8 boundary. */
		size_t cut = max > 3 ? max - 3 : 0;
		while (cut > 0 && ((unsigned char)buf[cut] & 0xC0) == 0x80)
			cut--;
		memcpy(buf + cut, "...", 4);
		buf[max] = '\0';
	}
	memcpy(out, buf, strlen(buf) + 1);
	return 0;
}

int cli_target_resolve(const char *text, struct dap_addr *addr, char *err,
		       size_t errlen)
{
	char why[256] = "";

	if (!text || !*text) {
		snprintf(err, errlen, "empty target");
		return CLI_EUSAGE;
	}
	if (dap_addr_parse(text, addr, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "bad target '%s': %s", text,
			 why[0] ? why
				: "give a pid, HOST:PORT, @name or a socket "
				  "path");
		return CLI_EUSAGE;
	}
	if (addr->pid > 0 && !proc_exists(addr->pid)) {
		snprintf(err, errlen, "no such process: %d", (int)addr->pid);
		return CLI_ENOPROC;
	}
	return CLI_OK;
}

/* Why a connection to a live pid's socket went nowhere. */
static int no_agent(pid_t pid, char *err, size_t errlen)
{
	char cmd[CLI_CMDLINE_MAX + 8];

	if (!proc_exists(pid)) {
		snprintf(err, errlen, "no such process: %d", (int)pid);
		return CLI_ENOPROC;
	}
	cli_target_cmdline(pid, cmd, sizeof(cmd), CLI_CMDLINE_MAX);
	snprintf(err, errlen,
		 "process %d (%s) has no Probing agent; start it with "
		 "PROBING=1, probing.init(), or `probing -t %d inject`",
		 (int)pid, cmd, (int)pid);
	return CLI_ENOAGENT;
}

static int connect_failed(const struct dap_addr *addr, int rc, int timeout_ms,
			  const char *why, char *err, size_t errlen)
{
	char where[DAP_ADDR_TEXT_MAX + 16];

	dap_addr_format(addr, where, sizeof(where));
	if (addr->pid > 0 &&
	    (rc == DAP_ECONNREFUSED || rc == -ECONNREFUSED || rc == -ENOENT))
		return no_agent(addr->pid, err, errlen);
	if (rc == DAP_ETIMEDOUT || rc == -ETIMEDOUT) {
		snprintf(err, errlen,
			 "agent at %s not answering (no connection within "
			 "%d ms)",
			 where, timeout_ms);
		return CLI_ETIMEOUT;
	}
	if (rc == DAP_ECONNREFUSED || rc == -ECONNREFUSED) {
		snprintf(err, errlen,
			 "connection refused: nothing listens at %s", where);
		return CLI_EREFUSED;
	}
	if (rc == -ENOENT) {
		snprintf(err, errlen, "no socket at %s", where);
		return CLI_EREFUSED;
	}
	if (rc == DAP_EPEER) {
		snprintf(err, errlen, "%s", why);
		return CLI_EPEER;
	}
	snprintf(err, errlen, "cannot connect to %s: %s", where,
		 why && *why ? why : dap_strerror(rc));
	return CLI_EREFUSED;
}

/* The agent hung up on initialize: most likely SO_PEERCRED said no. */
static int closed_on_init(const struct dap_addr *addr, char *err, size_t errlen)
{
	char path[64], where[DAP_ADDR_TEXT_MAX + 16];
	struct stat st;

	dap_addr_format(addr, where, sizeof(where));
	snprintf(path, sizeof(path), "/proc/%d", (int)addr->pid);
	if (addr->pid > 0 && geteuid() != 0 && stat(path, &st) == 0 &&
	    st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "the agent of process %d closed the connection: it "
			 "belongs to uid %d and answers only that user or root",
			 (int)addr->pid, (int)st.st_uid);
	} else {
		snprintf(err, errlen,
			 "the agent at %s closed the connection without "
			 "answering",
			 where);
	}
	return CLI_ETIMEOUT;
}

int cli_target_lost(int dap_err, const char *what, int timeout_ms, char *err,
		    size_t errlen)
{
	if (dap_err == DAP_ETIMEDOUT)
		snprintf(err, errlen,
			 "agent not answering (no reply to %s in %d ms)", what,
			 timeout_ms);
	else if (dap_err == DAP_ECLOSED)
		snprintf(err, errlen,
			 "the agent closed the connection during %s", what);
	else if (dap_err <= DAP_EFRAME && dap_err >= DAP_EPROTO)
		snprintf(err, errlen,
			 "the reply to %s is not valid DAP (%s): is this a "
			 "Probing agent?",
			 what, dap_strerror(dap_err));
	else
		snprintf(err, errlen, "lost the agent during %s: %s", what,
			 dap_strerror(dap_err));
	return CLI_ETIMEOUT;
}

void cli_target_set_token(const char *token)
{
	given_token = token && *token ? token : NULL;
}

const char *cli_target_given_token(void)
{
	return given_token;
}

int cli_target_token(const struct dap_addr *addr, char *out, size_t outlen,
		     char *src, size_t srclen)
{
	char path[DAP_TOKEN_PATH_MAX], why[1024];
	int rc;

	if (given_token && !strcmp(given_token, CLI_TOKEN_NONE)) {
		snprintf(src, srclen,
			 "none sent: --token or PROBING_TOKEN "
			 "is " CLI_TOKEN_NONE);
		return 0;
	}
	if (given_token) {
		snprintf(out, outlen, "%s", given_token);
		snprintf(src, srclen, "--token or PROBING_TOKEN");
		return 1;
	}
	snprintf(src, srclen, "none given");
	if (addr->kind != DAP_ADDR_TCP)
		return 0;
	rc = dap_token_find(out, outlen, path, sizeof(path), why, sizeof(why));
	if (rc == 0) {
		snprintf(src, srclen, "%s", path);
		return 1;
	}
	if (rc != -ENOENT)
		snprintf(src, srclen, "%s", why);
	return 0;
}

void cli_target_say_token(const cJSON *config)
{
	const cJSON *s, *all = cJSON_GetObjectItemCaseSensitive(config,
								"settings");
	const char *where = "";

	cJSON_ArrayForEach(s, all)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "value");

		if (cJSON_IsString(n) && !strcmp(n->valuestring, "server.token") &&
		    cJSON_IsString(v))
			where = v->valuestring;
	}
	if (!strncmp(where, "none", 4))
		printf("token: none: the target's user chose PROBING_TOKEN=none, "
		       "so every local user can connect to it on loopback\n");
	else if (*where)
		printf("token: %s (TCP clients present it: --token or "
		       "PROBING_TOKEN; on this machine the CLI reads the token "
		       "file by itself)\n",
		       where);
	else
		printf("token: (the agent did not say where its token is)\n");
}

/* The agent said no to the token (or its absence). */
static int auth_failed(const struct dap_addr *addr, int sent, const char *src,
		       const struct dap_message *resp, char *err,
		       size_t errlen)
{
	char where[DAP_ADDR_TEXT_MAX + 16];

	dap_addr_format(addr, where, sizeof(where));
	if (sent)
		snprintf(err, errlen,
			 "the agent at %s refused the token (from %s): %s",
			 where, src, cli_resp_message(resp));
	else
		snprintf(err, errlen,
			 "the agent at %s needs a token (%s): give --token "
			 "TOKEN or set PROBING_TOKEN; an agent that made its "
			 "own keeps it on its machine in "
			 "$XDG_RUNTIME_DIR/probing/token or ~/.probing/token",
			 where, src);
	return CLI_EAUTH;
}

int cli_target_open(const char *text, int timeout_ms, struct dap_client **out,
		    cJSON **init_body, char *err, size_t errlen)
{
	struct dap_addr addr;
	struct dap_client *c = NULL;
	struct dap_message *resp = NULL;
	char why[256] = "", token[DAP_TOKEN_MAX + 1], src[1024];
	cJSON *args;
	int rc, sent;

	*out = NULL;
	rc = cli_target_resolve(text, &addr, err, errlen);
	if (rc != CLI_OK)
		return rc;
	rc = dap_client_connect(&addr, timeout_ms, &c, why, sizeof(why));
	if (rc < 0)
		return connect_failed(&addr, rc, timeout_ms, why, err, errlen);
	if (!init_body) {
		*out = c;
		return CLI_OK;
	}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "clientID", "probing-cli");
	cJSON_AddStringToObject(args, "clientName", "probing CLI");
	cJSON_AddStringToObject(args, "adapterID", "probing");
	cJSON_AddBoolToObject(args, "linesStartAt1", 1);
	cJSON_AddBoolToObject(args, "columnsStartAt1", 1);
	cJSON_AddStringToObject(args, "pathFormat", "path");
	sent = cli_target_token(&addr, token, sizeof(token), src, sizeof(src));
	if (sent)
		cJSON_AddStringToObject(args, DAP_TOKEN_ARG, token);
	rc = dap_client_request(c, "initialize", args, timeout_ms, &resp, why,
				sizeof(why));
	if (rc == DAP_ECLOSED) {
		rc = closed_on_init(&addr, err, errlen);
		goto fail;
	}
	if (rc < 0) {
		rc = cli_target_lost(rc, "initialize", timeout_ms, err, errlen);
		goto fail;
	}
	if (!resp->success && dap_error_id(resp) == DAP_ERROR_AUTH) {
		rc = auth_failed(&addr, sent, src, resp, err, errlen);
		goto fail;
	}
	if (!resp->success) {
		snprintf(err, errlen, "initialize failed: %s",
			 resp->message ? resp->message : "no reason given");
		rc = CLI_EFAIL;
		goto fail;
	}
	*init_body = resp->body ? cJSON_Duplicate(resp->body, 1)
				: cJSON_CreateObject();
	dap_message_free(resp);
	*out = c;
	return CLI_OK;
fail:
	if (resp)
		dap_message_free(resp);
	dap_client_free(c);
	return rc;
}
