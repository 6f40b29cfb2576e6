/*
 * dap_job: the parent session of a whole job.  See dap_job.h.
 */
#include "dap_job.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dap_hub.h"
#include "job.h"

#define SEQ_FIRST 1000000 /* our own messages' seq: apart from the agent's */

struct rank {
	long long rank;
	long long pid;
};

struct dap_job {
	struct cmd_ctx ask; /* how we reach the rank we ask (no connection
			     * held between looks) */
	char target[256];   /* the rank we ask */
	char origin[256];   /* the target given: a rank or torchrun's pid */
	dap_job_send_fn send;
	long long seq;
	struct rank *seen; /* the ranks given a session */
	size_t nseen;
	char host[256];
	struct dap_hub *hub; /* NULL: the ranks' sessions stand alone */
	char hub_name[64];
	int stop_all; /* a stop on one rank pauses the others */
	long long looked_ms; /* when the ranks were last looked for */
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int dap_job_wanted(const cJSON *msg)
{
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(msg, "command");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(msg, "arguments");

	return cJSON_IsString(cmd) && !strcmp(cmd->valuestring, "attach") &&
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "job"));
}

static int send_json(struct dap_job *j, cJSON *m)
{
	char *text = m ? cJSON_PrintUnformatted(m) : NULL;
	int rc = text ? j->send(text, strlen(text)) : -ENOMEM;

	free(text);
	cJSON_Delete(m);
	return rc;
}

/* A response to req: success with body (taken; may be NULL), or a
 * failure with message. */
static int respond(struct dap_job *j, const cJSON *req, cJSON *body,
		   const char *message)
{
	const cJSON *seq = cJSON_GetObjectItemCaseSensitive(req, "seq");
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "command");
	cJSON *m = cJSON_CreateObject();

	cJSON_AddNumberToObject(m, "seq", (double)j->seq++);
	cJSON_AddStringToObject(m, "type", "response");
	cJSON_AddNumberToObject(m, "request_seq",
				cJSON_IsNumber(seq) ? seq->valuedouble : 0);
	cJSON_AddBoolToObject(m, "success", message == NULL);
	cJSON_AddStringToObject(m, "command",
				cJSON_IsString(cmd) ? cmd->valuestring : "");
	if (message)
		cJSON_AddStringToObject(m, "message", message);
	if (body)
		cJSON_AddItemToObject(m, "body", body);
	return send_json(j, m);
}

static void event(struct dap_job *j, const char *name)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddNumberToObject(m, "seq", (double)j->seq++);
	cJSON_AddStringToObject(m, "type", "event");
	cJSON_AddStringToObject(m, "event", name);
	send_json(j, m);
}

static void output(struct dap_job *j, const char *text)
{
	cJSON *m = cJSON_CreateObject(), *b = cJSON_CreateObject();

	cJSON_AddNumberToObject(m, "seq", (double)j->seq++);
	cJSON_AddStringToObject(m, "type", "event");
	cJSON_AddStringToObject(m, "event", "output");
	cJSON_AddStringToObject(b, "category", "console");
	cJSON_AddStringToObject(b, "output", text);
	cJSON_AddItemToObject(m, "body", b);
	send_json(j, m);
}

/* The job's ranks, from cluster.nodes of the rank we ask, on a
 * connection made for it (each rank's agent then holds one connection of
 * the editor's, its session's, but for a moment every DAP_JOB_LOOK_MS):
 * CLI_OK with *rows, a JSON array of {rank, host, pid, addr} (caller
 * frees), or with err CLI_ENOAGENT (no agent answers there: when that
 * rank is gone, torchrun's launcher, if that is what was given, names
 * its lowest rank again, an elastic restart's) or CLI_EFAIL. */
