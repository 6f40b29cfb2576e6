/*
 * nvml: NVML through dlopen.  See nvml.h.
 *
 * The declarations below are NVML's (nvml.h, CUDA 12/13), written out
 * here so that the build needs no CUDA headers: the return code is an
 * int enum (0 is NVML_SUCCESS), a device is an opaque pointer, and the
 * structs are laid out as nvml.h lays them out.
 */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LIB_NAME "libnvidia-ml.so.1"

#define NVML_SUCCESS 0
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_EVENT_XID 0x8ULL /* nvmlEventTypeXidCriticalError */
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

typedef void *nvml_dev;
typedef void *nvml_evset;

struct nvml_utilization { /* nvmlUtilization_t */
	unsigned gpu, memory;
};

struct nvml_memory { /* nvmlMemory_t */
	unsigned long long total, free, used;
};

struct nvml_memory_v2 { /* nvmlMemory_v2_t */
	unsigned version;
	unsigned long long total, reserved, free, used;
};

/* NVML_STRUCT_VERSION(Memory, 2): the size, and the version in the top
 * byte. */
#define NVML_MEMORY_V2 ((unsigned)(sizeof(struct nvml_memory_v2) | (2u << 24)))

struct nvml_temperature { /* nvmlTemperature_v1_t */
	unsigned version;
	int sensor; /* nvmlTemperatureSensors_t */
	int temperature;
};

#define NVML_TEMPERATURE_V1                                                    \
	((unsigned)(sizeof(struct nvml_temperature) | (1u << 24)))

struct nvml_event_data { /* nvmlEventData_t */
	nvml_dev device;
	unsigned long long type, data;
	unsigned gpu_instance, compute_instance;
};

/* nvmlProcessInfo_t: what ..._v3 and ..._v2 fill (the unversioned _v1
 * fills a shorter struct and is not used). */
struct nvml_process {
	unsigned pid;
	unsigned long long used; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
	unsigned gpu_instance, compute_instance;
};

/* The functions, looked up by name; NULL where the library lacks one. */
static struct {
	int (*init)(void);
	int (*shutdown)(void);
	const char *(*error_string)(int);
	int (*count)(unsigned *);
	int (*handle)(unsigned, nvml_dev *);
	int (*name)(nvml_dev, char *, unsigned);
	int (*uuid)(nvml_dev, char *, unsigned);
	int (*util)(nvml_dev, struct nvml_utilization *);
	int (*mem_v2)(nvml_dev, struct nvml_memory_v2 *);
	int (*mem)(nvml_dev, struct nvml_memory *);
	int (*power)(nvml_dev, unsigned *);
	int (*temp)(nvml_dev, int, unsigned *);
	int (*temp_v)(nvml_dev, struct nvml_temperature *);
	int (*clock)(nvml_dev, int, unsigned *);
	int (*reasons)(nvml_dev, unsigned long long *);
	int (*set_create)(nvml_evset *);
	int (*set_register)(nvml_dev, unsigned long long, nvml_evset);
	int (*set_wait)(nvml_evset, struct nvml_event_data *, unsigned);
	int (*set_free)(nvml_evset);
	int (*procs)(nvml_dev, unsigned *, struct nvml_process *);
} fn;

struct device {
	nvml_dev h;
	int index;
	char name[NVML_NAME_MAX], uuid[NVML_UUID_MAX];
	int xid_watched;
	uint64_t xid_count;
	unsigned long long last_xid;
};

static void *lib;   /* never dlclose()d once NVML started */
static int started; /* nvmlInit_v2 succeeded, no shutdown since */
static int forked;  /* a forked child: NVML is not used here */
static nvml_evset events;
static struct device devs[NVML_DEVICES_MAX];
static int ndevs;
/* Twice the entries asked for: room to spare should a driver's struct
 * ever be longer than nvml.h's. */
static struct nvml_process procs[2 * NVML_PROCS_MAX];

static const char *nvml_err(int rc)
{
	const char *s = fn.error_string ? fn.error_string(rc) : NULL;

	return s ? s : "unknown NVML error";
}

