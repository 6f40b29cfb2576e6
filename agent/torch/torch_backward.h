/*
 * torch_backward: timing the backward pass through autograd hooks.
 *
 * On a traced module's forward, prehooks go on the autograd nodes of its
 * output (the gradient reached the module: start) and of its inputs (the
 * gradient left it: end; for inputs needing no gradient, the end of the
 * backward pass, through the engine's queue_callback).  They live on that
 * step's graph and do nothing once their step is over (the step's
 * generation changed, torch_step.h) or tracing is off; they go with the graph.
 *
 * Registering a hook on a node makes torch call the Python function
 * torch.autograd.Function._register_hook each time, most of the cost of
 * timing the backward pass; while installed, torch_backward_install()
 * replaces it by a C function that adds our hooks to the node's dict
 * directly, merging those of one node into one.
 *
 * Threads: the GIL held (torch_intern.h).
 */
#ifndef TORCH_BACKWARD_H
#define TORCH_BACKWARD_H

#include <stdint.h>
#include <sys/types.h>

struct _object;

/* Makes our callables and types, once (never freed).  0 or -ENOMEM. */
int torch_backward_init(void);

/* Arms the backward timing of the traced call of module `name` that took
 * the n positional inputs in and gave output.  Hooks on one autograd node
 * within one outermost module call are merged into one (the nodes and
 * their hooks are kept until torch_backward_forget()). */
void torch_backward_attach(int32_t name, struct _object *const *in,
			   ssize_t n, struct _object *output);

/* Lets go of the nodes kept by torch_backward_attach (the outermost module
 * call returned, a step begins, tracing goes off). */
void torch_backward_forget(void);

/* A new step: the previous step's slots are forgotten. */
void torch_backward_step_begin(void);

/* Installs the fast registration (without it, hooks are registered the
 * slow way: nothing fails). */
void torch_backward_install(void);

/* Puts the original registration back, forgets the slots.
 * Idempotent. */
void torch_backward_remove(void);

#endif
