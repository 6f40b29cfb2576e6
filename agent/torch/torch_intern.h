/*
 * torch_intern: what the files of the torch hooks share (private to
 * torch_hooks.c, torch_forward.c, torch_backward.c, torch_step.c and
 * torch_vars.c).
 *
 * Everything in torch_st is guarded by the GIL: the hooks run with it,
 * and so do install and remove (on a GIL thread).  The per-call work is a
 * cache lookup, a clock read and, for traced modules, a fixed-size record
 * pushed into a ring; nothing allocates on an untraced call.
 *
 * Which calls are traced (the sampling decisions, torch_hooks.h): step s
 * when s % step_rate == 0 (torch_step_begin()), and in the k-th traced
 * step a module of index i when (i + k) % module_rate == 0 (the forward
 * pre-hook).
 */
#ifndef TORCH_INTERN_H
#define TORCH_INTERN_H

#include <Python.h>
#include <stdint.h>

#include "torch_hooks.h"

enum torch_bwd_state { TORCH_BWD_ARMED = 1, TORCH_BWD_STARTED, TORCH_BWD_DONE };

/* A module call in progress.  Calls of several threads share the stack
 * (the GIL orders them); each thread sees only its own frames. */
struct torch_frame {
	PyObject *module; /* borrowed: alive while its forward runs */
	PyThreadState *ts;
	int32_t name;
	int traced;
	int64_t seq;
	double t0;
};

/* A traced module's backward in this step (torch_backward.c). */
struct torch_bwd {
	int32_t name;
	int state; /* enum torch_bwd_state */
	int64_t seq;
	double t0;
};

struct torch_state {
	int installed;
	int fwd_on; /* forward hooks registered now */
	struct torch_opts o;
	uint32_t gen; /* changes at every step and (un)install */

	/* torch's functions and types, owned while installed */
	PyObject *reg_pre, *reg_post, *pre_handle, *post_handle;
	PyTypeObject *tensor_type;
	PyObject *engine;
	PyObject *cuda_is_init, *cuda_stats, *cuda_device;
	PyObject *step_handle, *step_pre_handle;  /* torch 2.x */
	PyObject *optimizer_cls, *orig_step_code; /* torch 1.x */
	PyObject *function_cls, *orig_register, *odict_type;
	int register_own; /* _register_hook was Function's own attribute */
	const char *step_hook;

	int64_t rank;
	int cuda; /* CUDA initialised: memory figures per row */

	int64_t step, k; /* k: ordinal of the traced step */
	int traced;
	int64_t seq;
	double t0, last_end, bwd_end, step_pre;

	struct torch_frame stack[TORCH_DEPTH_MAX];
	int depth;
	struct torch_bwd bwd[TORCH_BWD_MAX];
	int nbwd;
	int end_queued;
};

extern struct torch_state torch_st;

/* The monotonic clock in seconds. */
double torch_hooks_now(void);

/* Pushes a trace record of the running step (with the CUDA memory figures
 * when CUDA is initialised) for the recorder; dropped when the ring is
 * full. */
void torch_hooks_emit(int stage, int64_t seq, int32_t name, double start,
		      double end);

/* Pushes a watched variable's record for the recorder. */
void torch_hooks_emit_var(const struct torch_var_rec *r);

/* Publishes torch_st.step and .traced for torch_hooks_info(). */
void torch_hooks_publish_step(void);

/* module.path.to.attr (new reference) from sys.modules without importing;
 * NULL (no exception set) when any part is missing. */
PyObject *torch_hooks_attr(const char *module, const char *path);

#endif