/* dlsym of name into *slot (a function pointer: copied, as ISO C has
 * no conversion from void *); NULL when absent. */
static void *look(void *slot, const char *name)
{
	void *p = dlsym(lib, name);

	memcpy(slot, &p, sizeof(p));
	return p;
}

/* The first of two names that the library has. */
static void look2(void *slot, const char *a, const char *b)
{
	if (!look(slot, a))
		look(slot, b);
}

/* Loads the library and its symbols; 0 or -ENOENT / -ENOSYS with why. */
static int load(char *why, size_t whylen)
{
	static const char *const required[] = {
		"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString",
		"nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2"};
	const char *e;

	if (!lib) {
		dlerror();
		lib = dlopen(LIB_NAME, RTLD_NOW | RTLD_LOCAL);
		if (!lib) {
			e = dlerror();
			if (!e || strstr(e, "No such file"))
				snprintf(why, whylen,
					 "GPU: no NVIDIA driver library "
					 "(" LIB_NAME " not found)");
			else
				snprintf(why, whylen,
					 "GPU: " LIB_NAME
					 " could not be loaded: "
					 "%.180s",
					 e);
			return -ENOENT;
		}
	}
	for (size_t i = 0; i < sizeof(required) / sizeof(*required); i++)
		if (!dlsym(lib, required[i])) {
			snprintf(why, whylen,
				 "GPU: " LIB_NAME " is not NVML (no %s)",
				 required[i]);
			/* Nothing of it ran but its constructors: let it go. */
			dlclose(lib);
			lib = NULL;
			return -ENOSYS;
		}
	look(&fn.init, "nvmlInit_v2");
	look(&fn.shutdown, "nvmlShutdown");
	look(&fn.error_string, "nvmlErrorString");
	look(&fn.count, "nvmlDeviceGetCount_v2");
	look(&fn.handle, "nvmlDeviceGetHandleByIndex_v2");
	look(&fn.name, "nvmlDeviceGetName");
	look(&fn.uuid, "nvmlDeviceGetUUID");
	look(&fn.util, "nvmlDeviceGetUtilizationRates");
	look(&fn.mem_v2, "nvmlDeviceGetMemoryInfo_v2");
	look(&fn.mem, "nvmlDeviceGetMemoryInfo");
	look(&fn.power, "nvmlDeviceGetPowerUsage");
	look(&fn.temp, "nvmlDeviceGetTemperature");
	/* Its successor: for a driver that drops the old one. */
	look(&fn.temp_v, "nvmlDeviceGetTemperatureV");
	look(&fn.clock, "nvmlDeviceGetClockInfo");
	/* Renamed in CUDA 12.2; the old name stays for older drivers. */
	look2(&fn.reasons, "nvmlDeviceGetCurrentClocksEventReasons",
	      "nvmlDeviceGetCurrentClocksThrottleReasons");
	look(&fn.set_create, "nvmlEventSetCreate");
	look(&fn.set_register, "nvmlDeviceRegisterEvents");
	look(&fn.set_wait, "nvmlEventSetWait_v2");
	look(&fn.set_free, "nvmlEventSetFree");
	look2(&fn.procs, "nvmlDeviceGetComputeRunningProcesses_v3",
	      "nvmlDeviceGetComputeRunningProcesses_v2");
	return 0;
}

/* Xid errors of every device into one event set; a device or platform
 * that cannot has xid_watched = 0. */
static void watch_xid(void)
{
	int any = 0;

	if (!fn.set_create || !fn.set_register || !fn.set_wait ||
	    !fn.set_free || fn.set_create(&events) != NVML_SUCCESS) {
		events = NULL;
		return;
	}
	for (int i = 0; i < ndevs; i++) {
		devs[i].xid_watched = fn.set_register(devs[i].h, NVML_EVENT_XID,
						      events) == NVML_SUCCESS;
		any |= devs[i].xid_watched;
	}
	if (!any) {
		fn.set_free(events);
		events = NULL;
	}
}

