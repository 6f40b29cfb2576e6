/*
 * config: a fixed table of settings.  See config.h.
 */
#include "config.h"
#include "env.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster_addr.h"
#include "config_compat.h"
#include "dap_addr.h"
#include "forensics/crash.h"
#include "forensics/hang.h"
#include "record.h"
#include "server/server.h"
#include "torch/torch_rate.h"
#include "torch/watch.h"

/* K_LATCH: a K_BOOL that, once on, cannot be set off (server.readonly).
 * K_TEXT: checked by the setting's check function.  K_SWITCH: on/off with
 * options, "on,key=value,...": each key names the setting <prefix>.<key>
 * (prefix: the switch's name up to its last dot; see option_alias), set
 * along with it. */
enum kind { K_INT, K_BOOL, K_ADDR, K_INFO, K_TEXT, K_SWITCH, K_LATCH };

typedef int (*check_fn)(const char *text, char *canon, size_t canonlen,
			char *err, size_t errlen);

struct setting {
	const char *name;
	enum kind kind;
	const char *def;
	int64_t min, max;      /* K_INT bounds */
	const char *doc;
	char value[CONFIG_VALUE_MAX];
	int set;
	unsigned flags; /* CONFIG_RUNS_CODE, _WRITES, _SIGNALS */
};

