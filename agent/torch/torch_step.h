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
 * records the watched variables (torch_vars.h), and, with step_rate=auto,
 * sets the rate from the step's rows and length (torch_rate.h; not for
 * the step tracing began in the middle of, nor across a removal).
 *
 * Threads: the GIL held (torch_intern.h).
 */
#ifndef TORCH_STEP_H
#define TORCH_STEP_H

#include <stddef.h>
#include <stdint.h>

/* Makes our callables, once (never freed).  0 or -ENOMEM. */
int torch_step_init(void);

/* Starts the current step at time t: decides whether it is traced
 * (step % rate == 0, rate: step_rate, or auto's), turns the timing of
 * module calls on or off to match, forgets the previous step's backward
 * slots, publishes it.
 * Returns whether it could: a traced step whose module calls cannot be
 * timed (Module.__call__ not wrapped) gives 0. */
int torch_step_begin(double t);

/* step_rate changed: the current step is traced, or not, again. */
void torch_step_rate_changed(void);

/* Hooks the optimizer step.  0, or -ENOTSUP / -EIO with err (nothing
 * left hooked). */
int torch_step_install(char *err, size_t errlen);

/* Unhooks the optimizer step; the current step is traced no more and
 * its generation ends.  Idempotent. */
void torch_step_remove(void);

/* How steps are detected ("register_optimizer_step_post_hook",
 * "Optimizer._optimizer_step_code" or "none"). */
const char *torch_step_hook(void);

/* The current step: its number (counting from 0 at the first install),
 * whether it is traced and which traced step it is (k), its generation
 * (changes at every step and removal: hooks of an older one do
 * nothing), and when it started. */
int64_t torch_step_number(void);
int torch_step_traced(void);
int64_t torch_step_k(void);
uint32_t torch_step_gen(void);
double torch_step_t0(void);

/* The next row's place in the step's order. */
int64_t torch_step_seq(void);

/* A traced call of the step ended at t (the optimizer's row starts at the
 * last one); torch_step_backward_ended: the backward pass did. */
void torch_step_ended(double t);
void torch_step_backward_ended(double t);

#endif