int nvml_open(char *why, size_t whylen)
{
	unsigned n = 0;
	int rc;

	if (forked) {
		snprintf(why, whylen,
			 "GPU: not read in a forked child (the parent process "
			 "records the devices)");
		return -EPERM;
	}
	if (started)
		return 0;
	rc = load(why, whylen);
	if (rc)
		return rc;
	rc = fn.init();
	if (rc != NVML_SUCCESS) {
		snprintf(why, whylen, "GPU: NVML did not start: %.160s",
			 nvml_err(rc));
		return -EIO;
	}
	started = 1;
	rc = fn.count(&n);
	if (rc != NVML_SUCCESS || n == 0) {
		if (rc != NVML_SUCCESS)
			snprintf(why, whylen,
				 "GPU: NVML could not count the devices: "
				 "%.160s",
				 nvml_err(rc));
		else
			snprintf(why, whylen, "GPU: NVML found no device");
		nvml_close();
		return rc != NVML_SUCCESS ? -EIO : -ENODEV;
	}
	ndevs = 0;
	for (unsigned i = 0; i < n && ndevs < NVML_DEVICES_MAX; i++) {
		struct device *d = &devs[ndevs];

		memset(d, 0, sizeof(*d));
		/* A device NVML cannot open (lost, no permission) is left
		 * out; the others are read. */
		if (fn.handle(i, &d->h) != NVML_SUCCESS)
			continue;
		d->index = (int)i;
		if (!fn.name ||
		    fn.name(d->h, d->name, sizeof(d->name)) != NVML_SUCCESS)
			d->name[0] = '\0';
		if (!fn.uuid ||
		    fn.uuid(d->h, d->uuid, sizeof(d->uuid)) != NVML_SUCCESS)
			d->uuid[0] = '\0';
		d->name[sizeof(d->name) - 1] = '\0';
		d->uuid[sizeof(d->uuid) - 1] = '\0';
		ndevs++;
	}
	if (!ndevs) {
		snprintf(why, whylen,
			 "GPU: NVML counted %u devices but opened none "
			 "(permissions?)",
			 n);
		nvml_close();
		return -ENODEV;
	}
	watch_xid();
	return 0;
}

int nvml_count(void)
{
	return started ? ndevs : 0;
}

void nvml_poll_events(void)
{
	struct nvml_event_data ev;

	if (!started || !events)
		return;
	for (int k = 0; k < NVML_EVENTS_MAX; k++) {
		memset(&ev, 0, sizeof(ev));
		/* Timeout 0: what is there now, never a wait. */
		if (fn.set_wait(events, &ev, 0) != NVML_SUCCESS)
			return;
		if (!(ev.type & NVML_EVENT_XID))
			continue;
		for (int i = 0; i < ndevs; i++)
			if (devs[i].h == ev.device) {
				devs[i].xid_count++;
				devs[i].last_xid = ev.data;
				break;
			}
	}
}

static const struct {
	unsigned long long bit;
	const char *word;
} reasons[] = {
	{0x1ULL, "gpu_idle"},
	{0x2ULL, "applications_clocks_setting"},
	{0x4ULL, "sw_power_cap"},
	{0x8ULL, "hw_slowdown"},
	{0x10ULL, "sync_boost"},
	{0x20ULL, "sw_thermal_slowdown"},
	{0x40ULL, "hw_thermal_slowdown"},
	{0x80ULL, "hw_power_brake_slowdown"},
	{0x100ULL, "display_clock_setting"},
};

void nvml_reasons_words(unsigned long long bits, char *out, size_t outlen)
{
	size_t at = 0;
	int n;

	if (!outlen)
		return;
	out[0] = '\0';
	for (size_t i = 0; i < sizeof(reasons) / sizeof(*reasons); i++) {
		if (!(bits & reasons[i].bit))
			continue;
		bits &= ~reasons[i].bit;
		n = snprintf(out + at, outlen - at, "%s%s", at ? "," : "",
			     reasons[i].word);
		if (n < 0 || (size_t)n >= outlen - at) {
			out[at] = '\0'; /* no half words */
			return;
		}
		at += (size_t)n;
	}
	if (bits) {
		n = snprintf(out + at, outlen - at, "%s0x%llx", at ? "," : "",
			     bits);
		if (n < 0 || (size_t)n >= outlen - at)
			out[at] = '\0';
	}
}

