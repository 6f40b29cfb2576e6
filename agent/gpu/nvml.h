/*
 * nvml: NVIDIA's management library (NVML), loaded at run time, read one
 * device at a time.
 *
 * No link-time dependency: nvml_open() dlopen()s "libnvidia-ml.so.1" (the
 * driver's, found the way the dynamic loader finds any library) and looks
 * up each versioned symbol it uses (nvmlInit_v2, nvmlDeviceGetCount_v2,
 * ..._v2/_v3 where NVML has them).  Five symbols are required (init,
 * shutdown, count, handle by index, error string); without one the
 * library is refused ("not NVML").  The others are optional: a missing
 * one, or NVML_ERROR_NOT_SUPPORTED from it, leaves that figure unknown
 * (has_* = 0), never made up.
 *
 * What fails says why in one line, for `probing memory`:
 *   "GPU: no NVIDIA driver library (libnvidia-ml.so.1 not found)"
 *   "GPU: libnvidia-ml.so.1 is not NVML (no nvmlInit_v2): ..."
 *   "GPU: NVML did not start: Driver Not Loaded"
 *   "GPU: NVML found no device"
 *
 * Bounded: at most NVML_DEVICES_MAX devices, NVML_PROCS_MAX processes per
 * device listed, NVML_EVENTS_MAX Xid events read per poll, strings cut
 * to their buffers.  The library is never dlclose()d once NVML started
 * (it may keep threads or handlers; the program may use it too, and
 * NVML counts nvmlInit/nvmlShutdown pairs, so our shutdown leaves the
 * program's use alone).
 *
 * Threads: every call from one thread at a time (the recorder thread),
 * never from a signal handler, never with the GIL held (NVML calls may
 * take milliseconds).  After fork() the child does not use NVML
 * (nvml_atfork_child): the parent's state is not the child's.
 */
#ifndef GPU_NVML_H
#define GPU_NVML_H

#include <stddef.h>
#include <stdint.h>

#define NVML_DEVICES_MAX 16
#define NVML_PROCS_MAX 256
#define NVML_EVENTS_MAX 64 /* Xid events read per poll */
#define NVML_NAME_MAX 96   /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_UUID_MAX 96   /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define NVML_THROTTLE_MAX 256
#define NVML_WHY_MAX 256

/* One device now.  A figure whose has_ flag is 0 is unknown (no symbol,
 * not supported, or an error). */
struct nvml_sample {
	int index; /* NVML's (nvidia-smi's) index */
	char name[NVML_NAME_MAX];
	char uuid[NVML_UUID_MAX];
	int has_util;
	unsigned util_gpu, util_mem; /* %, over NVML's last sample period */
	int has_mem;
	double mem_used, mem_total; /* MB (MiB) */
	int has_power;
	double power; /* W */
	int has_temp;
	unsigned temp; /* C */
	int has_sm_clock, has_mem_clock;
	unsigned sm_clock, mem_clock; /* MHz */
	int has_throttle;
	char throttle[NVML_THROTTLE_MAX]; /* "sw_power_cap,hw_slowdown", "" */
	int has_xid;			  /* Xid events are watched */
	uint64_t xid_count;		  /* since nvml_open */
	unsigned long long last_xid;	  /* 0: none yet */
	int has_proc;
	double proc_mem; /* MB this process holds on it (0: none) */
};

/* Loads the library, starts NVML, takes the devices' handles and
 * watches Xid errors where it can.  0, or a negative errno (-ENOENT no
 * library, -ENOSYS not NVML, -EIO NVML failed, -ENODEV no device,
 * -EPERM in a forked child) with
 * the one line in why.  Idempotent while open. */
int nvml_open(char *why, size_t whylen);

/* Devices opened (0 when not open). */
int nvml_count(void);

/* Reads the pending Xid events into the devices' counts (timeout 0:
 * never waits). */
void nvml_poll_events(void);

/* Reads device i (0 <= i < nvml_count()) into out.  0 or -EINVAL. */
int nvml_read(int i, struct nvml_sample *out);

/* nvmlShutdown (the event set freed first).  Idempotent; the library
 * stays loaded for a later nvml_open. */
void nvml_close(void);

/* In a forked child: forget the parent's NVML without calling it; NVML
 * is not used again in this process. */
void nvml_atfork_child(void);

/* Clock-event (throttle) reason bits as words, comma-separated, into
 * out; unknown bits as "0x..".  Exposed for the unit test. */
void nvml_reasons_words(unsigned long long bits, char *out, size_t outlen);

#endif
