/*
 * req_profile: probing/profile (start, stop and status of the sampler) and
 * probing/flamegraph (the samples of a time window, rendered).  See
 * docs/protocol.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/agent.h"
#include "core/config.h"
#include "core/fdown.h"
#include "flamegraph.h"
#include "profiler/sampler.h"
#include "server/handler.h"
#include "store.h"

#define FLUSH_MS 2000 /* for the samples taken so far to reach SQLite */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add_time(cJSON *o, const char *key, double t)
{
	if (t > 0)
		cJSON_AddNumberToObject(o, key, t);
	else
		cJSON_AddNullToObject(o, key);
}

static void status_json(cJSON *b, const struct sampler_status *st)
{
	cJSON_AddBoolToObject(b, "running", st->running);
	cJSON_AddNumberToObject(b, "hz", st->hz);
	cJSON_AddBoolToObject(b, "native", st->native);
	add_time(b, "startedAt", st->started);
	add_time(b, "stoppedAt", st->stopped);
	cJSON_AddNumberToObject(b, "now", now_s());
	cJSON_AddNumberToObject(b, "durationMs", (double)st->duration_ms);
	if (st->remaining_ms >= 0)
		cJSON_AddNumberToObject(b, "remainingMs",
					(double)st->remaining_ms);
	else
		cJSON_AddNullToObject(b, "remainingMs");
	cJSON_AddNumberToObject(b, "ticks", (double)st->ticks);
	cJSON_AddNumberToObject(b, "missedTicks", (double)st->missed);
	cJSON_AddNumberToObject(b, "samples", (double)st->samples);
	cJSON_AddNumberToObject(b, "nativeSamples",
				(double)st->native_samples);
	cJSON_AddNumberToObject(b, "nativeFailed", (double)st->native_failed);
	cJSON_AddNumberToObject(b, "nativeUnanswered",
				(double)st->native_unanswered);
	cJSON_AddNumberToObject(b, "nativeStale", (double)st->native_stale);
	cJSON_AddNumberToObject(b, "nativeLate", (double)st->native_late);
	cJSON_AddNumberToObject(b, "nativeRequested",
				(double)st->native_requested);
	cJSON_AddNumberToObject(b, "nativeCaptured",
				(double)st->native_captured);
	cJSON_AddNumberToObject(b, "nativeDropped",
				(double)st->native_dropped);
	cJSON_AddNumberToObject(b, "nativeRingMax", st->native_ring_max);
	cJSON_AddNumberToObject(b, "nativeUnwindUs", st->native_unwind_us);
	cJSON_AddNumberToObject(b, "nativeLeafUs", st->native_leaf_us);
	cJSON_AddNumberToObject(b, "dropped", (double)st->dropped);
	cJSON_AddNumberToObject(b, "threadsSkipped",
				(double)st->threads_skipped);
	cJSON_AddNumberToObject(b, "written", (double)st->written);
	cJSON_AddNumberToObject(b, "deleted", (double)st->deleted);
	cJSON_AddNumberToObject(b, "sampleUs", st->sample_us);
	cJSON_AddNumberToObject(b, "sampleUsMax", st->sample_us_max);
	cJSON_AddNumberToObject(b, "tickUs", st->tick_us);
	cJSON_AddNumberToObject(b, "threads", st->threads);
	cJSON_AddNumberToObject(b, "frames", st->frames);
	cJSON_AddNumberToObject(b, "stacks", st->stacks);
	cJSON_AddStringToObject(b, "error", st->error);
}