/* This process's memory on d, from NVML's list of compute processes. */
static void read_proc(const struct device *d, struct nvml_sample *out)
{
	unsigned n = NVML_PROCS_MAX;
	unsigned pid = (unsigned)getpid();

	if (!fn.procs || fn.procs(d->h, &n, procs) != NVML_SUCCESS)
		return; /* NVML_ERROR_INSUFFICIENT_SIZE too: not all listed */
	if (n > NVML_PROCS_MAX)
		n = NVML_PROCS_MAX;
	for (unsigned i = 0; i < n; i++)
		if (procs[i].pid == pid) {
			if (procs[i].used == NVML_VALUE_NOT_AVAILABLE)
				return;
			out->has_proc = 1;
			out->proc_mem += (double)procs[i].used / 1048576.0;
		}
}

int nvml_read(int i, struct nvml_sample *out)
{
	const struct device *d;
	struct nvml_utilization u;
	struct nvml_memory_v2 m2;
	struct nvml_memory m;
	unsigned v;
	unsigned long long bits;

	memset(out, 0, sizeof(*out));
	if (!started || i < 0 || i >= ndevs)
		return -EINVAL;
	d = &devs[i];
	out->index = d->index;
	memcpy(out->name, d->name, sizeof(out->name));
	memcpy(out->uuid, d->uuid, sizeof(out->uuid));
	if (fn.util && fn.util(d->h, &u) == NVML_SUCCESS) {
		out->has_util = 1;
		out->util_gpu = u.gpu;
		out->util_mem = u.memory;
	}
	/* _v2 first: its used excludes the driver's reserved memory, as
	 * nvidia-smi's memory.used does. */
	memset(&m2, 0, sizeof(m2));
	m2.version = NVML_MEMORY_V2;
	if (fn.mem_v2 && fn.mem_v2(d->h, &m2) == NVML_SUCCESS) {
		out->has_mem = 1;
		out->mem_used = (double)m2.used / 1048576.0;
		out->mem_total = (double)m2.total / 1048576.0;
	} else if (fn.mem && fn.mem(d->h, &m) == NVML_SUCCESS) {
		out->has_mem = 1;
		out->mem_used = (double)m.used / 1048576.0;
		out->mem_total = (double)m.total / 1048576.0;
	}
	if (fn.power && fn.power(d->h, &v) == NVML_SUCCESS) {
		out->has_power = 1;
		out->power = v / 1000.0; /* mW */
	}
	if (fn.temp &&
	    fn.temp(d->h, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) {
		out->has_temp = 1;
		out->temp = v;
	} else if (fn.temp_v) {
		struct nvml_temperature tv = {.version = NVML_TEMPERATURE_V1,
					      .sensor = NVML_TEMPERATURE_GPU};

		if (fn.temp_v(d->h, &tv) == NVML_SUCCESS &&
		    tv.temperature >= 0) {
			out->has_temp = 1;
			out->temp = (unsigned)tv.temperature;
		}
	}
	if (fn.clock && fn.clock(d->h, NVML_CLOCK_SM, &v) == NVML_SUCCESS) {
		out->has_sm_clock = 1;
		out->sm_clock = v;
	}
	if (fn.clock && fn.clock(d->h, NVML_CLOCK_MEM, &v) == NVML_SUCCESS) {
		out->has_mem_clock = 1;
		out->mem_clock = v;
	}
	if (fn.reasons && fn.reasons(d->h, &bits) == NVML_SUCCESS) {
		out->has_throttle = 1;
		nvml_reasons_words(bits, out->throttle, sizeof(out->throttle));
	}
	out->has_xid = d->xid_watched;
	out->xid_count = d->xid_count;
	out->last_xid = d->last_xid;
	read_proc(d, out);
	return 0;
}

void nvml_close(void)
{
	if (!started)
		return;
	if (events)
		fn.set_free(events);
	events = NULL;
	fn.shutdown();
	started = 0;
	ndevs = 0;
}

void nvml_atfork_child(void)
{
	forked = 1;
	started = 0;
	events = NULL;
	ndevs = 0;
}
