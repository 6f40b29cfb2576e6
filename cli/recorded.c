/*
 * recorded: a recording as a target.  See recorded.h.
 */
#include "recorded.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dap_msg.h"
#include "flamereq.h"
#include "resultjson.h"
#include "sqlglobal.h"
#include "store.h"
#include "tracereq.h"

#define QUERY_ROWS_DEFAULT 10000
#define QUERY_TIMEOUT_DEFAULT 5000

struct recorded {
	struct store *st;
	struct run_info info;
};

/* ---- run.json, end.json -------------------------------------------------- */

static cJSON *read_json(const char *path)
{
	char buf[16384];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return cJSON_Parse(buf);
}

static void copy_str(char *out, size_t outlen, const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	snprintf(out, outlen, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static double get_num(const cJSON *o, const char *key, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (cJSON_IsNumber(v))
		return v->valuedouble;
	if (cJSON_IsString(v) && isdigit((unsigned char)v->valuestring[0]))
		return strtod(v->valuestring, NULL);
	return def;
}

int recorded_info(const char *dir, struct run_info *out)
{
	char path[RUNDIR_PATH_MAX + 32], host[64] = "";
	const char *slash;
	struct stat sb;
	cJSON *run, *end;

	memset(out, 0, sizeof(*out));
	if (strlen(dir) >= sizeof(out->dir))
		return -ENAMETOOLONG;
	snprintf(out->dir, sizeof(out->dir), "%s", dir);
	slash = strrchr(dir, '/');
	snprintf(out->name, sizeof(out->name), "%s", slash ? slash + 1 : dir);
	snprintf(path, sizeof(path), "%s/run.json", dir);
	run = read_json(path);
	if (!run)
		return errno == ENOENT ? -ENOENT : -EINVAL;
	out->pid = (int)get_num(run, "pid", 0);
	out->start = get_num(run, "start", 0);
	out->rank = (int)get_num(run, "rank", -1);
	copy_str(out->host, sizeof(out->host), run, "host");
	copy_str(out->command, sizeof(out->command), run, "command");
	copy_str(out->job, sizeof(out->job), run, "job");
	cJSON_Delete(run);
	snprintf(path, sizeof(path), "%s/end.json", dir);
	end = read_json(path);
	if (end) {
		out->end = get_num(end, "end", 0);
		copy_str(out->how, sizeof(out->how), end, "how");
		copy_str(out->report, sizeof(out->report), end, "report");
		out->code = (int)get_num(
			end, !strcmp(out->how, "signal") ? "signal" : "code",
			0);
		cJSON_Delete(end);
	}
	for (size_t i = 0; i < rundir_nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, rundir_files[i]);
		if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue;
		out->bytes += (uint64_t)sb.st_size;
		if ((double)sb.st_mtime > out->last_write)
			out->last_write = (double)sb.st_mtime;
	}
	gethostname(host, sizeof(host) - 1);
	out->alive = !out->end && !strcmp(host, out->host) &&
		     rundir_alive(out->pid, out->start);
	return 0;
}

struct each {
	void (*fn)(const struct run_info *ri, void *arg);
	void *arg;
	int n;
};

static void each_one(const char *path, const char *name, void *arg)
{
	struct each *e = arg;
	struct run_info ri;

	(void)name;
	if (recorded_info(path, &ri) == 0) {
		e->fn(&ri, e->arg);
		e->n++;
	}
}

int recorded_runs(void (*fn)(const struct run_info *ri, void *arg), void *arg,
		  char *root, size_t rootlen)
{
	struct each e = {fn, arg, 0};
	struct stat sb;
	int rc;

	rc = rundir_root(getenv("PROBING_DATA_DIR"), root, rootlen);
	if (rc)
		return rc;
	if (stat(root, &sb) < 0)
		return errno == ENOENT ? 0 : -errno;
	rundir_walk(root, each_one, &e, 0);
	return e.n;
}

/* ---- finding one ----------------------------------------------------------
 */

struct pick {
	int pid;	  /* by pid (this host's), or */
	const char *name; /* by name */
	char host[64];
	char dir[RUNDIR_PATH_MAX];
	double start;
	int found;
};

static void pick_one(const struct run_info *ri, void *arg)
{
	struct pick *p = arg;

	if (p->name ? strcmp(ri->name, p->name) != 0
		    : ri->pid != p->pid || strcmp(ri->host, p->host) != 0)
		return;
	/* The newest of a pid's recordings (an agent started again in one
	 * process has name.2, same start: the later name). */
	if (p->found && (ri->start < p->start || (ri->start == p->start &&
						  strcmp(ri->dir, p->dir) < 0)))
		return;
	snprintf(p->dir, sizeof(p->dir), "%s", ri->dir);
	p->start = ri->start;
	p->found = 1;
}

int recorded_find(const char *text, char *dir, size_t dirlen)
{
	char path[RUNDIR_PATH_MAX + 16], root[RUNDIR_PATH_MAX], *end;
	struct pick p = {0};
	struct stat sb;
	long pid;

	if (!text || !*text)
		return 0;
	if (strchr(text, '/')) {
		/* A directory with run.json; a unix socket's path is not. */
		snprintf(path, sizeof(path), "%s/run.json", text);
		if (stat(text, &sb) < 0 || !S_ISDIR(sb.st_mode) ||
		    access(path, R_OK) < 0 || !realpath(text, path) ||
		    strlen(path) >= dirlen)
			return 0;
		snprintf(dir, dirlen, "%s", path);
		return 1;
	}
	errno = 0;
	pid = strtol(text, &end, 10);
	if (!*end && !errno && pid > 0 && pid <= INT_MAX) {
		snprintf(path, sizeof(path), "/proc/%ld", pid);
		if (access(path, F_OK) == 0)
			return 0; /* it runs: the agent answers for it */
		p.pid = (int)pid;
		gethostname(p.host, sizeof(p.host) - 1);
	} else if (strchr(text, '-') && !strchr(text, ':')) {
		p.name = text;
	} else {
		return 0;
	}
	if (recorded_runs(pick_one, &p, root, sizeof(root)) <= 0 || !p.found ||
	    strlen(p.dir) >= dirlen)
		return 0;
	snprintf(dir, dirlen, "%s", p.dir);
	return 1;
}

struct job {
	const char *job;
	struct run_info *v;
	size_t n, cap;
	int nomem;
};

static void add_rank(const struct run_info *ri, void *arg)
{
	struct job *k = arg;

	if (strcmp(ri->job, k->job) || ri->alive)
		return;
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct run_info *v = realloc(k->v, cap * sizeof(*v));

		if (!v) {
			k->nomem = 1;
			return;
		}
		k->v = v;
		k->cap = cap;
	}
	k->v[k->n++] = *ri;
}

