/*
 * req_metrics: probing/metrics — the process's figures for a metrics
 * scraper (`probing exporter`, docs/metrics.md), each read from what the
 * agent records anyway: the latest process.memory row, the last minute of
 * python.torch_trace and python.comm_collective, process.hangs, the GPUs'
 * latest rows, the sampler's state.  No measurement of its own, and
 * nothing that takes the GIL: a scrape every few seconds costs the
 * program a few SQLite reads on the agent's thread.
 *
 * Body: {"metrics": [{"name", "type" (gauge|counter), "help", "samples":
 * [{"labels": {NAME: TEXT}, "value": N}]}]}; a metric whose table is
 * missing or empty (no torch, no GPU) has no samples.
 */
#include <stdio.h>
#include <string.h>

#include "core/agent.h"
#include "profiler/sampler.h"
#include "server/handler.h"
#include "store.h"

/* A metric read by SQL: every column but the last is a label (named as
 * the column), the last is the value; NULL values are left out. */
struct sql_metric {
	const char *name, *type, *help, *sql;
};

/* The last minute of traced steps: each step from its start (the end of
 * the optimizer step before it) to the end of its last stage. */
#define STEPS                                                              \
	"WITH s AS (SELECT step, min(ts - time_offset) AS t0, "            \
	"max(ts + cpu_duration) AS t1 FROM python.torch_trace WHERE ts > " \
	"ago('1m') GROUP BY step) "

/* Each GPU's latest row of the last minute, and a figure of it. */
#define GPU_LATEST(expr)                                                   \
	"SELECT CAST(device AS TEXT) AS device, " expr " FROM "            \
	"gpu.utilization g WHERE ts > ago('1m') AND ts = (SELECT max(ts) " \
	"FROM gpu.utilization WHERE device = g.device)"

static const struct sql_metric sql_metrics[] = {
	{"probing_resident_memory_bytes", "gauge",
	 "Resident memory of the process (process.memory's latest row)",
	 "SELECT rss * 1048576 FROM process.memory ORDER BY ts DESC LIMIT 1"},
	{"probing_python_blocks", "gauge",
	 "Memory blocks Python's allocator holds (sys.getallocatedblocks())",
	 "SELECT py_blocks FROM process.memory WHERE py_blocks IS NOT NULL "
	 "ORDER BY ts DESC LIMIT 1"},
	{"probing_cuda_allocated_bytes", "gauge",
	 "Bytes in tensors torch's CUDA allocator holds",
	 "SELECT cuda_allocated * 1048576 FROM process.memory WHERE "
	 "cuda_allocated IS NOT NULL ORDER BY ts DESC LIMIT 1"},
	{"probing_cuda_reserved_bytes", "gauge",
	 "Bytes torch's CUDA allocator reserved from the device",
	 "SELECT cuda_reserved * 1048576 FROM process.memory WHERE "
	 "cuda_reserved IS NOT NULL ORDER BY ts DESC LIMIT 1"},
	{"probing_step", "gauge",
	 "The optimizer step traced last (torch.profiling=on)",
	 "SELECT max(step) FROM python.torch_trace WHERE stage = 'step'"},
	{"probing_step_seconds", "gauge",
	 "Mean time of the steps traced in the last minute, from the end of "
	 "one optimizer step to the end of the next",
	 STEPS "SELECT avg(t1 - t0) FROM s"},
	{"probing_steps_per_second", "gauge",
	 "Optimizer steps per second over the last minute of traced steps",
	 "SELECT (max(step) - min(step)) / (max(ts) - min(ts)) FROM "
	 "python.torch_trace WHERE stage = 'step' AND ts > ago('1m') HAVING "
	 "max(ts) > min(ts)"},
	{"probing_stage_seconds", "gauge",
	 "Mean time per traced step in the last minute of each stage: "
	 "forward and backward (from the stage's first module start to its "
	 "last module's end), optimizer (its step)",
	 "WITH g AS (SELECT step, CASE stage WHEN 'step' THEN 'optimizer' "
	 "ELSE stage END AS stage, max(ts + cpu_duration) - min(ts) AS d "
	 "FROM python.torch_trace WHERE ts > ago('1m') GROUP BY step, stage) "
	 "SELECT stage, avg(d) FROM g GROUP BY stage"},
	{"probing_collective_latency_seconds", "gauge",
	 "Mean time of the torch.distributed calls that ended in the last "
	 "minute, per op",
	 "SELECT op, avg(duration) FROM python.comm_collective WHERE "
	 "duration IS NOT NULL AND ts + duration > ago('1m') GROUP BY op"},
	{"probing_collective_calls_per_second", "gauge",
	 "torch.distributed calls per second over the last minute, per op",
	 "SELECT op, count(*) / 60.0 FROM python.comm_collective WHERE ts > "
	 "ago('1m') GROUP BY op"},
	{"probing_collective_bytes_per_second", "gauge",
	 "Bytes this rank contributed to torch.distributed calls per second "
	 "over the last minute, per op",
	 "SELECT op, coalesce(sum(bytes), 0) / 60.0 FROM "
	 "python.comm_collective WHERE ts > ago('1m') GROUP BY op"},
	{"probing_collectives_running", "gauge",
	 "torch.distributed calls started and not ended",
	 "SELECT count(*) FROM python.comm_collective WHERE state = "
	 "'running'"},
	{"probing_collectives_total", "counter",
	 "torch.distributed calls recorded since recording began",
	 "SELECT coalesce(max(id), 0) FROM python.comm_collective"},
	{"probing_hangs_total", "counter",
	 "Hangs of the main thread the watchdog saw (hang.timeout)",
	 "SELECT coalesce(max(id), 0) FROM process.hangs"},
	{"probing_hung", "gauge",
	 "1 while the watchdog sees the main thread stuck",
	 "SELECT count(*) > 0 FROM process.hangs WHERE resumed IS NULL"},
	{"probing_gpu_utilization_ratio", "gauge",
	 "Share of the last NVML sample period a kernel ran, per GPU",
	 GPU_LATEST("gpu_util / 100.0")},
	{"probing_gpu_memory_used_bytes", "gauge",
	 "Device memory in use, all processes, per GPU",
	 GPU_LATEST("memory_used * 1048576")},
	{"probing_gpu_power_watts", "gauge", "Board power draw, per GPU",
	 GPU_LATEST("power")},
	{"probing_gpu_temperature_celsius", "gauge", "GPU temperature",
	 GPU_LATEST("temperature")},
	{"probing_gpu_process_memory_bytes", "gauge",
	 "Device memory this process holds, per GPU",
	 GPU_LATEST("process_memory * 1048576")},
};

