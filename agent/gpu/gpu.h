/*
 * gpu: the devices' figures from NVML (nvml.h), recorded on the recorder
 * thread (memory.c's "probing-rec") every gpu.interval_ms (0: never):
 *
 *   gpu.utilization(ts, device, name, uuid, gpu_util, mem_util,
 *                   memory_used, memory_total, power, temperature,
 *                   sm_clock, mem_clock, throttle, xid_count, last_xid,
 *                   process_memory)
 *
 * one row per device per sample; ts in Unix seconds, memory in MB (MiB),
 * power in W, temperature in C, clocks in MHz, utilization in %; NULL
 * where NVML does not say.  gpu.gpu_metrics is the original Probing's
 * name for it, a view.  Kept: gpu.max_rows rows, the oldest go first.
 *
 * No library, no device, or NVML failing: no rows, and gpu_last() says
 * why in one line ("GPU: no NVIDIA driver library (libnvidia-ml.so.1 not
 * found)").  A missing library or device is not looked for again; NVML
 * failing to start is retried every GPU_RETRY_MS.
 *
 * Cost: the sampling is timed; when a round takes more than a tenth of
 * the interval the next one waits ten times the round (at most
 * GPU_BACKOFF_MAX_MS), so that NVML never takes more than ~10% of one
 * core.  An NVML call that never returns (a wedged driver) would hold the
 * recorder thread: NVML gives no way to bound one call.
 *
 * Threads: gpu_init on the agent thread; gpu_tick and gpu_thread_end on
 * the recorder thread only (no GIL, no signal handler); gpu_last from any
 * thread.
 */
#ifndef GPU_GPU_H
#define GPU_GPU_H

#include <stddef.h>

#include "nvml.h"

struct store;

#define GPU_RETRY_MS 60000
#define GPU_RECHECK_MS 5000 /* settings looked at again at least this often */
#define GPU_BACKOFF_MAX_MS 60000

/* Creates gpu.utilization and the gpu.gpu_metrics view (once per store).
 * 0 or a negative error with err. */
int gpu_init(struct store *st, char *err, size_t errlen);

/* Recorder thread: samples the devices when one is due.  Returns the ms
 * until it wants to be called again (at most GPU_RECHECK_MS). */
int gpu_tick(void);

/* Recorder thread, as it ends: NVML shut down (nvmlShutdown). */
void gpu_thread_end(void);

/* In a forked child: no NVML there (nvml_atfork_child); the store is the
 * parent's, so gpu_init makes the table again. */
void gpu_atfork_child(void);

/* The last sample, copied. */
struct gpu_last {
	double ts;		/* Unix seconds of the sample; 0: none */
	int n;			/* devices in dev */
	char why[NVML_WHY_MAX]; /* when n is 0: why, one line */
	struct nvml_sample dev[NVML_DEVICES_MAX];
};

/* Copies the last sample into out (any thread). */
void gpu_last(struct gpu_last *out);

#endif