static int ranks_of(struct dap_job *j, cJSON **rows, char *err,
		    size_t errlen)
{
	struct dap_message *resp = NULL;
	cJSON *args;
	const cJSON *body;
	int rc;

	*rows = NULL;
	j->ask.target = j->target;
	if (cli_connect(&j->ask, 1) != CLI_OK || j->ask.rec) {
		cli_close(&j->ask);
		snprintf(err, errlen,
			 "no agent answers at %s to list the job's ranks",
			 j->target);
		if (strcmp(j->origin, j->target))
			snprintf(j->target, sizeof(j->target), "%s",
				 cli_job_target(j->origin, "the job's ranks"));
		return CLI_ENOAGENT;
	}
	args = cJSON_CreateObject();

	cJSON_AddStringToObject(args, "sql",
				"SELECT rank, host, pid, addr FROM cluster.nodes "
				"WHERE role = 'rank' ORDER BY rank");
	cJSON_AddNumberToObject(args, "maxRows", DAP_JOB_RANKS_MAX);
	rc = cli_request(&j->ask, "probing/query", args, 10000, &resp);
	if (rc != CLI_OK || !resp->success) {
		snprintf(err, errlen, "cannot read the job's ranks from %s: %s",
			 j->target,
			 resp ? cli_resp_message(resp) : "no answer");
	} else {
		body = resp->body;
		*rows = cJSON_DetachItemFromObjectCaseSensitive(
			(cJSON *)body, "rows");
		if (!*rows)
			snprintf(err, errlen, "%s answered the job's ranks "
				 "without rows", j->target);
	}
	if (resp)
		dap_message_free(resp);
	cli_close(&j->ask);
	return *rows ? CLI_OK : CLI_EFAIL;
}

static int seen(const struct dap_job *j, long long rank, long long pid)
{
	for (size_t i = 0; i < j->nseen; i++)
		if (j->seen[i].rank == rank && j->seen[i].pid == pid)
			return 1;
	return 0;
}

/* startDebugging for one rank (a row: rank, host, pid, addr). */
static void start_rank(struct dap_job *j, const cJSON *row)
{
	const cJSON *r = cJSON_GetArrayItem(row, 0), *h = cJSON_GetArrayItem(row, 1);
	const cJSON *p = cJSON_GetArrayItem(row, 2), *a = cJSON_GetArrayItem(row, 3);
	long long rank = cJSON_IsNumber(r) ? (long long)r->valuedouble : -1;
	long long pid = cJSON_IsNumber(p) ? (long long)p->valuedouble : 0;
	const char *host = cJSON_IsString(h) ? h->valuestring : "";
	const char *addr = cJSON_IsString(a) ? a->valuestring : "";
	int here = pid > 0 && !strcmp(host, j->host) &&
		   kill((pid_t)pid, 0) == 0;
	cJSON *m, *args, *cfg;
	char name[400];
	struct rank *bigger;

	if (rank < 0 || seen(j, rank, pid) || j->nseen >= DAP_JOB_RANKS_MAX)
		return;
	if (!here && !strchr(addr, ':'))
		return; /* neither a pid here nor an address: not reachable */
	bigger = realloc(j->seen, (j->nseen + 1) * sizeof(*j->seen));
	if (!bigger)
		return;
	j->seen = bigger;
	j->seen[j->nseen++] = (struct rank){rank, pid};
	snprintf(name, sizeof(name), "rank %lld (%s:%lld)", rank,
		 host[0] ? host : "?", pid);
	m = cJSON_CreateObject();
	args = cJSON_AddObjectToObject(m, "arguments");
	cJSON_AddNumberToObject(m, "seq", (double)j->seq++);
	cJSON_AddStringToObject(m, "type", "request");
	cJSON_AddStringToObject(m, "command", "startDebugging");
	cJSON_AddStringToObject(args, "request", "attach");
	cfg = cJSON_AddObjectToObject(args, "configuration");
	cJSON_AddStringToObject(cfg, "type", "probing");
	cJSON_AddStringToObject(cfg, "request", "attach");
	cJSON_AddStringToObject(cfg, "name", name);
	cJSON_AddNumberToObject(cfg, "rank", (double)rank);
	if (j->hub)
		cJSON_AddStringToObject(cfg, "jobHub", j->hub_name);
	if (here) {
		cJSON_AddNumberToObject(cfg, "processId", (double)pid);
	} else {
		const char *colon = strrchr(addr, ':');
		char hostpart[256];

		snprintf(hostpart, sizeof(hostpart), "%.*s",
			 (int)(colon - addr), addr);
		cJSON_AddStringToObject(cfg, "host", hostpart);
		cJSON_AddNumberToObject(cfg, "port", atoi(colon + 1));
	}
	send_json(j, m);
}

