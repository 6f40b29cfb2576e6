/*
 * torch_forward: the global module forward hooks, C callables registered
 * through torch.nn.modules.module.register_module_forward_pre_hook and
 * register_module_forward_hook only while a traced step runs (an untraced
 * step pays nothing per module), and removed through their handles.
 *
 * The pre-hook pushes a frame for the module call (named through
 * torch_names.h) and decides whether it is traced: in the k-th traced
 * step, a module of index i when (i + k) % module_rate == 0.  The hook
 * after it pops the frame (and those of calls of the same thread that
 * raised), emits the forward row of a traced call and, with backward
 * tracing on, arms the backward hooks of that call (torch_backward.h).
 *
 * Threads: the GIL held (torch_intern.h).
 */
#ifndef TORCH_FORWARD_H
#define TORCH_FORWARD_H

/* Makes our callables, once (they are never freed).  0 or -ENOMEM. */
int torch_forward_init(void);

/* Finds torch's global hook registrations.  0, or -ENOTSUP when this
 * torch has none (nothing kept). */
int torch_forward_install(void);

/* Registers (on) or removes (0) the forward hooks; a registration that
 * fails leaves them off.  Returns whether they are on. */
int torch_forward_enable(int on);

/* Removes the hooks, forgets the call stack and torch's registrations.
 * Idempotent. */
void torch_forward_remove(void);

#endif
