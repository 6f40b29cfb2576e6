/*
 * gpu: NVML's figures into gpu.utilization.  See gpu.h.
 */
#include "core/thread.h"
#include "gpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/log.h"
#include "recorder.h"
#include "store.h"

static struct recorder *rec; /* this store's; NULL after fork */

/* Recorder thread's own. */
static int open_rc = 1;	      /* 1: never tried; 0 open; else nvml_open's */
static int64_t retry_at;      /* when a failed start is tried again */
static int64_t next_at;	      /* the next sample is due */
static int64_t last_interval; /* the interval next_at was set with */
static struct nvml_sample scratch[NVML_DEVICES_MAX];

/* gpu_last's copy, under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gpu_last last;

/* The original Probing's gpu_metrics. */
static const char metrics_view[] =
	"CREATE VIEW IF NOT EXISTS gpu.gpu_metrics AS SELECT ts, "
	"device AS gpu_id, name AS gpu_name, gpu_util AS utilization, "
	"mem_util AS memory_utilization, memory_used, memory_total, "
	"temperature, power AS power_usage, sm_clock, mem_clock, throttle, "
	"xid_count, process_memory FROM utilization";

int gpu_init(struct store *st, char *err, size_t errlen)
{
	struct recorder_opts o = {
		.schema = "gpu",
		.name = "utilization",
		.columns = "ts REAL, device INTEGER, name TEXT, uuid TEXT, "
			   "gpu_util INTEGER, mem_util INTEGER, "
			   "memory_used REAL, memory_total REAL, power REAL, "
			   "temperature INTEGER, sm_clock INTEGER, "
			   "mem_clock INTEGER, throttle TEXT, "
			   "xid_count INTEGER, last_xid INTEGER, "
			   "process_memory REAL",
		.doc = "each GPU every gpu.interval_ms, from NVML "
		       "(utilization %, memory MB, power W, temperature C, "
		       "clocks MHz; ts in Unix seconds)",
		.max_rows = (size_t)config_int("gpu.max_rows"),
	};
	int rc;

	if (rec)
		return 0;
	rc = recorder_new(st, &o, &rec, err, errlen);
	if (!rc)
		rc = store_exec(st, metrics_view, err, errlen);
	if (!rc)
		rc = store_catalog_add(st, "gpu", "gpu_metrics", "view",
				       "gpu.utilization as the original "
				       "Probing's gpu_metrics");
	pthread_mutex_lock(&lock);
	snprintf(last.why, sizeof(last.why), "GPU: not sampled yet");
	pthread_mutex_unlock(&lock);
	return rc;
}

static void set_why(const char *why)
{
	pthread_mutex_lock(&lock);
	last.n = 0;
	last.ts = 0;
	snprintf(last.why, sizeof(last.why), "%s", why);
	pthread_mutex_unlock(&lock);
}

static void bind_opt_int(struct store_stmt *s, int i, int has, int64_t v)
{
	if (has)
		store_stmt_int(s, i, v);
}

static void bind_opt_real(struct store_stmt *s, int i, int has, double v)
{
	if (has)
		store_stmt_real(s, i, v);
}

