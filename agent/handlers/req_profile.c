/*
 * req_profile: probing/profile (start, stop and status of the sampler),
 * probing/flamegraph (the samples of a time window, rendered) and
 * probing/trace (all that was recorded in a window, as one Chrome
 * trace).  See docs/protocol.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app/app.h"
#include "core/agent.h"
#include "core/config.h"
#include "core/readonly.h"
#include "fdown.h"
#include "flamereq.h"
#include "profiler/sampler.h"
#include "profiler/sampler_tasks.h"
#include "server/handler.h"
#include "store.h"
#include "tracereq.h"

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
	cJSON_AddBoolToObject(b, "nativeStopped", st->native_lost);
	cJSON_AddNumberToObject(b, "threadsWithoutState",
				(double)st->files_refused);
	cJSON_AddStringToObject(b, "note", st->note);
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
		/* The argument is the setting's, for one run: refused as the
		 * setting is in read-only mode (readonly.h), unless the
		 * owner's setting says so already. */
		if (native_idle && !config_bool("profile.native_idle") &&
		    readonly_refuses_setting("profile.native_idle", "on", err,
					     sizeof(err)) < 0) {
			request_fail(req, DAP_ERROR_READONLY, "%s", err);
			return;
		}
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
	} else if (!strcmp(action, "extend")) {
		rc = sampler_extend(duration);
		if (rc) {
			request_fail(req, DAP_ERROR_FAILED, "%s",
				     rc == -ENOENT
					     ? "the profiler is not running"
					     : "durationMs must be in [1, "
					       "600000] to extend a run");
			return;
		}
	} else if (!strcmp(action, "stop")) {
		/* Stopping what is not running is not an error: the
		 * status says so. */
		sampler_stop();
		sampler_flush(FLUSH_MS);
	} else if (strcmp(action, "status")) {
		request_fail(req, DAP_ERROR_FAILED, "action must be start, extend, "
				     "stop or status, not '%s'",
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

/* A window's request over the store (probing/flamegraph, probing/trace):
 * the agent's clock, the sampler's run and rate, the program's name, the
 * samples flushed; then answer() fills the body.  since_default: the
 * window's start when the sampler never ran (0: its start, 0). */
static void run_window(struct request *req, double since_default,
		       int (*answer)(struct store *, const cJSON *,
				     const struct flamereq_env *, cJSON *,
				     char *, size_t))
{
	struct flamereq_env env = {0};
	struct sampler_status st;
	struct store *store = agent_store();
	char err[512], name[300], tasks_note[400];
	cJSON *body;

	if (!store) {
		request_fail(req, DAP_ERROR_FAILED, "the store is not ready");
		return;
	}
	sampler_status(&st);
	/* The window ends before the flush: every sample in it is in the
	 * tables once the flush returns (a client reading window after
	 * window, probing top, loses none at the edges). */
	env.now = now_s();
	sampler_flush(FLUSH_MS);
	program_name(name, sizeof(name));
	env.since = st.started > 0 || !since_default ? st.started
						     : env.now - since_default;
	env.hz = st.hz;
	env.name = name;
	env.pid = (int)getpid();
	sampler_tasks_note(tasks_note, sizeof(tasks_note));
	env.tasks_note = tasks_note;
	body = request_ok(req);
	if (body && answer(store, req->args, &env, body, err, sizeof(err)))
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
}

static void run_flamegraph(struct request *req)
{
	run_window(req, 0, flamereq_answer);
}

const struct handler handler_flamegraph = {
	.command = "probing/flamegraph",
	.flags = HANDLER_BLOCKS,
	.run = run_flamegraph,
};

/* ---- probing/trace ---------------------------------------------------- */

/* What the agent recorded in a window, as one Chrome trace
 * (sql/tracereq.h): the window's samples flushed first, as for a
 * flamegraph; the torch rows are the recorder thread's to write (every
 * 100 ms while tracing), which a client waits for (probing trace).
 * Without a sampler's run, the last 10 s. */
static void run_trace(struct request *req)
{
	app_drain(); /* the program's markers too (app.h) */
	run_window(req, 10, tracereq_answer);
}

const struct handler handler_trace = {
	.command = "probing/trace",
	.flags = HANDLER_BLOCKS,
	.run = run_trace,
};