static struct setting settings[] = {
	{"agent.version", K_INFO, "", 0, 0, "Probing version of this agent", "",
	 0, 0},
	{"agent.pid", K_INFO, "", 0, 0, "process id", "", 0, 0},
	{"agent.python", K_INFO, "", 0, 0,
	 "the CPython version this agent is built for", "", 0, 0},
	{"agent.stack_reader", K_INFO, "", 0, 0,
	 "reading stacks without the GIL (sampler, backtraces of threads in "
	 "C, crash and hang reports): ok, or off and why (checked against "
	 "the running interpreter at start-up)",
	 "", 0, 0},
	{"agent.address", K_INFO, "", 0, 0, "addresses the agent listens on",
	 "", 0, 0},
	{"cluster.status", K_INFO, "", 0, 0,
	 "this agent in its distributed job: rank, registration in the "
	 "rendezvous store",
	 "", 0, 0},
	{"cluster.listen_host", K_TEXT, "auto", 0, 0,
	 "where a rank of a torch.distributed job listens and registers: "
	 "auto (loopback when the job is on one host, else route), loopback, "
	 "route (the address that reaches MASTER_ADDR), or an IP address "
	 "(0.0.0.0: all); beyond loopback with the job's token, read at start",
	 "", 0, 0},
	{"server.listen", K_ADDR, "", 0, 0,
	 "TCP address to listen on as well (host:port; a new value moves "
	 "the listener; empty: unix socket only)",
	 "", 0, 0},
	{"server.listen_error", K_INFO, "", 0, 0,
	 "why the agent does not listen where server.listen said (the "
	 "address it refused, and why); empty once server.listen is set "
	 "again",
	 "", 0, 0},
	{"server.max_clients", K_INT, "64", 1, SERVER_TCP_MAX,
	 "TCP clients connected at once (the unix socket's own user is "
	 "served beyond it)",
	 "", 0, 0},
	{"server.readonly", K_LATCH, "off", 0, 0,
	 "read-only mode: no evaluate, setVariable or debugger (on only: it "
	 "cannot be switched off at run time; PROBING_READONLY=1)",
	 "", 0, 0},
	{"server.token", K_INFO, "", 0, 0,
	 "where the token TCP clients must present comes from (a file, "
	 "PROBING_TOKEN; empty: none)",
	 "", 0, 0},
	{"python.gil_timeout_ms", K_INT, "500", 10, 60000,
	 "wait this long for the GIL before answering without it", "", 0, 0},
	{"python.repr_max", K_INT, "200", 16, 65536,
	 "characters of a variable's repr shown", "", 0, 0},
	{"python.max_depth", K_INT, "256", 1, 512, "frames per thread shown",
	 "", 0, 0},
	{"eval.timeout_ms", K_INT, "30000", 0, 86400000,
	 "interrupt evaluated code after this long (0: never)", "", 0, 0},
	{"query.max_rows", K_INT, "10000", 1, 1000000,
	 "rows a query returns at most", "", 0, 0},
	{"query.timeout_ms", K_INT, "5000", 1, 600000,
	 "a query is stopped after this long", "", 0, 0},
	{"profile.hz", K_INT, "100", 1, 10000,
	 "profiler samples per second (when a request gives no rate)", "", 0,
	 0},
	{"profile.max_depth", K_INT, "256", 1, 512,
	 "Python frames kept per stack sample", "", 0, 0},
	{"profile.idle", K_BOOL, "on", 0, 0,
	 "record idle and GIL-waiting samples, not only running ones", "", 0,
	 0},
	{"profile.native_idle", K_BOOL, "off", 0, 0,
	 "native stacks of idle and GIL-waiting threads too (the signal "
	 "interrupts their system call: C code may see EINTR)",
	 "", 0, CONFIG_SIGNALS},
	{"profile.tasks", K_BOOL, "on", 0, 0,
	 "attribute samples to the asyncio task they ran (an asyncio "
	 "program's tasks listed with the GIL once a second while the "
	 "profiler runs)",
	 "", 0, 0},
	{"profile.retention_rows", K_INT, "1000000", 1000, 100000000,
	 "samples kept in profile.samples (the oldest go first)", "", 0, 0},
	{"profile.retention_bytes", K_INT, "134217728", 1048576, 17179869184LL,
	 "bytes the profile tables may use (the oldest samples go first)", "",
	 0, 0},
	{"torch.profiling", K_SWITCH, "off", 0, 0,
	 "trace torch modules into python.torch_trace: on, off, or "
	 "on,exprs=VAR@FUNC;...,step_rate=N|auto,module_rate=N",
	 "", 0, 0},
	{"torch.watch", K_TEXT, "", 0, 0,
	 "locals recorded into python.variables once per traced step: "
	 "VAR@FUNC;VAR@FUNC",
	 "", 0, CONFIG_RUNS_CODE},
	{"torch.step_rate", K_TEXT, "auto", 0, 0,
	 "trace one optimizer step in N (steps where step % N == 0: the same "
	 "on every rank); auto: N a power of two that keeps tracing near "
	 "0.5% of the steps' time",
	 "", 0, 0},
	{"torch.module_rate", K_INT, "1", 1, 1000000,
	 "in a traced step, trace one module in N (rotating from step to "
	 "step)",
	 "", 0, 0},
	{"torch.backward", K_BOOL, "on", 0, 0,
	 "time the backward pass of traced modules too", "", 0, 0},
	{"torch.max_rows", K_INT, "500000", 100, 100000000,
	 "rows kept in python.torch_trace and python.variables (oldest go "
	 "first)",
	 "", 0, 0},
	{"torch.max_mb", K_INT, "128", 1, 65536,
	 "megabytes kept in python.torch_trace and python.variables", "", 0, 0},
	{"torch.status", K_INFO, "off", 0, 0, "what torch tracing does now", "",
	 0, 0},
	{"app.max_rows", K_INT, "100000", 100, 100000000,
	 "rows kept in each table of app (the program's @probing.table "
	 "tables, app.spans, app.steps; oldest go first)",
	 "", 0, 0},
	{"app.max_mb", K_INT, "16", 1, 65536,
	 "megabytes kept in each table of app", "", 0, 0},
	{"comm.record", K_BOOL, "on", 0, 0,
	 "record torch.distributed collectives and point-to-point calls "
	 "into python.comm_collective (once the program imports "
	 "torch.distributed)",
	 "", 0, 0},
	{"comm.ddp", K_BOOL, "on", 0, 0,
	 "record DistributedDataParallel's gradient all-reduces (through a "
	 "communication hook given to models made while recording is on)",
	 "", 0, 0},
	{"comm.max_rows", K_INT, "16384", 64, 4194304,
	 "calls kept in python.comm_collective (the oldest go first; read "
	 "when recording first starts)",
	 "", 0, 0},
	{"comm.status", K_INFO, "off", 0, 0,
	 "what torch.distributed recording does now", "", 0, 0},
	{"memory.interval_ms", K_INT, "1000", 0, 3600000,
	 "record process.memory this often (0: never)", "", 0, 0},
	{"memory.max_rows", K_INT, "86400", 10, 10000000,
	 "rows kept in process.memory (oldest go first)", "", 0, 0},
	{"memory.budget_ms", K_INT, "2000", 10, 60000,
	 "time the memory request may hold the GIL to walk objects", "", 0, 0},
	{"gpu.interval_ms", K_INT, "1000", 0, 3600000,
	 "record gpu.utilization (NVML: each GPU's utilization, memory, "
	 "power, clocks) this often (0: never)",
	 "", 0, 0},
	{"gpu.max_rows", K_INT, "86400", 10, 10000000,
	 "rows kept in gpu.utilization, one per device per sample (oldest go "
	 "first)",
	 "", 0, 0},
	{"data.dir", K_TEXT, "auto", 0, 0,
	 "where recorded tables are kept on disk, one directory per process: "
	 "auto ($XDG_STATE_HOME/probing or ~/.local/state/probing), an "
	 "absolute path, or off (memory only)",
	 "", 0, CONFIG_WRITES},
	{"data.flush_ms", K_INT, "1000", 100, 60000,
	 "copy what the recorded tables gained to disk this often", "", 0, 0},
	{"data.min_free_mb", K_INT, "256", 0, 16777216,
	 "free space the recording leaves on its file system for the "
	 "program, in megabytes (or data.min_free_pct, whichever is more): "
	 "it stops there and removes its files (0 and 0: no headroom)",
	 "", 0, CONFIG_WRITES},
	{"data.min_free_pct", K_INT, "2", 0, 90,
	 "free space the recording leaves on its file system for the "
	 "program, in percent of its size (or data.min_free_mb, whichever "
	 "is more)",
	 "", 0, CONFIG_WRITES},
	{"data.status", K_INFO, "", 0, 0,
	 "the recording on disk: where, how big, or why there is none", "", 0,
	 0},
	{"retention.days", K_INT, "7", 0, 36500,
	 "recorded rows older than this go, and recordings of processes "
	 "that ended longer ago (0: no bound)",
	 "", 0, CONFIG_WRITES},
	{"retention.max_mb", K_INT, "1024", 0, 16777216,
	 "megabytes all recordings under data.dir may take: the oldest "
	 "ended ones go first, then the running ones' oldest rows (0: no "
	 "bound)",
	 "", 0, CONFIG_WRITES},
	{"crash.enabled", K_BOOL, "off", 0, 0,
	 "on a fatal signal or an uncaught exception, write every thread's "
	 "stack to a report file and stderr (PROBING_CRASH=1)",
	 "", 0, CONFIG_WRITES},
	{"crash.path", K_TEXT, "", 0, 0,
	 "directory of crash and hang reports (empty: the working directory)",
	 "", 0, CONFIG_WRITES},
	{"hang.timeout", K_TEXT, "off", 0, 0,
	 "report a hang when the main thread's Python stack has not changed "
	 "for this long: 300s, 5m, 1h, off",
	 "", 0, CONFIG_WRITES | CONFIG_SIGNALS},
	{"hang.native", K_BOOL, "on", 0, 0,
	 "hang reports include each thread's native stack (one SIGURG per "
	 "thread)",
	 "", 0, CONFIG_SIGNALS},
	{"hang.max_rows", K_INT, "1000", 1, 100000,
	 "hangs kept in process.hangs (oldest go first)", "", 0, 0},
};