static void write_rows(double ts, const struct nvml_sample *d, int n)
{
	struct store_stmt *s = recorder_stmt(rec);
	char err[256];
	int rc = 0;

	recorder_limits(rec, (size_t)config_int("gpu.max_rows"), 0);
	if (recorder_begin(rec, err, sizeof(err))) {
		log_warn("gpu.utilization: %s", err);
		return;
	}
	for (int i = 0; i < n && !rc; i++) {
		store_stmt_real(s, 1, ts);
		store_stmt_int(s, 2, d[i].index);
		store_stmt_text(s, 3, d[i].name);
		store_stmt_text(s, 4, d[i].uuid);
		bind_opt_int(s, 5, d[i].has_util, d[i].util_gpu);
		bind_opt_int(s, 6, d[i].has_util, d[i].util_mem);
		bind_opt_real(s, 7, d[i].has_mem, d[i].mem_used);
		bind_opt_real(s, 8, d[i].has_mem, d[i].mem_total);
		bind_opt_real(s, 9, d[i].has_power, d[i].power);
		bind_opt_int(s, 10, d[i].has_temp, d[i].temp);
		bind_opt_int(s, 11, d[i].has_sm_clock, d[i].sm_clock);
		bind_opt_int(s, 12, d[i].has_mem_clock, d[i].mem_clock);
		if (d[i].has_throttle)
			store_stmt_text(s, 13, d[i].throttle);
		bind_opt_int(s, 14, d[i].has_xid, (int64_t)d[i].xid_count);
		bind_opt_int(s, 15, d[i].has_xid && d[i].xid_count,
			     (int64_t)d[i].last_xid);
		bind_opt_real(s, 16, d[i].has_proc, d[i].proc_mem);
		rc = recorder_add(rec,
				  8 * 13 + strlen(d[i].name) +
					  strlen(d[i].uuid) +
					  strlen(d[i].throttle),
				  err, sizeof(err));
	}
	if (rc)
		recorder_rollback(rec);
	else
		rc = recorder_commit(rec, err, sizeof(err));
	if (rc)
		log_warn("gpu.utilization: %s", err);
}

static void sample(void)
{
	struct timespec ts;
	double t;
	int n = nvml_count();

	nvml_poll_events();
	for (int i = 0; i < n; i++)
		nvml_read(i, &scratch[i]);
	clock_gettime(CLOCK_REALTIME, &ts);
	t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
	pthread_mutex_lock(&lock);
	last.ts = t;
	last.n = n;
	last.why[0] = '\0';
	memcpy(last.dev, scratch, (size_t)n * sizeof(*scratch));
	pthread_mutex_unlock(&lock);
	if (rec)
		write_rows(t, scratch, n);
}

/* NVML open, or why not; 0 when it is. */
static int ensure_open(int64_t t)
{
	char why[NVML_WHY_MAX];

	if (open_rc == 0)
		return 0;
	/* Retried: NVML failing to start only; no library, not NVML or
	 * no device stay so. */
	if (open_rc != 1 && (open_rc != -EIO || t < retry_at))
		return open_rc;
	open_rc = nvml_open(why, sizeof(why));
	if (open_rc) {
		retry_at = t + GPU_RETRY_MS;
		set_why(why);
		if (open_rc != -ENOENT)
			log_info("%s", why);
	}
	return open_rc;
}

int gpu_tick(void)
{
	int64_t interval = config_int("gpu.interval_ms"), t = agent_now_ms(), took,
		wait;

	if (interval <= 0) {
		if (open_rc == 0) {
			nvml_close();
			open_rc = 1;
		}
		set_why("GPU: not sampled (gpu.interval_ms is 0)");
		return GPU_RECHECK_MS;
	}
	if (ensure_open(t))
		return GPU_RECHECK_MS;
	/* Due, or the interval got shorter since next_at was set. */
	if (t < next_at && interval >= last_interval)
		return (int)(next_at - t < GPU_RECHECK_MS ? next_at - t
							  : GPU_RECHECK_MS);
	sample();
	took = agent_now_ms() - t;
	wait = interval;
	if (took * 10 > wait) {
		wait = took * 10 < GPU_BACKOFF_MAX_MS ? took * 10
						      : GPU_BACKOFF_MAX_MS;
		if (wait < interval)
			wait = interval;
	}
	next_at = t + wait;
	last_interval = interval;
	return (int)(wait < GPU_RECHECK_MS ? wait : GPU_RECHECK_MS);
}

void gpu_thread_end(void)
{
	if (open_rc == 0)
		nvml_close();
	open_rc = 1;
	next_at = 0;
}

void gpu_atfork_child(void)
{
	nvml_atfork_child();
	pthread_mutex_init(&lock, NULL);
	rec = NULL;
	open_rc = 1;
	next_at = 0;
	last.n = 0;
}

void gpu_last(struct gpu_last *out)
{
	pthread_mutex_lock(&lock);
	*out = last;
	pthread_mutex_unlock(&lock);
}
