/*
 * ops: see ops.h.  The table at the end is the list of what `probing mcp`
 * offers; each builder turns checked arguments into a command's words.
 */
#include "ops.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "serve/selfrun.h"

#define OUT_MAX (8u << 20)	   /* stdout kept from one command */
#define RUN_MS 30000		   /* a command's time, past its own work */
#define SAMPLE_DEFAULT "5s"	   /* flamegraph, torch times */
#define SAMPLE_MAX_MS (120 * 1000) /* the longest an op may record */

/* ---- building words ---------------------------------------------------- */

int op_words_add(struct op_words *w, const char *word)
{
	if (w->n >= OP_WORDS_MAX)
		return -1;
	w->w[w->n++] = word;
	w->w[w->n] = NULL;
	return 0;
}

int op_words_fmt(struct op_words *w, const char *fmt, ...)
{
	size_t room = sizeof(w->text) - w->used;
	char *at = w->text + w->used;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(at, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room)
		return -1;
	w->used += (size_t)n + 1;
	return op_words_add(w, at);
}

#define add op_words_add
#define add_fmt op_words_fmt
#define str_arg ops_str
#define bool_arg ops_bool
#define int_arg ops_int

const char *ops_str(const cJSON *args, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int ops_bool(const cJSON *args, const char *name)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, name));
}

int ops_int(const cJSON *args, const char *name, int dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, name);

	return cJSON_IsNumber(v) ? (int)v->valuedouble : dflt;
}

/* "-t TARGET" (every op that has a target parameter). */
static int target(const cJSON *args, struct op_words *w)
{
	return add(w, "-t") || add(w, str_arg(args, "target"));
}

int ops_report_name_ok(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	return (!strncmp(base, "probing-crash-", 14) ||
		!strncmp(base, "probing-hang-", 13)) &&
	       n > 4 && !strcmp(base + n - 4, ".txt");
}

/* ---- which reports a door serves ----------------------------------------- */

#define REPORT_AGENTS_MAX 64 /* live agents asked for their hangs */

/* What a door looks for among the reports it knows: the real path of
 * the one asked for, and its owner. */
struct report_ask {
	const char *real;
	uid_t owner;
	int found;
};

/* Is known (a report's path, as listed) the one asked for, or beside it
 * and written by this user's own processes? */
static void report_match(struct report_ask *a, const char *known)
{
	const char *sa, *sb;
	char *real;

	if (a->found || !known || !*known || !ops_report_name_ok(known) ||
	    !(real = realpath(known, NULL)))
		return;
	sa = strrchr(real, '/');
	sb = strrchr(a->real, '/');
	/* Another report in a report directory is served only when it is
	 * ours: not one another user put there (e.g. in /tmp). */
	a->found = !strcmp(real, a->real) ||
		   (sa && sb && sa - real == sb - a->real &&
		    !strncmp(real, a->real, (size_t)(sa - real)) &&
		    a->owner == geteuid());
	free(real);
}

cJSON *ops_run_json(const char *op_name, cJSON *args)
{
	struct op_result r;
	char err[256];
	cJSON *j = NULL;

	if (!ops_run(ops_find(op_name), args, &r, err, sizeof(err))) {
		if (r.ok)
			j = cJSON_Parse(r.text);
		ops_result_free(&r);
	}
	cJSON_Delete(args);
	return j;
}

/* The recordings' reports first (files: quick); the live agents' hangs
 * only when those do not answer. */
static void report_look(struct report_ask *a)
{
	cJSON *runs = ops_run_json("list_recordings", NULL), *agents, *row, *ag;
	int asked = 0;

	cJSON_ArrayForEach(row, runs)
		report_match(a, ops_str(row, "report"));
	cJSON_Delete(runs);
	if (a->found)
		return;
	agents = ops_run_json("list_agents", NULL);
	cJSON_ArrayForEach(ag, agents)
	{
		cJSON *args, *hangs, *h;
		const char *pid = ops_str(ag, "pid");

		if (a->found || !pid || asked++ >= REPORT_AGENTS_MAX)
			break;
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "target", pid);
		cJSON_AddStringToObject(args, "sql",
					"SELECT path FROM process.hangs "
					"WHERE path IS NOT NULL");
		hangs = ops_run_json("query", args);
		cJSON_ArrayForEach(h, hangs)
			report_match(a, ops_str(h, "path"));
		cJSON_Delete(hangs);
	}
	cJSON_Delete(agents);
}