/* Gives the ranks in rows that have no session one. */
static size_t start_ranks(struct dap_job *j, const cJSON *rows)
{
	const cJSON *row;
	size_t before = j->nseen;

	cJSON_ArrayForEach(row, rows)
		start_rank(j, row);
	return j->nseen - before;
}

int dap_job_start(struct cmd_ctx *ctx, const cJSON *msg, dap_job_send_fn send,
		  struct dap_job **out)
{
	struct dap_job *j = calloc(1, sizeof(*j));
	char err[600], text[800];
	cJSON *rows;
	size_t n;
	int hub_rc;

	*out = NULL;
	if (!j)
		return cli_error(CLI_EFAIL, "out of memory");
	j->send = send;
	j->seq = SEQ_FIRST;
	j->looked_ms = now_ms();
	j->stop_all = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(msg, "arguments"), "stopAll"));
	if (gethostname(j->host, sizeof(j->host) - 1) < 0)
		j->host[0] = '\0';
	/* torchrun's launcher stands for its job: its first rank is asked. */
	snprintf(j->origin, sizeof(j->origin), "%s", ctx->target);
	snprintf(j->target, sizeof(j->target), "%s",
		 cli_job_target(ctx->target, "the job's ranks"));
	j->ask = *ctx;
	j->ask.client = NULL;
	j->ask.init_body = NULL;
	j->ask.rec = NULL;
	if (ranks_of(j, &rows, err, sizeof(err)) == CLI_ENOAGENT) {
		respond(j, msg, NULL, err);
		dap_job_free(j);
		return CLI_ENOAGENT;
	}
	if (!rows || cJSON_GetArraySize(rows) == 0) {
		snprintf(text, sizeof(text),
			 "%s: attach without \"job\" to debug this process "
			 "alone",
			 !rows ? err
			       : "no rank of a job there (its cluster.nodes "
				 "lists none: not a torchrun job, or one that "
				 "has not registered yet)");
		respond(j, msg, NULL, text);
		cJSON_Delete(rows);
		dap_job_free(j);
		return CLI_EFAIL;
	}
	/* Without the hub each rank's session still works: only a stop
	 * no longer pauses the others. */
	hub_rc = dap_hub_new(&j->hub, j->hub_name, sizeof(j->hub_name));
	respond(j, msg, NULL, NULL);
	event(j, "initialized"); /* as the agent does after its attach */
	n = start_ranks(j, rows);
	cJSON_Delete(rows);
	snprintf(text, sizeof(text),
		 "probing: the job of %s: %zu ranks, a session each; %s\n",
		 j->target, n,
		 hub_rc ? "a stop on one rank leaves the others running (no "
			  "socket for the ranks' sessions to meet)"
		 : j->stop_all ? "a stop on one rank pauses the others "
				 "(\"stopAll\": false leaves them running)"
			       : "a stop on one rank leaves the others running "
				 "(\"stopAll\": false)");
	output(j, text);
	*out = j;
	return CLI_OK;
}