/* The check functions of the K_TEXT settings. */
static const struct {
	const char *name;
	check_fn check;
} checks[] = {
	{"torch.watch", watch_canon},
	{"torch.step_rate", torch_rate_canon},
	{"data.dir", record_dir_canon},
	{"crash.path", crash_path_canon},
	{"hang.timeout", hang_timeout_canon},
	{"cluster.listen_host", cluster_listen_host_canon},
};

/* Option keys of a switch that name a setting other than <prefix>.<key>. */
static const struct {
	const char *name, *key, *setting;
} option_alias[] = {
	{"torch.profiling", "exprs", "torch.watch"},
};

#define SWITCH_OPTS_MAX 8

struct option {
	struct setting *s;
	char value[CONFIG_VALUE_MAX]; /* canonical */
};

#define LISTENERS_MAX 16

static struct {
	char prefix[64];
	config_change_fn fn;
} listeners[LISTENERS_MAX];
static size_t nlisteners;

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct setting *find(const char *name)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

static int validate(const struct setting *s, const char *text, char *out,
		    char *err, size_t errlen);

/* The setting an option key of switch sw names. */
static struct setting *option_setting(const struct setting *sw,
				      const char *key)
{
	char name[CONFIG_VALUE_MAX + 64];
	const char *dot = strrchr(sw->name, '.');
	int n = dot ? (int)(dot - sw->name) : 0;

	for (size_t i = 0; i < sizeof(option_alias) / sizeof(option_alias[0]);
	     i++)
		if (!strcmp(option_alias[i].name, sw->name) &&
		    !strcmp(option_alias[i].key, key))
			return find(option_alias[i].setting);
	snprintf(name, sizeof(name), "%.*s.%s", n, sw->name, key);
	if (!strcmp(name, sw->name))
		return NULL;
	return find(name);
}