int ops_report_served(const char *path, char *real, size_t reallen,
		      char *err, size_t errlen)
{
	struct report_ask a = {.real = NULL, .found = 0};
	struct stat st;
	char *r;

	if (!path || !ops_report_name_ok(path)) {
		snprintf(err, errlen,
			 "file: only report files (probing-crash-*.txt, "
			 "probing-hang-*.txt)");
		return -1;
	}
	/* The file itself, links followed: its real name must be a report's
	 * too, and it must be a regular file. */
	r = realpath(path, NULL);
	if (r && ops_report_name_ok(r) && stat(r, &st) == 0 &&
	    S_ISREG(st.st_mode) && strlen(r) < reallen) {
		a.real = r;
		a.owner = st.st_uid;
		report_look(&a);
	}
	if (a.found)
		snprintf(real, reallen, "%s", r);
	else
		snprintf(err, errlen,
			 "file: not a report this door serves: only the "
			 "reports your recordings name (list_recordings' "
			 "report column) or your live agents' hangs do, and "
			 "your own reports beside them");
	free(r);
	return a.found ? 0 : -1;
}

int ops_duration(const cJSON *args, const char *dflt, int *ms, char *err,
		 size_t errlen)
{
	const char *d = str_arg(args, "duration");

	if (!d)
		d = dflt;
	if (cli_parse_duration(d, 1000, ms) || *ms > SAMPLE_MAX_MS) {
		snprintf(err, errlen, "duration '%s': give %s, at most 2m", d,
			 CLI_DURATION_HELP);
		return -1;
	}
	return 0;
}

/* ---- the ops ------------------------------------------------------------ */

#define TARGET_PARAM                                                           \
	{                                                                      \
		"target", OP_STR, 1,                                           \
			"the process: its pid (list_agents), HOST:PORT of an " \
			"agent on TCP, "                                       \
			"or, for a process that has ended, its pid or run "    \
			"name "                                                \
			"(list_recordings)",                                   \
			NULL                                                   \
	}
#define END_PARAMS                                                             \
	{                                                                      \
		NULL, OP_STR, 0, NULL, NULL                                    \
	}

static int build_list(const cJSON *args, struct op_words *w, char *err,
		      size_t errlen)
{
	(void)args, (void)err, (void)errlen;
	return add(w, "-f") || add(w, "json") || add(w, "list");
}

static int build_runs(const cJSON *args, struct op_words *w, char *err,
		      size_t errlen)
{
	(void)args, (void)err, (void)errlen;
	return add(w, "-f") || add(w, "json") || add(w, "runs");
}

static int build_backtrace(const cJSON *args, struct op_words *w, char *err,
			   size_t errlen)
{
	const char *thread = str_arg(args, "thread");

	(void)err, (void)errlen;
	return target(args, w) || add(w, "backtrace") ||
	       (bool_arg(args, "locals") && add(w, "--locals")) ||
	       (bool_arg(args, "native") && add(w, "--native")) ||
	       (bool_arg(args, "tasks") && add(w, "--tasks")) ||
	       (thread && (add(w, "--thread") || add(w, thread)));
}

static int build_query(const cJSON *args, struct op_words *w, char *err,
		       size_t errlen)
{
	(void)err, (void)errlen;
	return target(args, w) || add(w, "-f") || add(w, "json") ||
	       add(w, "query") || add(w, "--") || add(w, str_arg(args, "sql"));
}

/* "schema.name" of letters, digits and '_' only: it goes into SQL. */
static int table_name_ok(const char *t)
{
	const char *dot = strchr(t, '.');

	if (!dot || dot == t || !dot[1] || strchr(dot + 1, '.'))
		return 0;
	for (; *t; t++)
		if (*t != '.' && *t != '_' && !isalnum((unsigned char)*t))
			return 0;
	return 1;
}

static int build_tables(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	const char *t = str_arg(args, "table");

	if (target(args, w) || add(w, "-f") || add(w, "json") ||
	    add(w, "query") || add(w, "--"))
		return -1;
	if (!t)
		return add(w, "SELECT schema || '.' || name AS name, kind, doc "
			      "FROM probing.tables ORDER BY schema, name");
	if (!table_name_ok(t)) {
		snprintf(err, errlen,
			 "table '%s': give it as schema.name "
			 "(python.backtrace), as describe_tables lists them",
			 t);
		return -1;
	}
	return add_fmt(w,
		       "SELECT name, type FROM pragma_table_info('%.*s', "
		       "'%.*s')",
		       (int)strlen(strchr(t, '.') + 1), strchr(t, '.') + 1,
		       (int)(strchr(t, '.') - t), t);
}