static void run_profile(struct request *req)
{
	const char *action = "status";
	struct sampler_opts o = {0};
	struct sampler_status st;
	int64_t hz = config_int("profile.hz"), duration = 0;
	int native = 0, idle = config_bool("profile.idle"), rc;
	int native_idle = config_bool("profile.native_idle");
	char err[256];
	cJSON *body;

	if (dap_arg_string(req->args, "action", &action, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "hz", &hz, err, sizeof(err)) < 0 ||
	    dap_arg_int(req->args, "durationMs", &duration, err,
			sizeof(err)) < 0 ||
	    dap_arg_bool(req->args, "native", &native, err, sizeof(err)) < 0 ||
	    dap_arg_bool(req->args, "idle", &idle, err, sizeof(err)) < 0 ||
	    dap_arg_bool(req->args, "nativeIdle", &native_idle, err,
			 sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (!strcmp(action, "start")) {
		if (hz < 1 || hz > SAMPLER_HZ_MAX) {
			request_fail(req, DAP_ERROR_FAILED, "hz must be in [1, %d]",
				     SAMPLER_HZ_MAX);
			return;
		}
		if (duration < 0 || duration > 86400000) {
			request_fail(req, DAP_ERROR_FAILED, "durationMs must be in [0, "
					     "86400000] (0: until stopped)");
			return;
		}
		o.hz = (int)hz;
		o.native = native;
		o.duration_ms = duration;
		o.idle = idle;
		o.native_idle = native_idle;
		o.max_depth = (int)config_int("profile.max_depth");
		rc = sampler_start(&o, err, sizeof(err));
		if (rc) {
			request_fail(req, DAP_ERROR_FAILED, "%s", err);
			return;
		}
	} else if (!strcmp(action, "stop")) {
		/* Stopping what is not running is not an error: the
		 * status says so. */
		sampler_stop();
		sampler_flush(FLUSH_MS);
	} else if (strcmp(action, "status")) {
		request_fail(req, DAP_ERROR_FAILED, "action must be start, stop or status, "
				     "not '%s'",
			     action);
		return;
	}
	sampler_status(&st);
	body = request_ok(req);
	if (body)
		status_json(body, &st);
}

const struct handler handler_profile = {
	.command = "probing/profile",
	.flags = HANDLER_BLOCKS,
	.run = run_profile,
};

/* ---- probing/flamegraph ----------------------------------------------- */

struct window {
	double since, until;
	int idle;
	int cpu;	/* weights: CPU microseconds, not 1 */
	int64_t thread; /* 0: all */
};

/* Reads the samples of w, their stacks, frames and threads into fg.
 * Returns 0 or a negative error with err. */
static int load(struct store *st, const struct window *w,
		struct flamegraph *fg, char *err, size_t errlen)
{
	static const char samples_sql[] =
		"SELECT ts, thread_id, stack_id, state, cpu_us FROM profile.samples "
		"WHERE ts >= ?1 AND ts <= ?2 AND (?3 OR state = 'running') "
		"AND (?4 = 0 OR thread_id = ?4) ORDER BY ts";
	static const char stacks_sql[] =
		"WITH RECURSIVE used(id) AS (SELECT DISTINCT stack_id FROM "
		"profile.samples WHERE ts >= ?1 AND ts <= ?2 AND (?3 OR state "
		"= 'running') AND (?4 = 0 OR thread_id = ?4) UNION SELECT "
		"s.parent_id FROM profile.stacks s JOIN used ON s.stack_id = "
		"used.id WHERE s.parent_id != 0) SELECT s.stack_id, "
		"s.parent_id, s.frame_id, f.func, f.file, f.line, f.kind FROM "
		"used JOIN profile.stacks s ON s.stack_id = used.id LEFT JOIN "
		"profile.frames f ON f.frame_id = s.frame_id";
	static const char threads_sql[] =
		"SELECT thread_id, native_id, name FROM profile.threads";
	struct store_stmt *q[3] = {0};
	const char *sql[3] = {samples_sql, stacks_sql, threads_sql};
	int rc = 0;

	for (int i = 0; i < 3 && !rc; i++)
		rc = store_stmt_new(st, sql[i], &q[i], err, errlen);
	if (rc)
		goto out;
	for (int i = 0; i < 2; i++) {
		store_stmt_real(q[i], 1, w->since);
		store_stmt_real(q[i], 2, w->until);
		store_stmt_int(q[i], 3, w->idle);
		store_stmt_int(q[i], 4, w->thread);
	}
	/* One read transaction: the recorder waits, the three reads agree. */
	rc = store_begin(st, err, errlen);
	if (rc)
		goto out;
	while (!rc && (rc = store_stmt_step(q[0], err, errlen)) == 1) {
		const char *state = store_stmt_col_text(q[0], 3);
		enum flamegraph_state s = FLAMEGRAPH_RUNNING;

		if (state && !strcmp(state, "idle"))
			s = FLAMEGRAPH_IDLE;
		else if (state && !strcmp(state, "gil_wait"))
			s = FLAMEGRAPH_GIL_WAIT;
		int64_t cpu = store_stmt_col_int(q[0], 4);

		rc = flamegraph_add_sample(
			fg, store_stmt_col_real(q[0], 0),
			(uint64_t)store_stmt_col_int(q[0], 1),
			(uint32_t)store_stmt_col_int(q[0], 2), s,
			w->cpu ? (uint64_t)(cpu > 0 ? cpu : 0) : 1);
		if (rc == -E2BIG)
			snprintf(err, errlen,
				 "more than %d samples in the window: take a "
				 "shorter one",
				 FLAMEGRAPH_SAMPLES_MAX);
	}
	if (rc > 0)
		rc = 0;
	while (!rc && (rc = store_stmt_step(q[1], err, errlen)) == 1) {
		uint32_t id = (uint32_t)store_stmt_col_int(q[1], 0);
		uint32_t frame = (uint32_t)store_stmt_col_int(q[1], 2);
		const char *kind = store_stmt_col_text(q[1], 6);

		rc = flamegraph_add_stack(fg, id,
					  (uint32_t)store_stmt_col_int(q[1], 1),
					  frame);
		if (!rc && frame && !store_stmt_col_null(q[1], 3))
			rc = flamegraph_add_frame(
				fg, frame, store_stmt_col_text(q[1], 3),
				store_stmt_col_text(q[1], 4),
				store_stmt_col_null(q[1], 5)
					? -1
					: (int)store_stmt_col_int(q[1], 5),
				kind && !strcmp(kind, "native"));
	}
	if (rc > 0)
		rc = 0;
	while (!rc && (rc = store_stmt_step(q[2], err, errlen)) == 1)
		rc = flamegraph_add_thread(fg,
					   (uint64_t)store_stmt_col_int(q[2], 0),
					   (long)store_stmt_col_int(q[2], 1),
					   store_stmt_col_text(q[2], 2));
	if (rc > 0)
		rc = 0;
	for (int i = 0; i < 3; i++)
		store_stmt_reset(q[i]);
	if (rc) {
		store_rollback(st);
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory");
	} else {
		rc = store_commit(st, err, errlen);
	}
out:
	for (int i = 0; i < 3; i++)
		store_stmt_free(q[i]);
	return rc;
}

/* A number argument (unix seconds); 1 when absent, -1 when not a number. */
static int arg_time(const cJSON *args, const char *key, double *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);

	if (!v || cJSON_IsNull(v))
		return 1;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
		return -1;
	*out = v->valuedouble;
	return 0;
}

/* "name (pid N)" for titles: the script Python runs, or the program. */
static void program_name(char *out, size_t len)
{
	char buf[4096] = "";
	const char *name = "python", *p;
	ssize_t n = 0;
	struct fdown f;

	if (fdown_open_take(&f, "/proc/self/cmdline", O_RDONLY, 0) == 0) {
		n = read(f.fd, buf, sizeof(buf) - 1);
		fdown_close(&f);
	}
	buf[n > 0 ? n : 0] = '\0';
	/* argv[0], then the first argument that is not an option. */
	for (p = buf; n > 0 && p < buf + n; p += strlen(p) + 1) {
		if (p == buf) {
			name = p;
			continue;
		}
		if (*p != '-') {
			name = p;
			break;
		}
	}
	p = strrchr(name, '/');
	snprintf(out, len, "%s (pid %d)", p ? p + 1 : name, (int)getpid());
}

static void run_flamegraph(struct request *req)
{
	const char *fmt = "folded", *title = NULL, *weight = "samples";
	struct flamegraph_opts o = {0};
	struct window w = {0};
	struct sampler_status st;
	enum flamegraph_format format;
	struct store *store = agent_store();
	struct flamegraph *fg = NULL;
	char err[512], name[300], titlebuf[600];
	int64_t thread = 0;
	int lines = 0, threads = 0, rc;
	double now = now_s();
	char *out = NULL;
	size_t len = 0;
	cJSON *body;

	sampler_status(&st);
	w.idle = 0;
	w.since = st.started;
	w.until = now;
	if (dap_arg_string(req->args, "format", &fmt, err, sizeof(err)) < 0 ||
	    dap_arg_bool(req->args, "idle", &w.idle, err, sizeof(err)) < 0 ||
	    dap_arg_bool(req->args, "lines", &lines, err, sizeof(err)) < 0 ||
	    dap_arg_bool(req->args, "threads", &threads, err, sizeof(err)) <
		    0 ||
	    dap_arg_int(req->args, "thread", &thread, err, sizeof(err)) < 0 ||
	    dap_arg_string(req->args, "title", &title, err, sizeof(err)) < 0 ||
	    dap_arg_string(req->args, "weight", &weight, err, sizeof(err)) <
		    0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (strcmp(weight, "samples") && strcmp(weight, "cpu")) {
		request_fail(req, DAP_ERROR_FAILED, "weight must be samples or cpu, not '%s'",
			     weight);
		return;
	}
	w.cpu = !strcmp(weight, "cpu");
	if (flamegraph_format_parse(fmt, &format) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "format must be folded, speedscope, "
				     "chrome or svg, not '%s'",
			     fmt);
		return;
	}
	if (arg_time(req->args, "since", &w.since) < 0 ||
	    arg_time(req->args, "until", &w.until) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "since and until must be numbers (unix "
				     "seconds, or negative: seconds before "
				     "now)");
		return;
	}
	/* Negative: relative to now. */
	if (w.since < 0)
		w.since += now;
	if (w.until < 0)
		w.until += now;
	w.thread = thread;
	if (!store) {
		request_fail(req, DAP_ERROR_FAILED, "the store is not ready");
		return;
	}
	sampler_flush(FLUSH_MS);
	fg = flamegraph_new();
	if (!fg) {
		request_fail(req, DAP_ERROR_FAILED, "out of memory");
		return;
	}
	rc = load(store, &w, fg, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		goto out;
	}
	program_name(name, sizeof(name));
	if (!title) {
		snprintf(titlebuf, sizeof(titlebuf), "%s: %zu samples at %d Hz",
			 name, flamegraph_samples(fg), st.hz ? st.hz : 0);
		title = titlebuf;
	}
	o.lines = lines;
	o.threads = threads;
	o.states = w.idle;
	o.cpu = w.cpu;
	o.interval = st.hz > 0 ? 1.0 / st.hz : 0.01;
	o.title = title;
	o.pid = getpid();
	rc = flamegraph_render(fg, format, &o, &out, &len, err, sizeof(err));
	if (rc) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		goto out;
	}
	body = request_ok(req);
	if (body) {
		cJSON_AddStringToObject(body, "format",
					flamegraph_format_name(format));
		cJSON_AddNumberToObject(body, "samples",
					(double)flamegraph_samples(fg));
		cJSON_AddNumberToObject(body, "since", w.since);
		cJSON_AddNumberToObject(body, "until", w.until);
		cJSON_AddNumberToObject(body, "hz", st.hz);
		cJSON_AddStringToObject(body, "weight", w.cpu ? "cpu" : "samples");
		cJSON_AddStringToObject(body, "data", out);
	}
out:
	free(out);
	flamegraph_free(fg);
}

const struct handler handler_flamegraph = {
	.command = "probing/flamegraph",
	.flags = HANDLER_BLOCKS,
	.run = run_flamegraph,
};