int dap_job_handle(struct dap_job *j, const cJSON *msg)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(msg, "type");
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(msg, "command");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(msg, "arguments");
	const char *c = cJSON_IsString(cmd) ? cmd->valuestring : "";
	cJSON *body;

	if (!cJSON_IsString(type) || strcmp(type->valuestring, "request"))
		return 0; /* the client's answers to our startDebugging */
	if (!strcmp(c, "disconnect") || !strcmp(c, "terminate")) {
		/* The whole job's: every rank's session detaches from its
		 * rank (which runs on) and ends.  The bridge ends when the
		 * client closes its side. */
		if (j->hub)
			dap_hub_tell(j->hub, "disconnect", -1);
		respond(j, msg, NULL, NULL);
		return 0;
	}
	if (!strcmp(c, "threads")) {
		body = cJSON_CreateObject();
		cJSON_AddArrayToObject(body, "threads");
		respond(j, msg, body, NULL);
		return 0;
	}
	if (!strcmp(c, "setBreakpoints") ||
	    !strcmp(c, "setFunctionBreakpoints") ||
	    !strcmp(c, "setExceptionBreakpoints") ||
	    !strcmp(c, "setDataBreakpoints") ||
	    !strcmp(c, "setInstructionBreakpoints")) {
		const cJSON *want = cJSON_GetObjectItemCaseSensitive(
			args, !strcmp(c, "setBreakpoints") ? "breakpoints"
			      : !strcmp(c, "setExceptionBreakpoints")
				      ? "filters"
				      : "breakpoints");
		cJSON *bps;
		int n = cJSON_IsArray(want) ? cJSON_GetArraySize(want) : 0;

		body = cJSON_CreateObject();
		bps = cJSON_AddArrayToObject(body, "breakpoints");
		for (int i = 0; i < n && strcmp(c, "setExceptionBreakpoints");
		     i++) {
			cJSON *b = cJSON_CreateObject();

			cJSON_AddBoolToObject(b, "verified", 0);
			cJSON_AddStringToObject(b, "message",
						"set in each rank's session");
			cJSON_AddItemToArray(bps, b);
		}
		respond(j, msg, body, NULL);
		return 0;
	}
	if (!strcmp(c, "configurationDone") || !strcmp(c, "attach")) {
		respond(j, msg, NULL, NULL);
		return 0;
	}
	if (!strcmp(c, "pause") || !strcmp(c, "continue")) {
		/* The whole job: every rank's session does it. */
		if (!j->hub || dap_hub_ranks(j->hub) == 0) {
			respond(j, msg, NULL,
				j->hub ? "no rank's session has joined the "
					 "job's yet: pause or continue a rank "
					 "(\"rank N\" under it)"
				       : "the ranks' sessions cannot be reached "
					 "from the job's: pause or continue "
					 "each rank (\"rank N\" under it)");
			return 0;
		}
		dap_hub_tell(j->hub, c, -1);
		body = NULL;
		if (!strcmp(c, "continue")) {
			body = cJSON_CreateObject();
			cJSON_AddBoolToObject(body, "allThreadsContinued", 1);
		}
		respond(j, msg, body, NULL);
		return 0;
	}
	respond(j, msg, NULL,
		"the job's session has no threads: ask a rank's session "
		"(\"rank N\" under it)");
	return 0;
}

void dap_job_look(struct dap_job *j)
{
	char err[600];
	cJSON *rows;

	ranks_of(j, &rows, err, sizeof(err));
	j->looked_ms = now_ms();
	start_ranks(j, rows);
	cJSON_Delete(rows);
}

int dap_job_due_ms(const struct dap_job *j)
{
	long long left = j->looked_ms + DAP_JOB_LOOK_MS - now_ms();

	return left < 0 ? 0 : (int)left;
}

int dap_job_pollfds(const struct dap_job *j, struct pollfd *p, int max)
{
	return j->hub ? dap_hub_pollfds(j->hub, p, max) : 0;
}

/* A rank's session said something (dap_hub.h): a stop of its own (not
 * the pause the hub asked for) pauses the others where stop_all. */
static void heard(void *arg, long long rank, const char *line)
{
	struct dap_job *j = arg;
	char text[300];
	int told;

	if (strncmp(line, "stopped ", 8) || !strcmp(line + 8, "pause"))
		return;
	if (!j->stop_all) {
		snprintf(text, sizeof(text), "probing: rank %lld stopped (%s)\n",
			 rank, line + 8);
		output(j, text);
		return;
	}
	told = dap_hub_tell(j->hub, "pause", rank);
	snprintf(text, sizeof(text),
		 "probing: rank %lld stopped (%s): pausing the %d other "
		 "rank%s (\"stopAll\": false leaves them running)\n",
		 rank, line + 8, told, told == 1 ? "" : "s");
	output(j, text);
}

void dap_job_ready(struct dap_job *j, const struct pollfd *p, int n)
{
	if (j->hub)
		dap_hub_ready(j->hub, p, n, heard, j);
}

void dap_job_free(struct dap_job *j)
{
	if (!j)
		return;
	cli_close(&j->ask);
	dap_hub_free(j->hub);
	free(j->seen);
	free(j);
}
