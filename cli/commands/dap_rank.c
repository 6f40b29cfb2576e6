/*
 * dap_rank: the bridge of one rank's session in a job.  See dap_rank.h.
 */
#include "dap_rank.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cJSON.h"
#include "dap_hub.h"

struct dap_rank {
	int fd;
	long long rank;
	long long seq; /* the next request of the bridge's own */
	int pending;   /* of them, not answered yet */
	char buf[DAP_HUB_LINE_MAX];
	size_t have;
};

int dap_rank_join(const char *body, size_t len, struct dap_rank **out,
		  char *err, size_t errlen)
{
	cJSON *msg, *cmd, *args, *hub, *rank;
	struct dap_rank *r;
	int fd, rc = 1;

	*out = NULL;
	if (!memmem(body, len, "\"jobHub\"", 8))
		return 1; /* the common case: no parse */
	msg = cJSON_ParseWithLength(body, len);
	cmd = cJSON_GetObjectItemCaseSensitive(msg, "command");
	args = cJSON_GetObjectItemCaseSensitive(msg, "arguments");
	hub = cJSON_GetObjectItemCaseSensitive(args, "jobHub");
	rank = cJSON_GetObjectItemCaseSensitive(args, "rank");
	if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, "attach") ||
	    !cJSON_IsString(hub) || !cJSON_IsNumber(rank) ||
	    !(rank->valuedouble >= 0 && rank->valuedouble <= INT_MAX))
		goto done;
	fd = dap_hub_join(hub->valuestring, (long long)rank->valuedouble);
	if (fd < 0) {
		snprintf(err, errlen, "cannot join the job's session at %s: %s",
			 hub->valuestring, strerror(-fd));
		rc = fd;
		goto done;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto done;
	}
	r->fd = fd;
	r->rank = (long long)rank->valuedouble;
	r->seq = DAP_RANK_SEQ_FIRST;
	*out = r;
	rc = 0;
done:
	cJSON_Delete(msg);
	return rc;
}

int dap_rank_fd(const struct dap_rank *r)
{
	return r->fd;
}

static const char *string_of(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* DAP's `continued` for the whole process, as the agent says it. */
static void say_continued(dap_rank_send_fn to_editor)
{
	static const char ev[] =
		"{\"seq\":0,\"type\":\"event\",\"event\":\"continued\","
		"\"body\":{\"threadId\":0,\"allThreadsContinued\":true}}";

	to_editor(ev, sizeof(ev) - 1);
}

/* The end of the editor's session (the job's disconnect). */
static void say_terminated(dap_rank_send_fn to_editor)
{
	static const char ev[] =
		"{\"seq\":0,\"type\":\"event\",\"event\":\"terminated\"}";

	to_editor(ev, sizeof(ev) - 1);
}

int dap_rank_from_agent(struct dap_rank *r, const char *body, size_t len,
			dap_rank_send_fn to_editor)
{
	int own = r->pending > 0 && memmem(body, len, "\"request_seq\"", 13);
	int stop = memmem(body, len, "\"stopped\"", 9) != NULL;
	cJSON *msg, *seq, *b;
	char line[DAP_HUB_LINE_MAX];
	int rc = 0;

	if (!own && !stop)
		return 0; /* the common case: no parse */
	msg = cJSON_ParseWithLength(body, len);
	seq = cJSON_GetObjectItemCaseSensitive(msg, "request_seq");
	if (own && !strcmp(string_of(msg, "type"), "response") &&
	    cJSON_IsNumber(seq) && seq->valuedouble >= DAP_RANK_SEQ_FIRST &&
	    seq->valuedouble < (double)r->seq) {
		r->pending--;
		b = cJSON_GetObjectItemCaseSensitive(msg, "success");
		if (cJSON_IsTrue(b) &&
		    !strcmp(string_of(msg, "command"), "continue"))
			say_continued(to_editor);
		if (!strcmp(string_of(msg, "command"), "disconnect"))
			say_terminated(to_editor);
		rc = 1;
	} else if (stop && !strcmp(string_of(msg, "type"), "event") &&
		   !strcmp(string_of(msg, "event"), "stopped")) {
		const char *why;
		size_t n = 0;

		b = cJSON_GetObjectItemCaseSensitive(msg, "body");
		why = string_of(b, "reason");
		/* A word: what the agent says (DAP's reasons), never a line
		 * or a field of the hub's. */
		while (n < 64 && (isalnum((unsigned char)why[n]) ||
				  why[n] == '_' || why[n] == '-'))
			n++;
		snprintf(line, sizeof(line), "stopped %.*s", (int)n,
			 n ? why : "?");
		/* A line not written whole would glue the next one to its
		 * rest: the link is dropped (heard() says so next). */
		if (dap_hub_say(r->fd, line) < 0)
			shutdown(r->fd, SHUT_RDWR);
	}
	cJSON_Delete(msg);
	return rc;
}

/* A request of the bridge's own to the agent. */
static int request(struct dap_rank *r, const char *command,
		   dap_rank_send_fn to_agent)
{
	char body[160];
	int len = snprintf(body, sizeof(body),
			   "{\"seq\":%lld,\"type\":\"request\",\"command\":"
			   "\"%s\",\"arguments\":{\"threadId\":0}}",
			   r->seq++, command);

	r->pending++;
	return to_agent(body, (size_t)len);
}

int dap_rank_heard(struct dap_rank *r, dap_rank_send_fn to_agent)
{
	char line[DAP_HUB_LINE_MAX];
	int rc;

	int asked_end = 0;

	while ((rc = dap_hub_hear(r->fd, r->buf, &r->have, line,
				  sizeof(line))) == 1) {
		if (!strcmp(line, "pause") || !strcmp(line, "continue"))
			request(r, line, to_agent);
		else if (!strcmp(line, "disconnect")) {
			request(r, line, to_agent);
			asked_end = 1;
		}
	}
	if (rc < 0)
		return -1;
	return asked_end;
}

void dap_rank_free(struct dap_rank *r)
{
	if (!r)
		return;
	close(r->fd);
	free(r);
}
