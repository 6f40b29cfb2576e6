/*
 * torch_step: step detection and the start of each step.
 *
 * A step is one optimizer step: rows of step s are what ran after the
 * s-th optimizer step (counting from 0 when tracing is first turned on)
 * up to and including the next one.  Steps are detected with
 * torch.optim.optimizer.register_optimizer_step_pre/post_hook where torch
 * has them (2.x); on torch 1.x, whose optimizers call
 * self._optimizer_step_code() after every step (a hook point left for the
 * profiler), Optimizer._optimizer_step_code is replaced by ours and put
 * back on removal.  The end of a traced step emits its optimizer row and
 * records the watched variables (torch_vars.h).
 *
 * Threads: the GIL held (torch_intern.h).
 */
#ifndef TORCH_STEP_H
#define TORCH_STEP_H

#include <stddef.h>

/* Makes our callables, once (never freed).  0 or -ENOMEM. */
int torch_step_init(void);

/* Starts step torch_st.step at time t: decides whether it is traced
 * (step % step_rate == 0), turns the forward hooks on or off to match,
 * publishes it. */
void torch_step_begin(double t);

/* Hooks the optimizer step.  0, or -ENOTSUP / -EIO with err (nothing
 * left hooked). */
int torch_step_install(char *err, size_t errlen);

/* Unhooks the optimizer step.  Idempotent. */
void torch_step_remove(void);

#endif