static int build_memory(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	(void)err, (void)errlen;
	return target(args, w) || add(w, "memory");
}

static int build_flamegraph(const cJSON *args, struct op_words *w, char *err,
			    size_t errlen)
{
	int ms, top = int_arg(args, "top", 30);

	if (ops_duration(args, SAMPLE_DEFAULT, &ms, err, errlen))
		return -1;
	if (top < 1 || top > 1000) {
		snprintf(err, errlen, "top %d: give 1 to 1000", top);
		return -1;
	}
	return target(args, w) || add(w, "-f") || add(w, "json") ||
	       add(w, "flamegraph") || add_fmt(w, "--duration=%dms", ms) ||
	       add_fmt(w, "--top=%d", top) ||
	       (bool_arg(args, "native") && add(w, "--native")) ||
	       (bool_arg(args, "tasks") && add(w, "--tasks"));
}

static int build_torch(const cJSON *args, struct op_words *w, char *err,
		       size_t errlen)
{
	int ms;

	if (ops_duration(args, SAMPLE_DEFAULT, &ms, err, errlen))
		return -1;
	return target(args, w) || add(w, "perf") || add(w, "--torch") ||
	       add_fmt(w, "--duration=%dms", ms);
}

static int build_hangs(const cJSON *args, struct op_words *w, char *err,
		       size_t errlen)
{
	int id = int_arg(args, "id", 0);

	(void)err, (void)errlen;
	return target(args, w) || add(w, "hangs") ||
	       (id > 0 && add_fmt(w, "%d", id));
}

static int build_cluster_bt(const cJSON *args, struct op_words *w, char *err,
			    size_t errlen)
{
	(void)err, (void)errlen;
	return target(args, w) || add(w, "cluster") || add(w, "backtrace");
}

static int build_cluster_hang(const cJSON *args, struct op_words *w, char *err,
			      size_t errlen)
{
	(void)err, (void)errlen;
	return target(args, w) || add(w, "cluster") || add(w, "hang");
}

static int build_report(const cJSON *args, struct op_words *w, char *err,
			size_t errlen)
{
	char real[PATH_MAX];

	if (ops_report_served(str_arg(args, "file"), real, sizeof(real), err,
			      errlen))
		return -1;
	return add(w, "report") || add(w, "--") || add_fmt(w, "%s", real);
}

static int build_diagnose(const cJSON *args, struct op_words *w, char *err,
			  size_t errlen)
{
	int ms = 0;

	if (str_arg(args, "duration") &&
	    ops_duration(args, SAMPLE_DEFAULT, &ms, err, errlen))
		return -1;
	return target(args, w) || add(w, "diagnose") ||
	       add(w, str_arg(args, "playbook")) ||
	       (ms && add_fmt(w, "--duration=%dms", ms));
}

static int build_eval(const cJSON *args, struct op_words *w, char *err,
		      size_t errlen)
{
	(void)err, (void)errlen;
	return target(args, w) || add(w, "eval") || add(w, "--") ||
	       add(w, str_arg(args, "code"));
}

static const struct op_param no_params[] = {END_PARAMS};
static const struct op_param target_only[] = {TARGET_PARAM, END_PARAMS};
static const struct op_param backtrace_params[] = {
	TARGET_PARAM,
	{"locals", OP_BOOL, 0,
	 "also each frame's local variables (name = repr, tensors as "
	 "shape/dtype/device); costs the GIL for a moment",
	 NULL},
	{"native", OP_BOOL, 0,
	 "also the C/C++ frames (a thread stuck in a collective, a lock or "
	 "a CUDA call shows where), with the Python frames where the "
	 "interpreter runs them; each thread gets a signal for an instant",
	 NULL},
	{"tasks", OP_BOOL, 0,
	 "also each asyncio event loop's tasks, as trees of who awaits "
	 "whom, with what each waits for (a cycle of awaits named as a "
	 "deadlock)",
	 NULL},
	{"thread", OP_STR, 0,
	 "only this thread (its kernel id or Python ident)", NULL},
	END_PARAMS};
static const struct op_param query_params[] = {
	TARGET_PARAM,
	{"sql", OP_STR, 1,
	 "one SQLite statement, e.g. SELECT func, file, lineno FROM "
	 "python.backtrace WHERE thread_name = 'MainThread' ORDER BY depth",
	 NULL},
	END_PARAMS};
