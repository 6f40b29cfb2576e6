/*
 * torch: settings, tables and the recorder side of torch tracing.  See
 * torch.h; the hooks themselves are in torch_hooks.c.
 */
#include "torch.h"

#include "cpython/pycompat.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "memory/memory.h"
#include "python/pygil.h"
#include "recorder.h"
#include "store.h"
#include "torch_hooks.h"
#include "torch_names.h"
#include "torch_rate.h"
#include "watch.h"

#define DRAIN_MAX 50000	  /* records written per tick at most */
#define TICK_ON_MS 100	  /* while tracing: drain this often */
#define WAIT_FAST_MS 100  /* waiting for `import torch`: poll this often */
#define WAIT_SLOW_MS 1000 /* ... and after WAIT_FAST_FOR ms, this often */
#define WAIT_FAST_FOR 10000

static struct recorder *trace_rec, *var_rec;
static _Atomic int changed;
static int waiting; /* on, but torch is not imported yet */
static int waited_ms;
static int last_error; /* the last install failed (not just "wait") */
static char error_text[200];
static int listening;

static const char *const stage_names[] = {"forward", "backward", "step"};
static const char *const clock_names[] = {"cpu", "cuda"};

static void on_change(const char *name)
{
	(void)name;
	atomic_store(&changed, 1);
	memory_wake();
}

int torch_pending(void)
{
	return atomic_load(&changed);
}

int torch_init(struct store *st, char *err, size_t errlen)
{
	struct recorder_opts t = {
		.schema = "python",
		.name = "torch_trace",
		.columns =
			"step INTEGER, seq INTEGER, module TEXT, stage TEXT, "
			"duration REAL, cpu_duration REAL, clock TEXT, "
			"allocated REAL, max_allocated REAL, "
			"cached REAL, max_cached REAL, time_offset REAL, "
			"rank INTEGER, ts REAL, native_id INTEGER",
		.doc = "torch module forward/backward and optimizer step times "
		       "(torch.profiling=on); seconds (duration: the GPU's "
		       "where clock='cuda'), memory in MB",
	};
	struct recorder_opts v = {
		.schema = "python",
		.name = "variables",
		.columns = "step INTEGER, func TEXT, name TEXT, value, ts REAL",
		.doc = "watched variables (torch.watch), once per traced step",
	};
	int rc;

	t.max_rows = v.max_rows = (size_t)config_int("torch.max_rows");
	t.max_bytes = v.max_bytes = (size_t)config_int("torch.max_mb") << 20;
	if (torch_hooks_init()) {
		snprintf(err, errlen, "torch: out of memory");
		return -ENOMEM;
	}
	rc = recorder_new(st, &t, &trace_rec, err, errlen);
	if (!rc)
		rc = recorder_new(st, &v, &var_rec, err, errlen);
	if (rc)
		return rc;
	/* Once per process: listeners outlive a fork, agents do not. */
	if (!listening && config_on_change("torch.", on_change)) {
		snprintf(err, errlen, "torch: no room for a config listener");
		return -ENOSPC;
	}
	listening = 1;
	/* Settings from the environment were loaded before we listened. */
	atomic_store(&changed, 1);
	return 0;
}

/* ---- applying the settings (GIL thread) ------------------------------ */

struct apply {
	int want;
	struct torch_opts o;
	int rc;
	char err[256];
};

/* One application at a time; static because a GIL call that overruns its
 * hard limit goes on after pygil_run returned (busy until it ends). */
static struct apply A;
static _Atomic int A_busy;

static void apply_fn(void *arg)
{
	struct apply *a = arg;

	a->rc = 0;
	if (!a->want)
		torch_hooks_remove();
	else
		a->rc = torch_hooks_install(&a->o, a->err, sizeof(a->err));
	atomic_store(&A_busy, 0);
}

static int read_opts(struct apply *a)
{
	char text[CONFIG_VALUE_MAX];

	a->want = config_bool("torch.profiling");
	config_get("torch.step_rate", text, sizeof(text));
	if (torch_rate_parse(text, &a->o.step_rate))
		a->o.step_rate = 0; /* checked when set: not reached */
	a->o.module_rate = config_int("torch.module_rate");
	a->o.backward = config_bool("torch.backward");
	a->o.repr_max = (int)config_int("python.repr_max");
	config_get("torch.watch", text, sizeof(text));
	return watch_parse(text, &a->o.watch, a->err, sizeof(a->err));
}

static void apply(void)
{
	struct pygil_limits lim = {.start_ms = 500, .run_ms = 5000};
	int rc;

	if (atomic_load(&A_busy)) {
		atomic_store(&changed, 1); /* the last one is still running */
		return;
	}
	memset(&A, 0, sizeof(A));
	if (read_opts(&A)) {
		snprintf(error_text, sizeof(error_text), "%.199s", A.err);
		last_error = 1;
		return;
	}
	atomic_store(&A_busy, 1);
	rc = pygil_run(apply_fn, &A, &lim, NULL);
	if (rc == -EINPROGRESS) {
		log_warn("torch: applying the settings is taking long");
		atomic_store(&changed, 1);
		return;
	}
	atomic_store(&A_busy, 0);
	if (rc) {
		/* No GIL in time, or the GIL threads are busy or gone: the
		 * function never ran; try again next tick. */
		if (rc != -ESHUTDOWN)
			atomic_store(&changed, 1);
		return;
	}
	waiting = A.want && A.rc == -EAGAIN;
	last_error = A.want && A.rc && A.rc != -EAGAIN;
	if (last_error) {
		snprintf(error_text, sizeof(error_text), "%.199s", A.err);
		log_warn("torch tracing not started: %s", A.err);
	}
	if (!waiting)
		waited_ms = 0;
}

