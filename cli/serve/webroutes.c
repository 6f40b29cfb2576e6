/*
 * webroutes: see webroutes.h.  Each builder turns checked query
 * parameters into a command's words; most ask for -f json.
 */
#include "serve/webroutes.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define RUN_MS 30000

#define W(x)                                                                   \
	do {                                                                   \
		if (x)                                                         \
			return -1;                                             \
	} while (0)

static int json_cmd(const cJSON *args, struct op_words *w, const char *cmd)
{
	const char *t = ops_str(args, "target");

	if (t)
		W(op_words_add(w, "-t") || op_words_add(w, t));
	return op_words_add(w, "-f") || op_words_add(w, "json") ||
	       op_words_add(w, cmd);
}

static int build_agents(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "list");
}

static int build_runs(const cJSON *args, struct op_words *w, char *err,
		      size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "runs");
}

static int build_backtrace(const cJSON *args, struct op_words *w, char *err,
			   size_t errlen)
{
	(void)err, (void)errlen;
	W(json_cmd(args, w, "backtrace"));
	return (ops_bool(args, "locals") && op_words_add(w, "--locals")) ||
	       (ops_bool(args, "native") && op_words_add(w, "--native"));
}

static int build_query(const cJSON *args, struct op_words *w, char *err,
		       size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "query") || op_words_add(w, "--") ||
	       op_words_add(w, ops_str(args, "sql"));
}

static int sql(const cJSON *args, struct op_words *w, const char *q)
{
	return json_cmd(args, w, "query") || op_words_add(w, "--") ||
	       op_words_add(w, q);
}

static int build_tables(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	(void)err, (void)errlen;
	return sql(args, w,
		   "SELECT t.schema || '.' || t.name AS name, t.kind, t.doc, "
		   "(SELECT group_concat(c.name, ', ') FROM "
		   "pragma_table_info(t.name, t.schema) c) AS columns "
		   "FROM probing.tables t ORDER BY t.schema, t.name");
}

static int build_memory(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "memory");
}

/* Charts: RSS over the last hour; step times over the last hour. */
static int build_series(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	const char *what = ops_str(args, "what");

	if (!strcmp(what, "memory"))
		return sql(args, w,
			   "SELECT ts, rss, py_blocks FROM process.memory "
			   "WHERE ts > ago('1h') ORDER BY ts");
	if (!strcmp(what, "steps"))
		/* A traced step's time: from the end of the optimizer step
		 * before it to the end of its own (its optimizer step row's
		 * offset and CPU time), data loading included.  Not the gap
		 * to the next traced step: across time tracing was off
		 * that gap is the time off (an 11 s "step"). */
		return sql(args, w,
			   "SELECT step, min(ts) AS ts, max(CASE WHEN stage = "
			   "'step' THEN time_offset + cpu_duration END) * 1000 "
			   "AS ms FROM python.torch_trace WHERE ts > ago('1h') "
			   "GROUP BY step ORDER BY step");
	snprintf(err, errlen, "what: memory or steps");
	return -1;
}

static int build_torch(const cJSON *args, struct op_words *w, char *err,
		       size_t errlen)
{
	int ms;

	W(ops_duration(args, "3s", &ms, err, errlen));
	return json_cmd(args, w, "perf") || op_words_add(w, "--torch") ||
	       op_words_fmt(w, "--duration=%dms", ms);
}

static int build_hangs(const cJSON *args, struct op_words *w, char *err,
		       size_t errlen)
{
	int id = ops_int(args, "id", 0);

	(void)err, (void)errlen;
	W(json_cmd(args, w, "hangs"));
	return id > 0 && op_words_fmt(w, "%d", id);
}

/* A report file the agent wrote, one the door serves (ops.h). */
static int build_report(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	char real[PATH_MAX];

	if (ops_report_served(ops_str(args, "file"), real, sizeof(real), err,
			      errlen))
		return -1;
	return op_words_add(w, "-f") || op_words_add(w, "json") ||
	       op_words_add(w, "report") || op_words_add(w, "--") ||
	       op_words_fmt(w, "%s", real);
}

static int build_cluster_bt(const cJSON *args, struct op_words *w, char *err,
			    size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "cluster") || op_words_add(w, "backtrace");
}

static int build_cluster_hang(const cJSON *args, struct op_words *w, char *err,
			      size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "cluster") || op_words_add(w, "hang");
}

static int build_diagnose(const cJSON *args, struct op_words *w, char *err,
			  size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "diagnose") ||
	       op_words_add(w, ops_str(args, "playbook"));
}

static int build_perf(const cJSON *args, struct op_words *w, char *err,
		      size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "perf");
}

static int build_start(const cJSON *args, struct op_words *w, char *err,
		       size_t errlen)
{
	(void)err, (void)errlen;
	W(json_cmd(args, w, "perf"));
	return op_words_add(w, ops_bool(args, "native") ? "--cc" : "--start");
}

static int build_stop(const cJSON *args, struct op_words *w, char *err,
		      size_t errlen)
{
	(void)err, (void)errlen;
	return json_cmd(args, w, "perf") || op_words_add(w, "--stop");
}