static const struct op_param tables_params[] = {
	TARGET_PARAM,
	{"table", OP_STR, 0,
	 "schema.name of one table: its columns; without it, every table",
	 NULL},
	END_PARAMS};
static const struct op_param sample_params[] = {
	TARGET_PARAM,
	{"duration", OP_STR, 0,
	 "how long to record: 5s (the default), 500ms, 1m (at most 2m)", NULL},
	{"native", OP_BOOL, 0, "C/C++ frames too (torch's kernels, libc)",
	 NULL},
	{"top", OP_INT, 0, "rows (functions) to show, default 30", NULL},
	{"tasks", OP_BOOL, 0,
	 "asyncio programs: each task a row (\"task NAME\", its samples "
	 "across its awaits)",
	 NULL},
	END_PARAMS};
static const struct op_param torch_params[] = {
	TARGET_PARAM,
	{"duration", OP_STR, 0,
	 "how long to trace: 5s (the default), at most 2m", NULL},
	END_PARAMS};
static const struct op_param hangs_params[] = {
	TARGET_PARAM,
	{"id", OP_INT, 0, "one hang's id (from the list): its stacks", NULL},
	END_PARAMS};
static const struct op_param report_params[] = {
	{"file", OP_STR, 1,
	 "the report's path (probing-crash-PID-TIME.txt, "
	 "probing-hang-PID-TIME.txt; list_recordings' report column)",
	 NULL},
	END_PARAMS};
static const char *const playbooks[] = {"hang", "leak", "slow", "dataloader",
					NULL};
static const struct op_param diagnose_params[] = {
	TARGET_PARAM,
	{"playbook", OP_STR, 1,
	 "hang (stuck? where? which rank?), leak (does memory grow, and "
	 "what), slow (where the time goes), dataloader (does training wait "
	 "for data)",
	 playbooks},
	{"duration", OP_STR, 0,
	 "how long to watch: hang 2s, leak 10s, slow and dataloader 5s by "
	 "default; at most 2m",
	 NULL},
	END_PARAMS};
static const struct op_param eval_params[] = {
	TARGET_PARAM,
	{"code", OP_STR, 1,
	 "Python: an expression (its repr is returned) or statements (their "
	 "printed output is)",
	 NULL},
	END_PARAMS};