static int parse_bool(const char *text, int *out);

/*
 * Splits "on,key=value,..." into *on and validated options.  An item
 * without '=' continues the previous option's value, joined with ';' (so
 * "on,exprs=a@f,b@f" keeps both variables).
 */
static int parse_switch(const struct setting *sw, const char *text, int *on,
			struct option *opts, size_t *nopts, char *err,
			size_t errlen)
{
	char raw[SWITCH_OPTS_MAX][CONFIG_VALUE_MAX], item[CONFIG_VALUE_MAX];
	const char *p = text, *end;
	size_t n = 0, len;

	*nopts = 0;
	len = strcspn(p, ",");
	snprintf(item, sizeof(item), "%.*s", (int)len, p);
	if (parse_bool(item, on)) {
		snprintf(err, errlen, "%s: '%s' is not on/off", sw->name, item);
		return -EINVAL;
	}
	p += len;
	while (*p == ',') {
		p++;
		end = p + strcspn(p, ",");
		snprintf(item, sizeof(item), "%.*s", (int)(end - p), p);
		p = end;
		char *eq = strchr(item, '=');
		if (!item[0])
			continue;
		if (!eq) {
			size_t k = n ? strlen(raw[n - 1]) : 0;
			if (!n || k + strlen(item) + 2 > CONFIG_VALUE_MAX) {
				snprintf(err, errlen, "%s: '%s' is not "
					 "key=value", sw->name, item);
				return -EINVAL;
			}
			raw[n - 1][k] = ';';
			memcpy(raw[n - 1] + k + 1, item, strlen(item) + 1);
			continue;
		}
		*eq = 0;
		if (n == SWITCH_OPTS_MAX) {
			snprintf(err, errlen, "%s: more than %d options",
				 sw->name, SWITCH_OPTS_MAX);
			return -EINVAL;
		}
		opts[n].s = option_setting(sw, item);
		if (!opts[n].s || opts[n].s->kind == K_INFO ||
		    opts[n].s->kind == K_SWITCH) {
			snprintf(err, errlen, "%s: unknown option '%s'",
				 sw->name, item);
			return -EINVAL;
		}
		snprintf(raw[n], CONFIG_VALUE_MAX, "%s", eq + 1);
		n++;
	}
	for (size_t i = 0; i < n; i++)
		if (validate(opts[i].s, raw[i], opts[i].value, err, errlen))
			return -EINVAL;
	*nopts = n;
	return 0;
}