/* The project's own interactive SVG of the samples the agent recorded in
 * the last DURATION (or recording DURATION from now). */
static int build_svg(const cJSON *args, struct op_words *w, char *err,
		     size_t errlen)
{
	int ms;

	W(ops_duration(args, "5s", &ms, err, errlen));
	return op_words_add(w, "-t") ||
	       op_words_add(w, ops_str(args, "target")) ||
	       op_words_add(w, "flamegraph") ||
	       op_words_fmt(w, "--duration=%dms", ms) ||
	       (ops_bool(args, "recorded") && op_words_add(w, "--recorded")) ||
	       (ops_bool(args, "native") && op_words_add(w, "--native")) ||
	       (ops_bool(args, "idle") && op_words_add(w, "--idle")) ||
	       (ops_bool(args, "tasks") && op_words_add(w, "--tasks")) ||
	       op_words_add(w, "--as") || op_words_add(w, "svg") ||
	       op_words_add(w, "-o") || op_words_add(w, "/dev/stdout");
}

#define TARGET                                                                 \
	{                                                                      \
		"target", OP_STR, 1, "pid, HOST:PORT or run", NULL             \
	}
#define END                                                                    \
	{                                                                      \
		NULL, OP_STR, 0, NULL, NULL                                    \
	}

static const char *const series_what[] = {"memory", "steps", NULL};
static const char *const playbooks[] = {"hang", "leak", "slow", "dataloader",
					NULL};
static const struct op_param none[] = {END};
static const struct op_param target[] = {TARGET, END};
static const struct op_param bt[] = {
	TARGET, {"locals", OP_BOOL, 0, "with locals", NULL},
	{"native", OP_BOOL, 0, "with native frames", NULL}, END};
static const struct op_param query[] = {
	TARGET, {"sql", OP_STR, 1, "SQL", NULL}, END};
static const struct op_param series[] = {
	TARGET, {"what", OP_STR, 1, "memory or steps", series_what}, END};
static const struct op_param timed[] = {
	TARGET, {"duration", OP_STR, 0, "how long", NULL}, END};
static const struct op_param hangs[] = {
	TARGET, {"id", OP_INT, 0, "a hang's id", NULL}, END};
static const struct op_param report[] = {
	{"file", OP_STR, 1, "a report file", NULL}, END};
static const struct op_param diagnose[] = {
	TARGET, {"playbook", OP_STR, 1, "a playbook", playbooks}, END};
static const struct op_param start[] = {
	TARGET, {"native", OP_BOOL, 0, "C/C++ frames too", NULL}, END};
static const struct op_param svg[] = {
	TARGET,
	{"duration", OP_STR, 0, "how long", NULL},
	{"recorded", OP_BOOL, 0, "the samples already recorded", NULL},
	{"native", OP_BOOL, 0, "C/C++ frames too", NULL},
	{"idle", OP_BOOL, 0, "waiting threads too", NULL},
	{"tasks", OP_BOOL, 0, "rooted at their asyncio task", NULL},
	END};

#define JSON "application/json"

/* Acting routes (webroutes.h) are POST: query, backtrace (its locals
 * call reprs), torch tracing, the flamegraph (it samples), the playbooks,
 * the sampler's start and stop. */
static const struct web_route routes[] = {
	{"/api/agents", 0, 0, JSON, none, RUN_MS, build_agents},
	{"/api/runs", 0, 0, JSON, none, RUN_MS, build_runs},
	{"/api/backtrace", 1, 0, JSON, bt, RUN_MS, build_backtrace},
	{"/api/query", 1, 0, JSON, query, RUN_MS, build_query},
	{"/api/tables", 0, 0, JSON, target, RUN_MS, build_tables},
	{"/api/memory", 0, 0, JSON, target, RUN_MS, build_memory},
	{"/api/series", 0, 0, JSON, series, RUN_MS, build_series},
	{"/api/torch", 1, 0, JSON, timed, RUN_MS, build_torch},
	{"/api/hangs", 0, 0, JSON, hangs, RUN_MS, build_hangs},
	{"/api/report", 0, 0, JSON, report, RUN_MS, build_report},
	{"/api/cluster/backtrace", 0, 0, JSON, target, 2 * RUN_MS,
	 build_cluster_bt},
	{"/api/cluster/hang", 0, 0, JSON, target, 2 * RUN_MS,
	 build_cluster_hang},
	{"/api/diagnose", 1, 0, JSON, diagnose, 2 * RUN_MS, build_diagnose},
	{"/api/profile", 0, 0, JSON, target, RUN_MS, build_perf},
	{"/api/profile/start", 1, 0, JSON, start, RUN_MS, build_start},
	{"/api/profile/stop", 1, 0, JSON, target, RUN_MS, build_stop},
	{"/api/flamegraph.svg", 1, 1, "image/svg+xml", svg, RUN_MS,
	 build_svg},
	{NULL, 0, 0, NULL, NULL, 0, NULL},
};

const struct web_route *web_route_find(const char *path)
{
	for (const struct web_route *r = routes; r->path; r++)
		if (!strcmp(r->path, path))
			return r;
	return NULL;
}
