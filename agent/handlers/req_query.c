/*
 * req_query: probing/query — one SQL statement against the agent's store.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/app.h"
#include "cluster/cluster_global.h"
#include "core/agent.h"
#include "core/config.h"
#include "core/readonly.h"
#include "dap_frame.h"
#include "profiler/sampler.h"
#include "resultjson.h"
#include "server/handler.h"
#include "store.h"

/*
 * The most a result may be, counted as its JSON (store_limits.json): the
 * reply must fit in one DAP message as clients read them
 * (DAP_MESSAGE_MAX), with room for the rest of the body; past it the
 * query fails with a message instead of a reply that closes the
 * connection.  A single value longer than that is refused by SQLite
 * before it is made (max_value), so that it costs no memory either.
 */
#define QUERY_REPLY_MAX ((size_t)DAP_MESSAGE_MAX - (1u << 20))

static int setting_is(const char *name, const char *value)
{
	char v[CONFIG_VALUE_MAX];

	return config_get(name, v, sizeof(v)) == 0 && !strcmp(v, value);
}

static int sampler_never_ran(void)
{
	struct sampler_status s;

	sampler_status(&s);
	return !s.running && !(s.started > 0);
}

/* Why a recorded table is empty: its recorder is off.  The first entry of
 * a table that holds is said. */
static const struct {
	const char *table;
	const char *setting, *off; /* off when setting reads off */
	int (*is_off)(void);	   /* or when this says so */
	const char *why;
} recorders[] = {
	{"python.torch_trace", "torch.profiling", "off", NULL,
	 "torch tracing is off: probing config torch.profiling=on (or "
	 "PROBING_TORCH_PROFILING=on)"},
	{"python.variables", "torch.profiling", "off", NULL,
	 "torch tracing is off: probing config "
	 "torch.profiling=on,exprs=loss@train (VAR@FUNC)"},
	{"python.variables", "torch.watch", "", NULL,
	 "no variables are watched: probing config "
	 "torch.profiling=on,exprs=loss@train (VAR@FUNC)"},
	{"profile.", NULL, NULL, sampler_never_ran,
	 "the sampler never ran: probing perf --start (or flamegraph "
	 "DURATION)"},
	{"process.hangs", "hang.timeout", "off", NULL,
	 "the hang watchdog is off: probing config hang.timeout=300s"},
	{"process.memory", "memory.interval_ms", "0", NULL,
	 "memory is not recorded: probing config memory.interval_ms=1000"},
};

/* An empty result from a table whose recorder is off says so: notes. */
static void add_notes(cJSON *body, const char *sql)
{
	const char *said = NULL;
	cJSON *notes = cJSON_GetObjectItemCaseSensitive(body, "notes");
	char text[320];

	for (size_t i = 0; i < sizeof(recorders) / sizeof(recorders[0]); i++) {
		const char *t = recorders[i].table;
		int off = recorders[i].is_off
				  ? recorders[i].is_off()
				  : setting_is(recorders[i].setting,
					       recorders[i].off);

		if ((said && !strcmp(said, t)) || !strcasestr(sql, t) || !off)
			continue;
		if (!notes && !(notes = cJSON_AddArrayToObject(body, "notes")))
			return;
		snprintf(text, sizeof(text), "%s%s is empty: %s", t,
			 t[strlen(t) - 1] == '.' ? "*" : "", recorders[i].why);
		cJSON_AddItemToArray(notes, cJSON_CreateString(text));
		said = t;
	}
}

static void run_query(struct request *req)
{
	const char *sql = NULL;
	int64_t max_rows = config_int("query.max_rows");
	int64_t timeout = config_int("query.timeout_ms");
	struct store_limits lim = {0};
	struct store_result res = {0};
	struct store *st = agent_store();
	struct global_query gq = {0};
	cJSON *body, *gnotes = NULL, *missing = NULL;
	char err[1024];
	int rc, global = 0;

	rc = dap_arg_string(req->args, "sql", &sql, err, sizeof(err));
	if (rc == 1) {
		request_fail(req, DAP_ERROR_FAILED, "argument 'sql' is required");
		return;
	}
	if (rc < 0 ||
	    dap_arg_int(req->args, "maxRows", &max_rows, err, sizeof(err)) < 0 ||
	    dap_arg_int(req->args, "timeoutMs", &timeout, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (max_rows < 1 || max_rows > 1000000 || timeout < 1 ||
	    timeout > 600000) {
		request_fail(req, DAP_ERROR_FAILED, "maxRows must be in [1, 1000000] and "
			     "timeoutMs in [1, 600000]");
		return;
	}
	if (!st) {
		request_fail(req, DAP_ERROR_FAILED, "the store is not ready");
		return;
	}
	/* The program's rows appended so far are in app's tables: it reads
	 * back what it wrote (probing.query after a table's append). */
	app_drain();
	lim.max_rows = (size_t)max_rows;
	lim.timeout_ms = (int)timeout;
	lim.read_only = readonly_on();
	lim.max_bytes = QUERY_REPLY_MAX;
	lim.max_value = QUERY_REPLY_MAX;
	lim.json = 1;
	/* global.<schema>.<table>: every rank's rows, asked for first. */
	gnotes = cJSON_CreateArray();
	missing = cJSON_CreateArray();
	rc = gnotes && missing
		     ? global_prepare(st, sql, (int)max_rows, (int)timeout, &gq,
				      gnotes, missing, err, sizeof(err))
		     : -ENOMEM;
	global = rc == 1;
	if (rc >= 0)
		rc = store_query(st, global ? gq.sql : sql, &lim, &res, err,
				 sizeof(err));
	if (global)
		global_done(st, &gq);
	if (rc) {
		/* DAP_ERROR_SQL: SQLite refused the statement; the rest
		 * (time, size, memory) fail as any request does. */
		request_fail(req, rc == STORE_ESQL ? DAP_ERROR_SQL : DAP_ERROR_FAILED,
			     "%s", err);
		store_result_release(&res);
		cJSON_Delete(gnotes);
		cJSON_Delete(missing);
		return;
	}
	body = request_ok(req);
	if (body && cJSON_GetArraySize(gnotes) > 0) {
		cJSON_AddItemToObject(body, "notes", gnotes);
		gnotes = NULL;
	}
	if (body && cJSON_GetArraySize(missing) > 0) {
		cJSON_AddItemToObject(body, "missingRanks", missing);
		missing = NULL;
	}
	cJSON_Delete(gnotes);
	cJSON_Delete(missing);
	if (body && store_result_json(&res, body))
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
	else if (body && res.nrows == 0)
		add_notes(body, sql);
	store_result_release(&res);
}

const struct handler handler_query = {
	.command = "probing/query",
	.flags = HANDLER_BLOCKS,
	.run = run_query,
};