static const char *current(const struct setting *s)
{
	return s->set ? s->value : s->def;
}

static int parse_int(const struct setting *s, const char *text, int64_t *out,
		     char *err, size_t errlen)
{
	char *end;
	errno = 0;
	long long v = strtoll(text, &end, 10);
	if (errno || end == text || *end) {
		snprintf(err, errlen, "%s: '%s' is not an integer", s->name,
			 text);
		return -EINVAL;
	}
	if (v < s->min || v > s->max) {
		snprintf(err, errlen, "%s: %lld is out of range [%lld, %lld]",
			 s->name, v, (long long)s->min, (long long)s->max);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_bool(const char *text, int *out)
{
	static const char *yes[] = {"1", "on", "true", "yes"};
	static const char *no[] = {"0", "off", "false", "no", ""};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (strcasecmp(text, yes[i]) == 0)
			return *out = 1, 0;
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (strcasecmp(text, no[i]) == 0)
			return *out = 0, 0;
	return -EINVAL;
}

/* Validates text for s and writes its canonical form into out. */
static int validate(const struct setting *s, const char *text, char *out,
		    char *err, size_t errlen)
{
	int64_t i;
	int b;
	struct dap_addr addr;

	if (strlen(text) >= CONFIG_VALUE_MAX) {
		snprintf(err, errlen, "%s: value longer than %d bytes",
			 s->name, CONFIG_VALUE_MAX - 1);
		return -EINVAL;
	}
	switch (s->kind) {
	case K_INT:
		if (parse_int(s, text, &i, err, errlen))
			return -EINVAL;
		snprintf(out, CONFIG_VALUE_MAX, "%lld", (long long)i);
		return 0;
	case K_BOOL:
	case K_LATCH:
		if (parse_bool(text, &b)) {
			snprintf(err, errlen, "%s: '%s' is not on/off",
				 s->name, text);
			return -EINVAL;
		}
		snprintf(out, CONFIG_VALUE_MAX, "%s", b ? "on" : "off");
		return 0;
	case K_ADDR:
		if (*text && dap_addr_parse(text, &addr, err, errlen) != 0)
			return -EINVAL;
		snprintf(out, CONFIG_VALUE_MAX, "%s", text);
		return 0;
	case K_INFO:
		snprintf(err, errlen, "%s is read-only", s->name);
		return -EPERM;
	case K_TEXT:
		for (size_t k = 0; k < sizeof(checks) / sizeof(checks[0]); k++)
			if (!strcmp(checks[k].name, s->name))
				return checks[k].check(text, out,
						       CONFIG_VALUE_MAX, err,
						       errlen)
					       ? -EINVAL
					       : 0;
		snprintf(out, CONFIG_VALUE_MAX, "%s", text);
		return 0;
	case K_SWITCH: {
		struct option opts[SWITCH_OPTS_MAX];
		size_t n;
		if (parse_switch(s, text, &b, opts, &n, err, errlen))
			return -EINVAL;
		snprintf(out, CONFIG_VALUE_MAX, "%s", b ? "on" : "off");
		return 0;
	}
	}
	return -EINVAL;
}

/* Lock held.  A latch that is on refuses off. */
static int latch_refuses(const struct setting *s, const char *canon,
			 char *err, size_t errlen)
{
	if (s->kind != K_LATCH || strcmp(canon, "off") ||
	    strcmp(current(s), "on"))
		return 0;
	snprintf(err, errlen, "%s cannot be switched off while the agent "
		 "runs", s->name);
	return -EPERM;
}

/* Tells the listeners of name (after the lock is let go). */
static void notify(const char *name)
{
	config_change_fn fns[LISTENERS_MAX];
	size_t n = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nlisteners; i++)
		if (!strncmp(name, listeners[i].prefix,
			     strlen(listeners[i].prefix)))
			fns[n++] = listeners[i].fn;
	pthread_mutex_unlock(&lock);
	for (size_t i = 0; i < n; i++)
		fns[i](name);
}

int config_set(const char *name, const char *value, char *err, size_t errlen)
{
	char canon[CONFIG_VALUE_MAX];
	struct option opts[SWITCH_OPTS_MAX];
	struct setting *s = find(name);
	size_t nopts = 0;
	int rc, on;

	if (!s) {
		rc = config_compat_set(name, value, 1, err, errlen);
		if (rc == -ENOENT)
			config_compat_unknown(name, err, errlen);
		return rc;
	}
	rc = validate(s, value, canon, err, errlen);
	if (rc)
		return rc;
	if (s->kind == K_SWITCH)
		parse_switch(s, value, &on, opts, &nopts, err, errlen);
	pthread_mutex_lock(&lock);
	rc = latch_refuses(s, canon, err, errlen);
	if (rc) {
		pthread_mutex_unlock(&lock);
		return rc;
	}
	/* A switch's options first: its listeners then see them all. */
	for (size_t i = 0; i < nopts; i++) {
		memcpy(opts[i].s->value, opts[i].value, CONFIG_VALUE_MAX);
		opts[i].s->set = 1;
	}
	memcpy(s->value, canon, sizeof(canon));
	s->set = 1;
	pthread_mutex_unlock(&lock);
	for (size_t i = 0; i < nopts; i++)
		notify(opts[i].s->name);
	notify(s->name);
	return 0;
}

int config_on_change(const char *prefix, config_change_fn fn)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (nlisteners == LISTENERS_MAX || strlen(prefix) >= 64) {
		rc = -ENOSPC;
	} else {
		snprintf(listeners[nlisteners].prefix,
			 sizeof(listeners[0].prefix), "%s", prefix);
		listeners[nlisteners++].fn = fn;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

int config_check(const char *name, const char *value, char *err,
		 size_t errlen)
{
	char canon[CONFIG_VALUE_MAX];
	struct setting *s = find(name);
	int rc;

	if (!s) {
		rc = config_compat_set(name, value, 0, err, errlen);
		if (rc == -ENOENT)
			config_compat_unknown(name, err, errlen);
		return rc;
	}
	rc = validate(s, value, canon, err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&lock);
	rc = latch_refuses(s, canon, err, errlen);
	pthread_mutex_unlock(&lock);
	return rc;
}

unsigned config_effects(const char *name, const char *value)
{
	struct option opts[SWITCH_OPTS_MAX];
	struct setting *s = find(name);
	size_t n = 0;
	char err[256];
	unsigned flags;
	int on;

	if (!s)
		return 0;
	flags = s->flags;
	if (s->kind != K_SWITCH ||
	    parse_switch(s, value, &on, opts, &n, err, sizeof(err)))
		return flags;
	for (size_t i = 0; i < n; i++)
		flags |= opts[i].s->flags;
	return flags;
}

int config_runs_code(const char *name, const char *value)
{
	return (config_effects(name, value) & CONFIG_RUNS_CODE) != 0;
}

void config_set_info(const char *name, const char *value)
{
	struct setting *s = find(name);

	if (!s)
		return;
	pthread_mutex_lock(&lock);
	snprintf(s->value, sizeof(s->value), "%s", value);
	s->set = 1;
	pthread_mutex_unlock(&lock);
}

int config_get(const char *name, char *out, size_t outlen)
{
	struct setting *s = find(name);

	if (!s)
		return -ENOENT;
	pthread_mutex_lock(&lock);
	snprintf(out, outlen, "%s", current(s));
	pthread_mutex_unlock(&lock);
	return 0;
}

int64_t config_int(const char *name)
{
	char buf[CONFIG_VALUE_MAX];

	if (config_get(name, buf, sizeof(buf)))
		return 0;
	return strtoll(buf, NULL, 10);
}

int config_bool(const char *name)
{
	char buf[CONFIG_VALUE_MAX];
	int b = 0;

	if (config_get(name, buf, sizeof(buf)) == 0)
		parse_bool(buf, &b);
	return b;
}

int config_entry(size_t i, const char **name, char *value, size_t valuelen,
		 const char **doc)
{
	if (i >= NSETTINGS)
		return -ENOENT;
	*name = settings[i].name;
	*doc = settings[i].doc;
	pthread_mutex_lock(&lock);
	snprintf(value, valuelen, "%s", current(&settings[i]));
	pthread_mutex_unlock(&lock);
	return 0;
}

void config_env_name(const char *name, char *out, size_t outlen)
{
	size_t n = (size_t)snprintf(out, outlen, "PROBING_");

	for (; *name && n + 1 < outlen; name++)
		out[n++] = *name == '.' ? '_' : (char)toupper((unsigned char)*name);
	out[n] = 0;
}

int config_load_env(char *err, size_t errlen)
{
	char envname[96], msg[256], addr[CONFIG_VALUE_MAX];
	const char *v;
	int rc = 0;

	if (errlen)
		err[0] = 0;
	for (size_t i = 0; i < NSETTINGS; i++) {
		if (settings[i].kind == K_INFO)
			continue;
		config_env_name(settings[i].name, envname, sizeof(envname));
		v = env_get(envname);
		if (v && config_set(settings[i].name, v, msg, sizeof(msg))) {
			if (!rc)
				snprintf(err, errlen, "%s: %s", envname, msg);
			rc = -EINVAL;
		}
	}
	/* Shorthands: PROBING_READONLY=1 (server.readonly), PROBING_LISTEN=addr,
	 * PROBING_PORT=n (127.0.0.1:n). */
	v = env_get("PROBING_READONLY");
	if (v && *v && config_set("server.readonly", v, msg, sizeof(msg))) {
		if (!rc)
			snprintf(err, errlen, "PROBING_READONLY: %s", msg);
		rc = -EINVAL;
	}
	v = env_get("PROBING_LISTEN");
	if (!v && (v = env_get("PROBING_PORT")) && *v) {
		/* In a torchrun job, n + LOCAL_RANK: the ranks of a node
		 * take consecutive ports. */
		const char *lr = env_get("LOCAL_RANK");
		char *end;
		long port = strtol(v, &end, 10), local;

		snprintf(addr, sizeof(addr), "127.0.0.1:%s", v);
		if (lr && *lr && !*end && port > 0) {
			local = strtol(lr, &end, 10);
			if (!*end && local >= 0 && port + local <= 65535)
				snprintf(addr, sizeof(addr), "127.0.0.1:%ld",
					 port + local);
		}
		v = addr;
	}
	if (v && *v && config_set("server.listen", v, msg, sizeof(msg))) {
		if (!rc)
			snprintf(err, errlen, "%s", msg);
		rc = -EINVAL;
	}
	/* The original Probing's names; variables nobody reads, said. */
	if (config_compat_env(msg, sizeof(msg)) && !rc) {
		snprintf(err, errlen, "%s", msg);
		rc = -EINVAL;
	}
	/* PROBING_CRASH=1: crash.enabled. */
	v = env_get("PROBING_CRASH");
	if (v && *v && config_set("crash.enabled", v, msg, sizeof(msg))) {
		if (!rc)
			snprintf(err, errlen, "PROBING_CRASH: %s", msg);
		rc = -EINVAL;
	}
	return rc;
}

void config_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