/* ---- writing the records (no GIL) ------------------------------------ */

/*
 * Unix seconds minus the hooks' monotonic clock: a record's ts is its
 * monotonic time plus this.  Read with the least time between the two
 * clocks of three tries (a preemption between them would shift every ts
 * of a batch), and again at most every SHIFT_EVERY_S (the wall clock is
 * slewed or set): rows of one step keep their order.
 */
#define SHIFT_EVERY_S 10.0

static double clock_shift(void)
{
	static double shift, at = -SHIFT_EVERY_S;
	double m0, m1, now = torch_hooks_now(), best = 1e9;
	struct timespec w;

	if (now - at < SHIFT_EVERY_S)
		return shift;
	for (int i = 0; i < 3; i++) {
		m0 = torch_hooks_now();
		clock_gettime(CLOCK_REALTIME, &w);
		m1 = torch_hooks_now();
		if (m1 - m0 < best) {
			best = m1 - m0;
			shift = (double)w.tv_sec + (double)w.tv_nsec * 1e-9 -
				(m0 + m1) / 2;
		}
	}
	at = now;
	return shift;
}

static void drain_trace(void)
{
	struct torch_trace_rec r;
	struct store_stmt *s;
	char err[256];
	double shift;
	int n = 0;

	if (torch_hooks_pop_trace(&r))
		return;
	if (recorder_begin(trace_rec, err, sizeof(err))) {
		log_warn("torch: %s", err);
		return;
	}
	s = recorder_stmt(trace_rec);
	shift = clock_shift();
	do {
		const char *module = torch_names_text(r.module);
		const char *stage = r.stage >= 0 && r.stage <= TORCH_STEP
					    ? stage_names[r.stage]
					    : "?";
		store_stmt_int(s, 1, r.step);
		store_stmt_int(s, 2, r.seq);
		store_stmt_text(s, 3, module);
		store_stmt_text(s, 4, stage);
		store_stmt_real(s, 5, r.duration);
		store_stmt_real(s, 6, r.cpu_duration);
		store_stmt_text(s, 7,
				clock_names[r.clock == TORCH_CLOCK_CUDA]);
		for (int i = 0; i < 4; i++)
			store_stmt_real(s, 8 + i, r.mem[i]);
		store_stmt_real(s, 12, r.offset);
		store_stmt_int(s, 13, r.rank);
		store_stmt_real(s, 14, r.start + shift);
		store_stmt_int(s, 15, r.tid);
		if (recorder_add(trace_rec, 10 * 8 + strlen(module) + 12, err,
				 sizeof(err)))
			break;
	} while (++n < DRAIN_MAX && torch_hooks_pop_trace(&r) == 0);
	if (recorder_commit(trace_rec, err, sizeof(err)))
		log_warn("torch: %s", err);
}

static void drain_vars(void)
{
	struct torch_var_rec r;
	struct store_stmt *s;
	char err[256];
	double shift;
	int n = 0;

	if (torch_hooks_pop_var(&r))
		return;
	if (recorder_begin(var_rec, err, sizeof(err)))
		return;
	s = recorder_stmt(var_rec);
	shift = clock_shift();
	do {
		store_stmt_int(s, 1, r.step);
		store_stmt_text(s, 2, r.func);
		store_stmt_text(s, 3, r.name);
		if (r.is_num)
			store_stmt_real(s, 4, r.num);
		else
			store_stmt_text(s, 4, r.value);
		store_stmt_real(s, 5, r.at + shift);
		if (recorder_add(var_rec,
				 8 + strlen(r.func) + strlen(r.name) +
					 (r.is_num ? 8 : strlen(r.value)),
				 err, sizeof(err)))
			break;
	} while (++n < DRAIN_MAX && torch_hooks_pop_var(&r) == 0);
	if (recorder_commit(var_rec, err, sizeof(err)))
		log_warn("torch: %s", err);
}

static void set_status(void)
{
	struct torch_hooks_info in;
	char text[CONFIG_VALUE_MAX];

	torch_hooks_info(&in);
	if (in.installed)
		snprintf(text, sizeof(text),
			 "on: step %lld%s, one step in %lld traced%s, %d "
			 "modules named, steps from %s, %llu records dropped, "
			 "%llu GPU times lost",
			 (long long)in.step, in.traced ? " (traced)" : "",
			 (long long)in.rate, in.rate_auto ? " (auto)" : "",
			 in.modules, in.step_hook,
			 (unsigned long long)in.dropped,
			 (unsigned long long)in.gpu_lost);
	else if (waiting)
		snprintf(text, sizeof(text),
			 "waiting for torch to be imported");
	else if (last_error && config_bool("torch.profiling"))
		snprintf(text, sizeof(text), "error: %s", error_text);
	else
		snprintf(text, sizeof(text), "off");
	config_set_info("torch.status", text);
}

int torch_tick(void)
{
	struct torch_hooks_info in;
	int interval;

	if (!trace_rec)
		return -1;
	recorder_limits(trace_rec, (size_t)config_int("torch.max_rows"),
			(size_t)config_int("torch.max_mb") << 20);
	recorder_limits(var_rec, (size_t)config_int("torch.max_rows"),
			(size_t)config_int("torch.max_mb") << 20);
	if (atomic_exchange(&changed, 0) || waiting)
		apply();
	drain_trace();
	drain_vars();
	set_status();
	torch_hooks_info(&in);
	if (waiting) {
		interval =
			waited_ms < WAIT_FAST_FOR ? WAIT_FAST_MS : WAIT_SLOW_MS;
		waited_ms += interval;
		return interval;
	}
	if (atomic_load(&changed))
		return WAIT_FAST_MS;
	/* Off: one more tick drains what the hooks left in the rings. */
	return in.installed ? TICK_ON_MS : -1;
}
