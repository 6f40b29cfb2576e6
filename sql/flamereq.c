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
	int gil;	/* only the samples of threads holding the GIL */
	int cpu;	/* weights: CPU microseconds, not 1 */
	int tasks;	/* the samples' asyncio tasks too */
	int64_t thread; /* 0: all */
	size_t in_tasks; /* read: samples that ran a task */
};

/* Reads the samples of w, their stacks, frames and threads into fg.
 * Returns 0 or a negative error with err. */
static int load(struct store *st, struct window *w, struct flamegraph *fg,
		char *err, size_t errlen)
{
	/* %s: the task's columns, or NULLs; " AND gil = 1" for the samples
	 * of threads holding the GIL (columns a recording of before they
	 * came lacks: named only when asked for). */
	static const char samples_fmt[] =
		"SELECT ts, thread_id, stack_id, state, cpu_us, %s FROM "
		"profile.samples "
		"WHERE ts >= ?1 AND ts <= ?2 AND (?3 OR state = 'running') "
		"AND (?4 = 0 OR thread_id = ?4)%s ORDER BY ts";
	static const char task_cols[] = "task_frame_id, task_stack_id";
	static const char no_task_cols[] = "NULL, NULL";
	/* The tasks' frames (in no stack): every one, a few thousand at
	 * most (agent/profiler/sampler_tasks.h). */
	static const char tasks_sql[] =
		"SELECT frame_id, func FROM profile.frames WHERE kind = 'task'";
	static const char stacks_fmt[] =
		"WITH RECURSIVE used(id) AS (SELECT DISTINCT stack_id FROM "
		"profile.samples WHERE ts >= ?1 AND ts <= ?2 AND (?3 OR state "
		"= 'running') AND (?4 = 0 OR thread_id = ?4)%s UNION SELECT "
		"s.parent_id FROM profile.stacks s JOIN used ON s.stack_id = "
		"used.id WHERE s.parent_id != 0) SELECT s.stack_id, "
		"s.parent_id, s.frame_id, f.func, f.file, f.line, f.kind FROM "
		"used JOIN profile.stacks s ON s.stack_id = used.id LEFT JOIN "
		"profile.frames f ON f.frame_id = s.frame_id";
	static const char threads_sql[] =
		"SELECT thread_id, native_id, name FROM profile.threads";
	const char *gil = w->gil ? " AND gil = 1" : "";
	char samples_sql[sizeof(samples_fmt) + sizeof(task_cols) + 16];
	char stacks_sql[sizeof(stacks_fmt) + 16];
	struct store_stmt *q[4] = {0};
	const char *sql[4] = {samples_sql, stacks_sql, threads_sql, tasks_sql};
	int nq = w->tasks ? 4 : 3, rc = 0;

	snprintf(samples_sql, sizeof(samples_sql), samples_fmt,
		 w->tasks ? task_cols : no_task_cols, gil);
	snprintf(stacks_sql, sizeof(stacks_sql), stacks_fmt, gil);

	w->in_tasks = 0;
	for (int i = 0; i < nq && !rc; i++)
		rc = store_stmt_new(st, sql[i], &q[i], err, errlen);
	if (rc && w->tasks && strstr(err, "task_")) {
		/* A recording made before samples named their task. */
		errbuf_set(err, errlen,
			   "these samples were recorded without their asyncio "
			   "tasks (profile.samples has no task_frame_id: an "
			   "agent before tasks were attributed): leave out "
			   "--tasks");
		goto out;
	}
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
		if (!rc && !store_stmt_col_null(q[0], 5) &&
		    !flamegraph_sample_task(
			    fg, (uint32_t)store_stmt_col_int(q[0], 5),
			    (uint32_t)store_stmt_col_int(q[0], 6)))
			w->in_tasks++;
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
	while (!rc && nq > 3 && (rc = store_stmt_step(q[3], err, errlen)) == 1)
		rc = flamegraph_add_frame(fg, (uint32_t)store_stmt_col_int(q[3], 0),
					  store_stmt_col_text(q[3], 1), "", -1,
					  0);
	if (rc > 0)
		rc = 0;
	for (int i = 0; i < nq; i++)
		store_stmt_reset(q[i]);
	if (rc) {
		store_rollback(st);
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory");
	} else {
		rc = store_commit(st, err, errlen);
	}
out:
	for (int i = 0; i < 4; i++)
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

int flamereq_window(const cJSON *args, const struct flamereq_env *env,
		    double *since, double *until, char *err, size_t errlen)
{
	*since = env->since;
	*until = env->now;
	if (arg_time(args, "since", since) < 0 ||
	    arg_time(args, "until", until) < 0) {
		errbuf_set(err, errlen,
			   "since and until must be numbers (unix seconds, or "
			   "negative: seconds before now)");
		return -EINVAL;
	}
	/* Negative: relative to now; 0 (or none): from the start of what
	 * is held, so that a window's length is the run's, not the Unix
	 * time. */
	if (*since == 0)
		*since = env->since;
	if (*since < 0)
		*since += env->now;
	if (*until < 0)
		*until += env->now;
	return 0;
}

int flamereq_samples(struct store *st, double since, double until,
		     struct flamegraph *fg, char *err, size_t errlen)
{
	struct window w = {.since = since, .until = until, .idle = 1};

	return load(st, &w, fg, err, errlen);
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
	    dap_arg_bool(args, "gil", &w.gil, err, errlen) < 0 ||
	    dap_arg_bool(args, "lines", &lines, err, errlen) < 0 ||
	    dap_arg_bool(args, "threads", &threads, err, errlen) < 0 ||
	    dap_arg_bool(args, "tasks", &w.tasks, err, errlen) < 0 ||
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
	if (flamereq_window(args, env, &w.since, &w.until, err, errlen))
		return -EINVAL;
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
	o.tasks = w.tasks;
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
	if (w.tasks)
		cJSON_AddNumberToObject(body, "taskSamples", (double)w.in_tasks);
	if (w.tasks && env->tasks_note && env->tasks_note[0])
		cJSON_AddStringToObject(body, "tasksNote", env->tasks_note);
	if (!cJSON_AddStringToObject(body, "data", out)) {
		errbuf_set(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
out:
	free(out);
	flamegraph_free(fg);
	return rc;
}
