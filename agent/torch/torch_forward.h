/*
 * torch_forward: timing module calls by wrapping torch.nn.Module.__call__
 * (installed while tracing is on, torch's put back on removal).  Global
 * module hooks would do it too, but they send every call of every module
 * through Module._call_impl's slow path (Python code building the hook
 * lists), which cost more than all the rest of forward tracing together;
 * wrapped, torch's __call__ keeps its fast path.  On an untraced step the
 * wrapper only passes the call on.
 *
 * A traced call pushes a frame (named through torch_names.h) and decides
 * whether it is traced: in the k-th traced step, a module of index i when
 * (i + k) % module_rate == 0.  When it returns, the frame is popped (with
 * those of calls of the same thread above it), the forward row emitted
 * and, with backward tracing on, the backward hooks of the call armed on
 * its positional inputs and its output (torch_backward.h).  When the
 * outermost call returns, torch_backward_forget().
 *
 * Threads: the GIL held (torch_intern.h).
 */
#ifndef TORCH_FORWARD_H
#define TORCH_FORWARD_H

/* Makes our type, once.  0 or -ENOMEM. */
int torch_forward_init(void);

/* Wraps Module.__call__ (not yet timing).  0, or -ENOTSUP when it is not
 * a function (nothing changed). */
int torch_forward_install(void);

/* Times module calls (on) or only passes them on (0).  Returns whether
 * calls are timed (never when not installed). */
int torch_forward_enable(int on);

/* Puts torch's Module.__call__ back (unless someone replaced ours since:
 * ours then stays in their chain, passing calls on), forgets the call
 * stack.  Idempotent. */
void torch_forward_remove(void);

#endif
