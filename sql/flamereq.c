/*
 * flamereq: see flamereq.h.
 */
#include "flamereq.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dap_msg.h"
#include "errbuf.h"
#include "flamegraph.h"
#include "store.h"

struct window {
	double since, until;
	int idle;
	int cpu;	/* weights: CPU microseconds, not 1 */
	int64_t thread; /* 0: all */
};

/* Reads the samples of w, their stacks, frames and threads into fg.
 * Returns 0 or a negative error with err. */
static int load(struct store *st, const struct window *w, struct flamegraph *fg,
		char *err, size_t errlen)
{
	static const char samples_sql[] =
		"SELECT ts, thread_id, stack_id, state, cpu_us FROM "
		"profile.samples "
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

		rc = flamegraph_add_stack(
			fg, id, (uint32_t)store_stmt_col_int(q[1], 1), frame);
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
		rc = flamegraph_add_thread(
			fg, (uint64_t)store_stmt_col_int(q[2], 0),
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

int flamereq_answer(struct store *st, const cJSON *args,
		    const struct flamereq_env *env, cJSON *body, char *err,
		    size_t errlen)
{
	const char *fmt = "folded", *title = NULL, *weight = "samples";
	struct flamegraph_opts o = {0};
	struct window w = {0};
	enum flamegraph_format format;
	struct flamegraph *fg = NULL;
	char titlebuf[600];
	int64_t thread = 0;
	int lines = 0, threads = 0, rc;
	char *out = NULL;
	size_t len = 0;

	w.idle = 0;
	w.since = env->since;
	w.until = env->now;
	if (dap_arg_string(args, "format", &fmt, err, errlen) < 0 ||
	    dap_arg_bool(args, "idle", &w.idle, err, errlen) < 0 ||
	    dap_arg_bool(args, "lines", &lines, err, errlen) < 0 ||
	    dap_arg_bool(args, "threads", &threads, err, errlen) < 0 ||
	    dap_arg_int(args, "thread", &thread, err, errlen) < 0 ||
	    dap_arg_string(args, "title", &title, err, errlen) < 0 ||
	    dap_arg_string(args, "weight", &weight, err, errlen) < 0)
		return -EINVAL;
	if (strcmp(weight, "samples") && strcmp(weight, "cpu")) {
		errbuf_set(err, errlen,
			   "weight must be samples or cpu, not '%s'", weight);
		return -EINVAL;
	}
	w.cpu = !strcmp(weight, "cpu");
	if (flamegraph_format_parse(fmt, &format) < 0) {
		errbuf_set(err, errlen,
			   "format must be folded, speedscope, chrome or svg, "
			   "not '%s'",
			   fmt);
		return -EINVAL;
	}
	if (arg_time(args, "since", &w.since) < 0 ||
	    arg_time(args, "until", &w.until) < 0) {
		errbuf_set(err, errlen,
			   "since and until must be numbers (unix seconds, or "
			   "negative: seconds before now)");
		return -EINVAL;
	}
	/* Negative: relative to now. */
	if (w.since < 0)
		w.since += env->now;
	if (w.until < 0)
		w.until += env->now;
	w.thread = thread;
	fg = flamegraph_new();
	if (!fg) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = load(st, &w, fg, err, errlen);
	if (rc)
		goto out;
	if (!title && env->hz > 0)
		snprintf(titlebuf, sizeof(titlebuf), "%s: %zu samples at %d Hz",
			 env->name, flamegraph_samples(fg), env->hz);
	else if (!title)
		snprintf(titlebuf, sizeof(titlebuf), "%s: %zu samples",
			 env->name, flamegraph_samples(fg));
	o.lines = lines;
	o.threads = threads;
	o.states = w.idle;
	o.cpu = w.cpu;
	o.interval = env->hz > 0 ? 1.0 / env->hz : 0.01;
	o.title = title ? title : titlebuf;
	o.pid = env->pid;
	rc = flamegraph_render(fg, format, &o, &out, &len, err, errlen);
	if (rc)
		goto out;
	cJSON_AddStringToObject(body, "format", flamegraph_format_name(format));
	cJSON_AddNumberToObject(body, "samples",
				(double)flamegraph_samples(fg));
	cJSON_AddNumberToObject(body, "since", w.since);
	cJSON_AddNumberToObject(body, "until", w.until);
	cJSON_AddNumberToObject(body, "hz", env->hz);
	cJSON_AddStringToObject(body, "weight", w.cpu ? "cpu" : "samples");
	if (!cJSON_AddStringToObject(body, "data", out)) {
		errbuf_set(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
out:
	free(out);
	flamegraph_free(fg);
	return rc;
}