static cJSON *metric(cJSON *list, const char *name, const char *type,
		     const char *help)
{
	cJSON *m = cJSON_CreateObject();

	cJSON_AddStringToObject(m, "name", name);
	cJSON_AddStringToObject(m, "type", type);
	cJSON_AddStringToObject(m, "help", help);
	cJSON_AddItemToArray(list, m);
	return cJSON_AddArrayToObject(m, "samples");
}

static void sample(cJSON *samples, double value, const char *label,
		   const char *text)
{
	cJSON *s = cJSON_CreateObject();
	cJSON *labels = cJSON_AddObjectToObject(s, "labels");

	if (label && text)
		cJSON_AddStringToObject(labels, label, text);
	cJSON_AddNumberToObject(s, "value", value);
	cJSON_AddItemToArray(samples, s);
}

static double number(const struct store_value *v, int *ok)
{
	*ok = v->type == STORE_INT || v->type == STORE_REAL;
	return v->type == STORE_INT ? (double)v->u.i
	       : v->type == STORE_REAL ? v->u.d
				       : 0;
}

static void read_sql(struct store *st, const struct sql_metric *m,
		     cJSON *list)
{
	struct store_limits lim = {.max_rows = 64, .timeout_ms = 2000};
	struct store_result res = {0};
	cJSON *samples = metric(list, m->name, m->type, m->help);
	char err[256];

	/* A table not there (no torch, no GPU, a watchdog never on): no
	 * samples. */
	if (store_query(st, m->sql, &lim, &res, err, sizeof(err))) {
		store_result_release(&res);
		return;
	}
	for (size_t r = 0; r < res.nrows; r++) {
		const struct store_value *row = &res.cells[r * res.ncols];
		int ok;
		double v = number(&row[res.ncols - 1], &ok);

		if (!ok)
			continue;
		if (res.ncols >= 2 && row[0].type == STORE_TEXT)
			sample(samples, v, res.cols[0].name, row[0].u.s.p);
		else if (res.ncols == 1)
			sample(samples, v, NULL, NULL);
	}
	store_result_release(&res);
}

static void run_metrics(struct request *req)
{
	struct store *st = agent_store();
	struct sampler_status ss;
	cJSON *body, *list;

	if (!st) {
		request_fail(req, DAP_ERROR_FAILED, "the store is not ready");
		return;
	}
	body = request_ok(req);
	list = body ? cJSON_AddArrayToObject(body, "metrics") : NULL;
	if (!list)
		return;
	for (size_t i = 0; i < sizeof(sql_metrics) / sizeof(*sql_metrics); i++)
		read_sql(st, &sql_metrics[i], list);
	sampler_status(&ss);
	sample(metric(list, "probing_sampler_running", "gauge",
		      "1 while the sampling profiler runs"),
	       ss.running, NULL, NULL);
	sample(metric(list, "probing_sampler_hz", "gauge",
		      "The sampling profiler's rate, samples per second per "
		      "thread"),
	       ss.hz, NULL, NULL);
	sample(metric(list, "probing_sampler_samples", "gauge",
		      "Thread samples the profiler's current (or last) run "
		      "took"),
	       (double)ss.samples, NULL, NULL);
}

const struct handler handler_metrics = {
	.command = "probing/metrics",
	.flags = HANDLER_BLOCKS,
	.run = run_metrics,
};
