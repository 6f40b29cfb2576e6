/*
 * sampling: see sampling.h.
 */
#include "sampling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 250

static double num(const cJSON *o, const char *key, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* probing/profile with args; *body is the response's body (caller frees
 * resp).  CLI_OK or an exit code after saying why. */
static int profile(struct cmd_ctx *ctx, cJSON *args,
		   struct dap_message **resp)
{
	int rc = cli_request(ctx, "probing/profile", args, ctx->timeout_ms,
			     resp);

	if (rc == CLI_OK && !(*resp)->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(*resp));
		dap_message_free(*resp);
		*resp = NULL;
	}
	return rc;
}

static int simple(struct cmd_ctx *ctx, const char *action, cJSON **body)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	int rc;

	cJSON_AddStringToObject(args, "action", action);
	rc = profile(ctx, args, &resp);
	if (rc == CLI_OK && body)
		*body = cJSON_Duplicate(resp->body, 1);
	if (resp)
		dap_message_free(resp);
	return rc;
}

static void progress(int tty, int pid_known, const char *target, double left,
		     double samples, int hz)
{
	if (!tty)
		return;
	fprintf(stderr,
		"\rprobing: recording %s%s at %d Hz: %.1f s left, %.0f "
		"samples taken\033[K",
		pid_known ? "pid " : "", target, hz, left > 0 ? left : 0,
		samples);
	fflush(stderr);
}

/* The profile's note (sampler.h: native stacks stopped because the
 * program took their signal over, threads left without state because
 * descriptors are scarce), kept from the latest status. */
static void keep_note(const cJSON *st, char *note, size_t len)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(st, "note");

	if (cJSON_IsString(n) && n->valuestring[0])
		snprintf(note, len, "%s", n->valuestring);
}

int sampling_record(struct cmd_ctx *ctx, const struct sampling_opts *o,
		    double *since, double *until)
{
	struct dap_message *resp = NULL;
	cJSON *st = NULL, *args;
	int tty = cli_isatty(stderr), started = 0, rc, hz;
	double t0, end, samples0 = 0;
	char note[600] = "";

	rc = simple(ctx, "status", &st);
	if (rc != CLI_OK)
		return rc;
	t0 = num(st, "now", 0);
	hz = (int)num(st, "hz", 0);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "running"))) {
		/* Someone else's profile: use its samples, leave it be. */
		int native = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(st, "native"));

		if ((o->native && !native) || (o->hz && o->hz != hz))
			cli_error(CLI_OK,
				  "note: the profiler already runs at %d Hz%s; "
				  "its samples are used as they are",
				  hz, native ? " with native stacks" : "");
		samples0 = num(st, "samples", 0);
		*since = t0;
	} else {
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "action", "start");
		cJSON_AddNumberToObject(args, "durationMs", o->duration_ms);
		if (o->hz)
			cJSON_AddNumberToObject(args, "hz", o->hz);
		if (o->native)
			cJSON_AddBoolToObject(args, "native", 1);
		rc = profile(ctx, args, &resp);
		if (rc != CLI_OK) {
			cJSON_Delete(st);
			return rc;
		}
		started = 1;
		*since = num(resp->body, "startedAt", t0);
		hz = (int)num(resp->body, "hz", hz);
		dap_message_free(resp);
	}
	cJSON_Delete(st);
	end = *since + o->duration_ms / 1000.0;
	cli_sigint = 0;
	for (;;) {
		double now, left;
		int running;

		st = NULL;
		if ((rc = simple(ctx, "status", &st)) != CLI_OK)
			return rc;
		now = num(st, "now", end);
		running = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(st, "running"));
		left = end - now;
		progress(tty, ctx->target && strspn(ctx->target, "0123456789") ==
					 strlen(ctx->target),
			 ctx->target ? ctx->target : "", left,
			 num(st, "samples", 0) - samples0, hz);
		keep_note(st, note, sizeof(note));
		cJSON_Delete(st);
		if (left <= 0 || (started && !running) || cli_sigint)
			break;
		/* Jittered: a poll in step with the target's periodic work
		 * would take the CPU from it at the same phase each time. */
		cli_sleep_ms(left * 1000 < POLL_MS
				 ? (int)(left * 1000) + 1
				 : POLL_MS / 2 + rand() % POLL_MS);
	}
	if (tty)
		fputs("\r\033[K", stderr);
	/* Our profile ends here (early on Ctrl-C); the stop also waits
	 * for the last samples to reach the tables. */
	st = NULL;
	if (started && (rc = simple(ctx, "stop", &st)) != CLI_OK)
		return rc;
	*until = st ? num(st, "stoppedAt", end) : end;
	if (!started)
		*until = end;
	if (st)
		keep_note(st, note, sizeof(note));
	cJSON_Delete(st);
	if (note[0]) {
		if (tty)
			fputs("\r\033[K", stderr);
		cli_error(CLI_OK, "note: %s", note);
	}
	if (cli_sigint)
		cli_sigint = 0;
	return CLI_OK;
}

