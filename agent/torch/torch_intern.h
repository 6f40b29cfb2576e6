/*
 * torch_intern: how the files of the torch hooks reach each other
 * (private to torch_hooks.c, torch_forward.c, torch_backward.c,
 * torch_step.c and torch_vars.c).  Each owns its state; this header has
 * only functions:
 *
 *   torch_hooks.c     the installation: the options, torch's objects the
 *                     others borrow (Tensor, the autograd engine, CUDA's
 *                     memory figures), the rings and the records.
 *   torch_step.c      the step timeline: which step runs, whether it is
 *                     traced, its start, the order of its rows, when its
 *                     last traced call ended (torch_step.h).
 *   torch_forward.c   the module call stack and the Module.__call__ wrapper.
 *   torch_backward.c  the backward slots of the step and their hooks.
 *
 * Everything is guarded by the GIL: the hooks run with it, and so do
 * install and remove (on a GIL thread).  The per-call work is a cache
 * lookup, a clock read and, for traced modules, a fixed-size record
 * pushed into a ring; nothing allocates on an untraced call.
 *
 * Which calls are traced (the sampling decisions, torch_hooks.h): step s
 * when s % rate == 0 (torch_step_begin(); rate: step_rate, or auto's,
 * torch_rate.h), and in the k-th traced
 * step a module of index i when (i + k) % module_rate == 0 (the forward
 * pre-hook).
 */
#ifndef TORCH_INTERN_H
#define TORCH_INTERN_H

#include "cpython/pycompat.h"
#include <stdint.h>

#include "python/pymods.h"
#include "torch_hooks.h"

/* Are the hooks installed (the others do nothing when not)? */
int torch_hooks_installed(void);

/* The options of the installation. */
const struct torch_opts *torch_hooks_opts(void);

/* torch.Tensor, and torch's autograd engine (borrowed; NULL when not
 * installed or, for the engine, when this torch has none). */
PyTypeObject *torch_hooks_tensor_type(void);
PyObject *torch_hooks_engine(void);

/* A traced step begins: from now on its rows carry CUDA's memory figures
 * when CUDA has been initialised (asked until it has). */
void torch_hooks_cuda_check(void);

/* Pushes a trace record of the running step (with the CUDA memory figures
 * when CUDA is initialised) for the recorder; dropped when the ring is
 * full. */
void torch_hooks_emit(int stage, int64_t seq, int32_t name, double start,
		      double end);

/* The GPU side of a traced call (torch_hooks.h, GPU time): its start
 * event (owned; NULL when the call is not timed on the GPU) and the CUDA
 * device its work goes to (-1: none, CPU). */
struct torch_gpu_mark {
	PyObject *start;
	int dev;
};

/* A traced call of module with the n positional inputs in begins: when
 * its work goes to CUDA, records a start event on the device's current
 * stream into *m (else m->start is NULL).  Never raises. */
void torch_hooks_gpu_begin(PyObject *module, PyObject *const *in,
			   Py_ssize_t n, struct torch_gpu_mark *m);

/* The call of m ends without a row: its event goes back to the pool.
 * Idempotent. */
void torch_hooks_gpu_forget(struct torch_gpu_mark *m);

/* Like torch_hooks_emit, for a call begun with torch_hooks_gpu_begin:
 * records the end event and leaves the row pending until the GPU has run
 * the call (then its duration is the GPU's); takes m's event. */
void torch_hooks_emit_call(int stage, int64_t seq, int32_t name,
			   double start, double end, struct torch_gpu_mark *m);

/* Moves at most max pending rows whose GPU work has completed into the
 * ring, oldest first (never waits).  Keeps any exception that is set. */
void torch_hooks_gpu_poll(int max);

/* Is o a tensor of torch's compile-time machinery (a FakeTensor or
 * FunctionalTensor: dynamo or AOTAutograd running a module to trace it,
 * nothing real to time)? */
int torch_hooks_compile_time(PyObject *o);

/* Pushes a watched variable's record for the recorder. */
void torch_hooks_emit_var(const struct torch_var_rec *r);

/* Publishes the step, whether it is traced and the rate of traced steps
 * for torch_hooks_info(). */
void torch_hooks_publish_step(int64_t step, int traced, int64_t rate);

#endif