static int by_rank(const void *a, const void *b)
{
	const struct run_info *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

int recorded_job(const char *job, struct run_info **out, size_t *n)
{
	struct job k = {job, NULL, 0, 0, 0};
	char root[RUNDIR_PATH_MAX];

	*out = NULL;
	*n = 0;
	if (!job[0])
		return 0;
	recorded_runs(add_rank, &k, root, sizeof(root));
	if (k.nomem) {
		free(k.v);
		return -ENOMEM;
	}
	if (k.n)
		qsort(k.v, k.n, sizeof(*k.v), by_rank);
	*out = k.v;
	*n = k.n;
	return 0;
}

struct earlier {
	int pid;
	char host[64];
	char name[160];
	double start;
};

static void pick_earlier(const struct run_info *ri, void *arg)
{
	struct earlier *e = arg;

	if (ri->pid != e->pid || ri->alive || strcmp(ri->host, e->host) ||
	    ri->start < e->start)
		return;
	snprintf(e->name, sizeof(e->name), "%s", ri->name);
	e->start = ri->start;
}

int recorded_earlier(int pid, char *name, size_t namelen)
{
	struct earlier e = {.pid = pid};
	char root[RUNDIR_PATH_MAX];

	gethostname(e.host, sizeof(e.host) - 1);
	if (recorded_runs(pick_earlier, &e, root, sizeof(root)) <= 0 ||
	    !e.name[0])
		return 0;
	snprintf(name, namelen, "%s", e.name);
	return 1;
}

/* ---- reading it --------------------------------------------------------- */

int recorded_open(const char *dir, struct recorded **out, char *err,
		  size_t errlen)
{
	struct recorded *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = recorded_info(dir, &r->info);
	if (rc) {
		snprintf(err, errlen,
			 "%s: not a recording (no readable "
			 "run.json)",
			 dir);
		free(r);
		return rc;
	}
	/* Its files are being written: the agent answers for it. */
	if (r->info.alive) {
		snprintf(err, errlen,
			 "process %d still runs: ask its agent (probing -t %d "
			 "...); its recording is read once it has ended",
			 r->info.pid, r->info.pid);
		free(r);
		return -EBUSY;
	}
	rc = store_open_recording(dir, &r->st, err, errlen);
	if (rc) {
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void recorded_free(struct recorded *r)
{
	if (!r)
		return;
	store_free(r->st);
	free(r);
}

const struct run_info *recorded_run(const struct recorded *r)
{
	return &r->info;
}

void recorded_utc(double t, char *out, size_t outlen)
{
	time_t s = (time_t)t;
	struct tm tm;

	if (t <= 0) {
		snprintf(out, outlen, "-");
		return;
	}
	gmtime_r(&s, &tm);
	strftime(out, outlen, "%Y-%m-%d %H:%M:%S", &tm);
}

void recorded_how(const struct run_info *ri, char *out, size_t outlen)
{
	if (!strcmp(ri->how, "exit"))
		snprintf(out, outlen, "exit %d", ri->code);
	else if (!strcmp(ri->how, "signal"))
		snprintf(out, outlen, "signal %d", ri->code);
	else if (!strcmp(ri->how, "exception"))
		snprintf(out, outlen, "exception");
	else if (ri->alive)
		snprintf(out, outlen, "running");
	else
		snprintf(out, outlen, "unknown");
}

void recorded_describe(const struct run_info *ri, char *out, size_t outlen)
{
	char when[64], how[32];

	recorded_how(ri, how, sizeof(how));
	if (ri->alive) {
		snprintf(out, outlen, "process %d (%.80s) still runs", ri->pid,
			 ri->command);
		return;
	}
	recorded_utc(ri->end ? ri->end : ri->last_write, when, sizeof(when));
	if (ri->end)
		snprintf(out, outlen,
			 "process %d (%.80s) ended at %s UTC (%s%s%s)", ri->pid,
			 ri->command, when, how,
			 ri->report[0] ? ", report " : "", ri->report);
	else
		snprintf(out, outlen,
			 "process %d (%.80s) has ended, how is not known "
			 "(killed, or os._exit); last written at %s UTC",
			 ri->pid, ri->command, when);
}

/* The live tables: in no recording. */
static const char *const live_tables[] = {
	"python.backtrace",    "python.threads", "python.tensors",
	"python.comm_metrics", "probing.config", "cluster.nodes",
};

/* ---- global.<schema>.<table>: every rank of the job, from its recording */

#define GLOBAL_REFS_MAX 8

/*
 * The SQL with each global.<schema>.<table> replaced by a temp table of
 * that table on every rank of this recording's job (itself alone when it
 * is no rank of one); *ntemp temp tables made (global_0, ...).  NULL
 * with err when that cannot be done; notes gets what was left out.
 */
static char *globalize(struct recorded *r, const char *sql, size_t max_rows,
		       int *ntemp, char *notes, size_t noteslen, char *err,
		       size_t errlen)
{
	struct sqlglobal_ref refs[GLOBAL_REFS_MAX];
	int nrefs = sqlglobal_refs(sql, refs, GLOBAL_REFS_MAX);
	struct run_info *ranks = NULL;
	size_t nranks = 0;
	struct store_source *src = NULL;
	char *out = NULL;
	size_t len = strlen(sql), cap, at = 0, nl = 0;

	*ntemp = 0;
	if (nrefs <= 0)
		return NULL;
	if (nrefs > GLOBAL_REFS_MAX) {
		snprintf(err, errlen, "more than %d global tables in one query",
			 GLOBAL_REFS_MAX);
		return NULL;
	}
	/* Not a rank of a job: itself alone. */
	if (!r->info.job[0])
		ranks = malloc(sizeof(*ranks));
	if (ranks) {
		ranks[0] = r->info;
		nranks = 1;
	} else if (r->info.job[0] &&
		   recorded_job(r->info.job, &ranks, &nranks)) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	src = calloc(nranks ? nranks : 1, sizeof(*src));
	cap = len + (size_t)nrefs * 32 + 1;
	out = malloc(cap);
	if (!src || !out || !nranks) {
		snprintf(err, errlen,
			 nranks ? "out of memory"
				: "no recording of the job's ranks");
		goto fail;
	}
	for (size_t i = 0; i < nranks; i++) {
		src[i].dir = ranks[i].dir;
		src[i].rank = ranks[i].rank >= 0 ? ranks[i].rank : (int64_t)i;
		src[i].host = ranks[i].host;
	}
	for (int i = 0; i < nrefs; i++) {
		char schema[64], name[32], more[512];
		const char *table = strchr(refs[i].name, '.');
		int rc;

		snprintf(schema, sizeof(schema), "%.*s",
			 (int)(table - refs[i].name), refs[i].name);
		snprintf(name, sizeof(name), "global_%d", i);
		rc = store_gather_recorded(r->st, name, schema, table + 1, src,
					   nranks, max_rows, more, sizeof(more),
					   err, errlen);
		if (rc)
			goto fail;
		(*ntemp)++;
		if (more[0] && nl < noteslen)
			nl += (size_t)snprintf(notes + nl, noteslen - nl,
					       "%s%s", nl ? "\n" : "", more);
		/* The text up to the reference, then the temp table. */
		memcpy(out + at, sql + (i ? refs[i - 1].end : 0),
		       refs[i].start - (i ? refs[i - 1].end : 0));
		at += refs[i].start - (i ? refs[i - 1].end : 0);
		at += (size_t)snprintf(out + at, cap - at, "temp.%s", name);
	}
	snprintf(out + at, cap - at, "%s", sql + refs[nrefs - 1].end);
	free(src);
	free(ranks);
	return out;
fail:
	free(src);
	free(ranks);
	free(out);
	return NULL;
}

static void drop_temps(struct recorded *r, int n)
{
	for (int i = 0; i < n; i++) {
		char sql[64];

		snprintf(sql, sizeof(sql),
			 "DROP TABLE IF EXISTS temp.global_%d", i);
		store_exec(r->st, sql, NULL, 0);
	}
}

static struct dap_message *answer_query(struct recorded *r, const cJSON *args)
{
	const cJSON *sql = cJSON_GetObjectItemCaseSensitive(args, "sql");
	const cJSON *mr = cJSON_GetObjectItemCaseSensitive(args, "maxRows");
	const cJSON *to = cJSON_GetObjectItemCaseSensitive(args, "timeoutMs");
	struct store_limits lim = {0};
	struct store_result res = {0};
	struct dap_message *resp;
	char err[1024] = "", notes[1024] = "", *global;
	int rc, ntemp = 0;

	if (!cJSON_IsString(sql))
		return dap_error_new(0, "probing/query", DAP_ERROR_FAILED,
				     "argument 'sql' is required");
	lim.max_rows = cJSON_IsNumber(mr) && mr->valuedouble >= 1
			       ? (size_t)mr->valuedouble
			       : QUERY_ROWS_DEFAULT;
	lim.timeout_ms = cJSON_IsNumber(to) && to->valuedouble >= 1
				 ? (int)to->valuedouble
				 : QUERY_TIMEOUT_DEFAULT;
	global = globalize(r, sql->valuestring, lim.max_rows, &ntemp, notes,
			   sizeof(notes), err, sizeof(err));
	if (!global && err[0]) {
		drop_temps(r, ntemp);
		return dap_error_new(0, "probing/query", DAP_ERROR_SQL, "%s",
				     err);
	}
	rc = store_query(r->st, global ? global : sql->valuestring, &lim, &res,
			 err, sizeof(err));
	free(global);
	drop_temps(r, ntemp);
	if (rc) {
		const char *live = NULL;

		for (size_t i = 0;
		     i < sizeof(live_tables) / sizeof(live_tables[0]); i++)
			if (strstr(sql->valuestring, live_tables[i]))
				live = live_tables[i];
		store_result_release(&res);
		if (rc == STORE_ESQL && live && strstr(err, "no such table"))
			return dap_error_new(
				0, "probing/query", DAP_ERROR_SQL,
				"%s\nhint: %s is a live table (the process as "
				"it is now): a recording has the recorded "
				"tables only; probing.tables lists them",
				err, live);
		return dap_error_new(0, "probing/query",
				     rc == STORE_ESQL ? DAP_ERROR_SQL
						      : DAP_ERROR_FAILED,
				     "%s", err);
	}
	resp = dap_response_new(0, "probing/query", 1, NULL);
	if (resp && notes[0]) {
		cJSON *arr = cJSON_AddArrayToObject(resp->body, "notes");

		for (char *line = strtok(notes, "\n"); arr && line;
		     line = strtok(NULL, "\n"))
			cJSON_AddItemToArray(arr, cJSON_CreateString(line));
	}
	if (resp && store_result_json(&res, resp->body)) {
		dap_message_free(resp);
		resp = NULL;
	}
	store_result_release(&res);
	return resp;
}

/* One number from the recording, or def. */
static double query_num(struct recorded *r, const char *sql, double def)
{
	struct store_result res = {0};
	char err[256];
	double v = def;

	if (store_query(r->st, sql, NULL, &res, err, sizeof(err)) == 0 &&
	    res.nrows == 1 && res.ncols == 1) {
		if (res.cells[0].type == STORE_INT)
			v = (double)res.cells[0].u.i;
		else if (res.cells[0].type == STORE_REAL)
			v = res.cells[0].u.d;
	}
	store_result_release(&res);
	return v;
}

/* "script.py (pid N)": the first argument after the program that is
 * not an option, as the agent names it. */
static void program_name(const struct run_info *ri, char *out, size_t outlen)
{
	const char *p = ri->command, *sp = strchr(p, ' '), *slash;
	char word[256];

	if (sp) {
		p = sp + 1;
		while (*p == '-')
			p = (sp = strchr(p, ' ')) ? sp + 1 : p + strlen(p);
	}
	snprintf(word, sizeof(word), "%.*s", (int)strcspn(p, " "), p);
	slash = strrchr(word, '/');
	snprintf(out, outlen, "%s (pid %d)", slash ? slash + 1 : word, ri->pid);
}

/* What a flamegraph or a trace of the recording needs that its tables do
 * not say; name (the title's) is the caller's. */
static void recorded_env(struct recorded *r, struct flamereq_env *env,
			 char *name, size_t namelen)
{
	const struct run_info *ri = &r->info;

	memset(env, 0, sizeof(*env));
	/* The rate the samples were taken at, per thread, from how many
	 * there are (profile.hz is not recorded). */
	env->hz = (int)(query_num(r,
				 "SELECT count(*) * 1.0 / count(DISTINCT "
				 "thread_id) / (max(ts) - min(ts)) FROM "
				 "profile.samples",
				 0) +
		       0.5);
	/* The run's start: a window without one is the whole run. */
	env->since =
		ri->start > 0
			? ri->start
			: query_num(r, "SELECT min(ts) FROM profile.samples", 0);
	if (ri->alive)
		env->now = (double)time(NULL);
	else if (ri->end)
		env->now = ri->end;
	else
		env->now = query_num(r, "SELECT max(ts) FROM profile.samples",
				     ri->last_write);
	/* The run's ends are said in whole seconds (start: the kernel's
	 * boot time and ticks; end.json): what was recorded around them
	 * belongs to the run all the same. */
	for (int i = 0; i < 2; i++) {
		static const char *const table[] = {"profile.samples",
						    "process.memory"};
		char sql[96];
		double v;

		snprintf(sql, sizeof(sql), "SELECT max(ts) FROM %s", table[i]);
		if ((v = query_num(r, sql, 0)) > env->now)
			env->now = v;
		snprintf(sql, sizeof(sql), "SELECT min(ts) FROM %s", table[i]);
		if ((v = query_num(r, sql, 0)) > 0 && v < env->since)
			env->since = v;
	}
	program_name(ri, name, namelen);
	env->name = name;
	env->pid = ri->pid;
}

static struct dap_message *answer_flamegraph(struct recorded *r,
					     const cJSON *args)
{
	struct flamereq_env env;
	struct dap_message *resp;
	char name[300], err[512];

	recorded_env(r, &env, name, sizeof(name));
	resp = dap_response_new(0, "probing/flamegraph", 1, NULL);
	if (resp &&
	    flamereq_answer(r->st, args, &env, resp->body, err, sizeof(err))) {
		dap_message_free(resp);
		resp = dap_error_new(0, "probing/flamegraph", DAP_ERROR_FAILED,
				     "%s", err);
	}
	return resp;
}

/* probing/trace of a recording: by default the whole run. */
static struct dap_message *answer_trace(struct recorded *r, const cJSON *args)
{
	struct flamereq_env env;
	struct dap_message *resp;
	char name[300], err[512];

	recorded_env(r, &env, name, sizeof(name));
	resp = dap_response_new(0, "probing/trace", 1, NULL);
	if (resp &&
	    tracereq_answer(r->st, args, &env, resp->body, err, sizeof(err))) {
		dap_message_free(resp);
		resp = dap_error_new(0, "probing/trace", DAP_ERROR_FAILED, "%s",
				     err);
	}
	return resp;
}

/* probing/memory of a recording: the last process.memory row (the
 * objects and tensors are counted live only). */
static struct dap_message *answer_memory(struct recorded *r)
{
	static const char *const keys[] = {"rss",  "vms",  "shared",
					   "peak", "swap", "threads"};
	struct store_result res = {0};
	struct dap_message *resp;
	char err[512], when[64];
	cJSON *p;

	if (store_query(r->st,
			"SELECT rss, vms, shared, peak, swap, threads, ts FROM "
			"process.memory ORDER BY ts DESC LIMIT 1",
			NULL, &res, err, sizeof(err)) ||
	    res.nrows != 1) {
		store_result_release(&res);
		return dap_error_new(0, "probing/memory", DAP_ERROR_FAILED,
				     "the recording has no process.memory rows "
				     "(memory.interval_ms was 0?)");
	}
	resp = dap_response_new(0, "probing/memory", 1, NULL);
	p = resp ? cJSON_AddObjectToObject(resp->body, "process") : NULL;
	for (size_t i = 0; p && i < 6; i++) {
		const struct store_value *v = &res.cells[i];

		cJSON_AddNumberToObject(p, keys[i],
					v->type == STORE_REAL  ? v->u.d
					: v->type == STORE_INT ? (double)v->u.i
							       : 0);
	}
	recorded_utc(res.cells[6].type == STORE_REAL ? res.cells[6].u.d : 0,
		     when, sizeof(when));
	if (resp) {
		char msg[600];

		snprintf(msg, sizeof(msg),
			 "the last figures recorded, at %s UTC; Python objects "
			 "and tensors are counted in a running process only; "
			 "the series: query 'SELECT * FROM process.memory'",
			 when);
		cJSON_AddStringToObject(resp->body, "message", msg);
	}
	store_result_release(&res);
	return resp;
}

int recorded_request(struct recorded *r, const char *command, const cJSON *args,
		     struct dap_message **resp)
{
	*resp = NULL;
	if (!strcmp(command, "probing/query"))
		*resp = answer_query(r, args);
	else if (!strcmp(command, "probing/flamegraph"))
		*resp = answer_flamegraph(r, args);
	else if (!strcmp(command, "probing/trace"))
		*resp = answer_trace(r, args);
	else if (!strcmp(command, "probing/memory"))
		*resp = answer_memory(r);
	else
		return -ENOTSUP;
	return *resp ? 0 : -ENOMEM;
}