const struct op ops_all[] = {
	{"list_agents", "Processes with a Probing agent",
	 "Lists the Python processes on this machine that have a Probing "
	 "agent: pid, command line, address.  Start here to find the target "
	 "of the other tools.  A process without an agent can be given one by "
	 "a person (`probing -t PID inject`); this tool cannot.",
	 no_params, 0, RUN_MS, build_list},
	{"list_recordings", "Recordings, also of processes that ended",
	 "Lists what agents recorded on disk, one run per process, oldest "
	 "first: pid, rank and job, start, end and how it ended (exit code, "
	 "signal, exception) and its crash report file.  Use it when a "
	 "process has crashed, been killed or finished: its pid or run name "
	 "is then a target for query, memory, hangs and flamegraph.",
	 no_params, 0, RUN_MS, build_runs},
	{"backtrace", "Python stacks of every thread",
	 "Every thread's Python stack now, innermost frame first, without "
	 "pausing the process: what a stuck or slow program is doing.  "
	 "Threads stuck in C (a collective, a lock, I/O) are read too.  Ask "
	 "for locals to see the values in each frame, for native to see "
	 "the C/C++ frames too.",
	 backtrace_params, 0, RUN_MS, build_backtrace},
	{"query", "SQL over what the agent sees and recorded",
	 "Runs one SQL statement (SQLite) over the agent's tables and returns "
	 "the rows as JSON.  Live: python.backtrace, python.threads, "
	 "python.tensors, probing.config.  Recorded with a ts column (seconds "
	 "since the epoch): process.memory (RSS over time), profile.samples "
	 "with profile.stacks/frames, python.torch_trace (module times), "
	 "python.comm_collective, process.hangs.  now() and ago('5m') give "
	 "times: WHERE ts > ago('10m').  Call describe_tables first.",
	 query_params, 0, RUN_MS, build_query},
	{"describe_tables", "The tables and their columns",
	 "Lists every table the agent offers (schema.name, live or recorded, "
	 "what it holds), or, given one, its columns and types.  Use before "
	 "writing SQL for the query tool.",
	 tables_params, 0, RUN_MS, build_tables},
	{"memory", "Memory: process, Python objects, tensors",
	 "The process's memory: RSS and peak, Python objects by type (count "
	 "and bytes), and tensors by device.  Use for a leak or an "
	 "out-of-memory: call it twice a while apart and compare; the "
	 "series over time is process.memory (query).",
	 target_only, 0, RUN_MS, build_memory},
	{"flamegraph", "Where the time goes (sampled)",
	 "Samples every thread's stack for a while (5 s by default) and "
	 "returns the hottest functions, by the share of samples spent in "
	 "them (self) and below them (total).  Use for a slow program; ask "
	 "for native frames when the time is in C/C++.",
	 sample_params, 0, RUN_MS, build_flamegraph},
	{"torch_module_times", "Time per torch module and stage",
	 "Traces torch modules for a while (5 s by default): calls, total, "
	 "mean and max milliseconds of each module's forward and backward "
	 "and the optimizer step, with the memory they allocated.  Use for a "
	 "slow training step: which layer costs.  Tracing is switched off "
	 "again afterwards unless it was on.",
	 torch_params, 0, RUN_MS, build_torch},
	{"hangs", "The hangs the watchdog saw",
	 "Lists the hangs the agent's watchdog recorded (when the main "
	 "thread's stack stopped changing for hang.timeout): when, for how "
	 "long, where.  Given an id, that hang's stacks, Python and native.",
	 hangs_params, 0, RUN_MS, build_hangs},
	{"cluster_backtrace", "Every rank's stack, grouped",
	 "For a torchrun / torch.distributed job, given any rank's process: "
	 "every rank's main-thread stack, ranks with the same stack grouped, "
	 "the odd one out first.  Use when a distributed job hangs or one "
	 "rank is slow.",
	 target_only, 0, 2 * RUN_MS, build_cluster_bt},
	{"cluster_hang", "Which rank holds the job up",
	 "For a distributed job, given any rank's process: a verdict on a "
	 "hang from each rank's collectives (python.comm_collective) and "
	 "stacks — which ranks wait in which collective, which rank has not "
	 "reached it and where it is, or mismatched collectives.",
	 target_only, 0, 2 * RUN_MS, build_cluster_hang},
	{"diagnose", "A diagnostic playbook: verdict and evidence",
	 "Runs a fixed sequence of looks at the process (backtraces, SQL "
	 "over what it recorded, a few seconds of sampling, the cluster's "
	 "collectives) and returns a short verdict with the evidence and the "
	 "commands to look further.  Start here when the question is "
	 "\"is it stuck\", \"does it leak\", \"why is it slow\" or \"is "
	 "it waiting for data\"; it takes the duration it watches plus a "
	 "few seconds.",
	 diagnose_params, 0, 2 * RUN_MS, build_diagnose},
	{"report", "A crash or hang report file",
	 "Shows a crash or hang report the agent wrote (the stacks of the "
	 "crashed or stuck thread first, Python and native, with source "
	 "lines).  The files are listed by list_recordings (report) and "
	 "hangs, and as resources.",
	 report_params, 0, RUN_MS, build_report},
	{"eval", "Run Python in the target",
	 "Runs Python code in the target process (in its main module's "
	 "namespace) and returns what it printed and the value.  It changes "
	 "the live program: use it only to read what the other tools cannot "
	 "(a model's attribute, a config value).",
	 eval_params, OP_EVAL, RUN_MS, build_eval},
	{NULL, NULL, NULL, NULL, 0, 0, NULL},
};

const struct op *ops_find(const char *name)
{
	for (const struct op *op = ops_all; op->name; op++)
		if (!strcmp(op->name, name))
			return op;
	return NULL;
}

/* ---- checking and running ---------------------------------------------- */

static const char *type_name(enum op_type t)
{
	return t == OP_BOOL ? "boolean" : t == OP_INT ? "integer" : "string";
}

static int type_ok(const struct op_param *p, const cJSON *v)
{
	switch (p->type) {
	case OP_BOOL:
		return cJSON_IsBool(v);
	case OP_INT:
		return cJSON_IsNumber(v) &&
		       v->valuedouble == (int)v->valuedouble;
	default:
		return cJSON_IsString(v);
	}
}

