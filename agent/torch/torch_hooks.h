/*
 * torch_hooks: the part of torch tracing that runs inside the training
 * process's calls — a wrapper of Module.__call__, autograd hooks for the
 * backward pass, the optimizer step hook — all C callables, and the
 * records they hand to the recorder thread.
 *
 * What is hooked, and how it goes away again:
 *  - torch.nn.Module.__call__, wrapped by a C method descriptor that
 *    times the calls of a traced step (on an untraced one it only passes
 *    them on; torch_forward.h), and put back on removal.
 *  - Step detection: torch.optim.optimizer.register_optimizer_step_pre/
 *    post_hook where torch has them (2.x); on torch 1.x, whose optimizers
 *    call self._optimizer_step_code() after every step (a hook point left
 *    for the profiler), Optimizer._optimizer_step_code is replaced by ours
 *    and put back on removal.
 *  - Backward: on a traced module's forward, prehooks on the autograd
 *    nodes of its output (the gradient reached the module: start) and of
 *    its inputs (the gradient left it: end; for inputs needing no gradient,
 *    the end of the backward pass, through the engine's queue_callback).
 *    These live on that step's graph and do nothing once their step is
 *    over or tracing is off; they go with the graph.
 *
 * GPU time: a traced module call whose work goes to CUDA (its first
 * tensor input is a CUDA tensor, or, with no tensor input, its first own
 * parameter or buffer is), in a process where torch has initialised
 * CUDA, is timed on the GPU too: torch CUDA events (torch.cuda.Event,
 * enable_timing) recorded on that device's current stream when the call
 * begins and ends.  Its row waits in a bounded pending list
 * (TORCH_GPU_PENDING) until both events have completed, found by
 * polling (event.query(), which never blocks) when a later traced call
 * or a step begins, on the program's thread; its duration is then the
 * GPU's (clock CUDA), cpu_duration the CPU's.  Nothing ever synchronizes
 * the program's streams.  Pending full, events unavailable, or tracing
 * switched off while it waits (removal, on an agent thread, makes no
 * CUDA call): the row goes out with the CPU's time (clock CPU) and is
 * counted (gpu_lost).  While the current stream is being captured into a
 * CUDA graph nothing is recorded or queried (an event query would
 * invalidate the capture).  Events are reused from a pool per device
 * (TORCH_GPU_EVENTS alive at most), kept for the next installation once
 * made (freeing one is a CUDA call too).  Backward
 * and optimizer rows are CPU time.
 *
 * A step is one optimizer step: rows of step s are what ran after the
 * s-th optimizer step (counting from 0 when tracing is first turned on)
 * up to and including the next one.  Step s is traced when
 * s % rate == 0, rate being step_rate or, for step_rate=auto, the rate
 * torch_rate.h chose; in the k-th traced step (k = s / rate) a module of
 * index i (torch_names.h) is traced when (i + k) % module_rate == 0.
 *
 * Threads: everything but torch_hooks_pop_* with the GIL held.  The pops
 * run on the recorder thread, without it (torch_ring.h).
 */
#ifndef TORCH_HOOKS_H
#define TORCH_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "watch.h"

#define TORCH_DEPTH_MAX 256	    /* nested module calls tracked */
#define TORCH_BWD_MAX 8192	    /* backward slots per step */
#define TORCH_TRACE_RING (1u << 16) /* records waiting for the recorder */
#define TORCH_VAR_RING 1024
#define TORCH_VALUE_MAX 1024 /* bytes of a watched value's text */
#define TORCH_GPU_PENDING 4096	/* rows waiting for their GPU time */
#define TORCH_GPU_DEVICES 16	/* CUDA devices timed (others: CPU time) */
#define TORCH_GPU_EVENTS (2 * TORCH_GPU_PENDING + 2 * TORCH_DEPTH_MAX)

enum torch_stage { TORCH_FORWARD = 0, TORCH_BACKWARD, TORCH_STEP };

/* Which clock a row's duration is from. */
enum torch_clock { TORCH_CLOCK_CPU = 0, TORCH_CLOCK_CUDA };

struct torch_trace_rec {
	int64_t step, seq, rank;
	int32_t module; /* torch_names id */
	int32_t stage;	/* enum torch_stage */
	int32_t clock;	/* enum torch_clock: what duration is */
	double duration;     /* seconds: the GPU's where measured, else CPU's */
	double cpu_duration; /* seconds: the CPU's, always */
	double offset;	     /* seconds */
	double start;	     /* the stage's start, torch_hooks_now() */
	double mem[4]; /* MB: allocated, max_allocated, cached, max_cached */
	int32_t tid;   /* the kernel's id of the thread that ran the stage */
};

struct torch_var_rec {
	int64_t step;
	double at; /* when it was read, torch_hooks_now() */
	int is_num;
	double num;
	char func[WATCH_FUNC_MAX];
	char name[WATCH_NAME_MAX];
	char value[TORCH_VALUE_MAX];
};

struct torch_opts {
	int64_t step_rate; /* 0: auto (torch_rate.h) */
	int64_t module_rate;
	int backward;
	int repr_max;
	struct watch_list watch;
};

struct torch_hooks_info {
	int installed;
	int64_t step;	       /* the step running now */
	int traced;	       /* is it traced */
	int64_t rate;	       /* one step in rate is traced now */
	int rate_auto;	       /* rate chosen by step_rate=auto */
	int modules;	       /* modules named so far */
	const char *step_hook; /* how steps are detected */
	uint64_t dropped;      /* records lost to a full ring */
	uint64_t gpu_lost;     /* GPU-timed rows written with the CPU's time */
};

/* Makes the rings.  On the agent thread, before any GIL thread or
 * recorder runs; idempotent (a forked child's new agent keeps the rings
 * the hooks it inherited write to).  0 or -ENOMEM. */
int torch_hooks_init(void);

/* Is torch imported far enough to hook (GIL)?  0 yes, -EAGAIN not yet
 * (not imported, or being imported). */
int torch_hooks_ready(void);

/* Installs the hooks with o (or updates o when installed).  GIL.
 * Returns 0, or a negative errno with err (nothing is left installed). */
int torch_hooks_install(const struct torch_opts *o, char *err, size_t errlen);

/* Removes every hook and drops the module cache.  GIL.  Idempotent. */
void torch_hooks_remove(void);

/* What the hooks do now, from values they publish as they go: any
 * thread, no GIL (a snapshot that may be a step behind). */
void torch_hooks_info(struct torch_hooks_info *out);

/* The monotonic clock in seconds (records' start and at). */
double torch_hooks_now(void);

/* Recorder thread: the next record, 0 or -EAGAIN. */
int torch_hooks_pop_trace(struct torch_trace_rec *rec);
int torch_hooks_pop_var(struct torch_var_rec *rec);

#endif