int ops_check(const char *name, const struct op_param *params,
	      const cJSON *args, char *err, size_t errlen)
{
	const struct op_param *p;
	const cJSON *v;

	if (args && !cJSON_IsObject(args)) {
		snprintf(err, errlen, "%s: the arguments are not an object",
			 name);
		return -1;
	}
	cJSON_ArrayForEach(v, args)
	{
		for (p = params; p->name; p++)
			if (!strcmp(p->name, v->string))
				break;
		if (!p->name) {
			snprintf(err, errlen, "%s takes no argument '%s'", name,
				 v->string);
			return -1;
		}
	}
	for (p = params; p->name; p++) {
		v = cJSON_GetObjectItemCaseSensitive(args, p->name);
		if (!v || cJSON_IsNull(v)) {
			if (p->required) {
				snprintf(err, errlen, "%s needs '%s' (%s)",
					 name, p->name, p->doc);
				return -1;
			}
			continue;
		}
		if (!type_ok(p, v)) {
			snprintf(err, errlen, "%s: '%s' is a %s", name, p->name,
				 type_name(p->type));
			return -1;
		}
		if (p->type == OP_STR && p->choices) {
			const char *const *c = p->choices;

			while (*c && strcmp(*c, v->valuestring))
				c++;
			if (!*c) {
				snprintf(err, errlen,
					 "%s: '%s' is not one of the choices "
					 "(the schema's enum)",
					 name, p->name);
				return -1;
			}
		}
		if (p->type == OP_STR && !*v->valuestring && p->required) {
			snprintf(err, errlen, "%s: '%s' is empty", name,
				 p->name);
			return -1;
		}
	}
	return 0;
}

int ops_run(const struct op *op, const cJSON *args, struct op_result *r,
	    char *err, size_t errlen)
{
	struct op_words w = {.n = 0};
	int ms = 0;

	memset(r, 0, sizeof(*r));
	if (ops_check(op->name, op->params, args, err, errlen))
		return -1;
	if (op->build(args, &w, err, errlen)) {
		if (!*err)
			snprintf(err, errlen, "%s: too many words", op->name);
		return -1;
	}
	if (cJSON_GetObjectItemCaseSensitive(args, "duration"))
		ops_duration(args, SAMPLE_DEFAULT, &ms, err, errlen);
	return ops_exec(&w, op->timeout_ms + ms, r, err, errlen);
}

int ops_exec(const struct op_words *w, int timeout_ms, struct op_result *r,
	     char *err, size_t errlen)
{
	struct selfrun_result sr;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = selfrun(w->w, timeout_ms, OUT_MAX, &sr);
	if (rc) {
		snprintf(err, errlen, "could not run probing: %s",
			 strerror(-rc));
		return -1;
	}
	r->status = sr.status;
	r->ok = sr.status == 0;
	if (r->ok || !*sr.err) {
		r->text = sr.out;
		sr.out = NULL;
	} else if (asprintf(&r->text, "%s%s%s", sr.err, *sr.out ? "\n" : "",
			    sr.out) < 0) {
		r->text = NULL;
	}
	if (r->text && sr.out_cut && r->ok) {
		char *t;

		if (asprintf(&t, "%s\n[cut: more than %u bytes]", r->text,
			     OUT_MAX) >= 0) {
			free(r->text);
			r->text = t;
		}
	}
	if (r->status == -1 && r->text) {
		char *t;

		if (asprintf(&t, "%sprobing: gave up after %d s\n", r->text,
			     timeout_ms / 1000) >= 0) {
			free(r->text);
			r->text = t;
		}
	}
	selfrun_free(&sr);
	if (!r->text) {
		snprintf(err, errlen, "no memory");
		return -1;
	}
	return 0;
}

void ops_result_free(struct op_result *r)
{
	free(r->text);
	r->text = NULL;
}

cJSON *ops_schema(const struct op *op)
{
	cJSON *s = cJSON_CreateObject(), *props, *req, *p, *e;

	cJSON_AddStringToObject(s, "type", "object");
	props = cJSON_AddObjectToObject(s, "properties");
	req = cJSON_AddArrayToObject(s, "required");
	for (const struct op_param *q = op->params; q->name; q++) {
		p = cJSON_AddObjectToObject(props, q->name);
		cJSON_AddStringToObject(p, "type", type_name(q->type));
		cJSON_AddStringToObject(p, "description", q->doc);
		if (q->choices) {
			e = cJSON_AddArrayToObject(p, "enum");
			for (const char *const *c = q->choices; *c; c++)
				cJSON_AddItemToArray(e, cJSON_CreateString(*c));
		}
		if (q->required)
			cJSON_AddItemToArray(req, cJSON_CreateString(q->name));
	}
	cJSON_AddBoolToObject(s, "additionalProperties", 0);
	return s;
}
