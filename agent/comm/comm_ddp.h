/*
 * comm_ddp: DistributedDataParallel's gradient all-reduces, recorded.
 *
 * DDP reduces its gradient buckets in C++ (its Reducer calls the process
 * group directly), past torch.distributed's Python functions.  What DDP
 * offers to see them is its communication hook: a hook gets each bucket
 * and returns the future of its reduction.  So a DDP model made while
 * recording is on (DistributedDataParallel.__init__ is wrapped) gets
 * Probing's hook, which does what PyTorch's
 * ddp_comm_hooks.default_hooks.allreduce_hook does — divide the bucket by
 * the group's size, all_reduce it asynchronously through
 * torch.distributed.all_reduce (recorded, comm_wrap.h), return its future.
 * A hook the program registers later (register_comm_hook,
 * _register_builtin_comm_hook) takes its place: Probing's hook then calls
 * it for every bucket (DDP takes one hook per model, once), so the
 * program's own hook runs as it would have.
 *
 * What differs from DDP without a hook: the division happens in the hook
 * (as PyTorch's documented equivalent does) rather than while DDP copies
 * gradients into the bucket, which may change the last bit of averaged
 * gradients when the world size is not a power of two.  comm.ddp=off
 * leaves DDP alone (its all-reduces are then not recorded).
 *
 * Nothing is added to the model (Probing keeps its hooks in a
 * WeakKeyDictionary of its own: a model stays picklable as it was).
 * The install is made as the program's `import torch` ends (pyafter.h:
 * the model on the next line is recorded), or at the recorder's next look
 * when it started later.
 * Models made before the install are left alone; removing the install
 * puts __init__ and the registration methods back, and hooks already in
 * models go on reducing exactly the same way (recording nothing).
 *
 * Threads: with the GIL held.
 */
#ifndef COMM_DDP_H
#define COMM_DDP_H

#include <stddef.h>

/* Wraps DistributedDataParallel's __init__ and hook registration.  0;
 * -EAGAIN when torch.nn.parallel.distributed is not imported (yet);
 * another negative error with err. */
int comm_ddp_install(char *err, size_t errlen);

/* Puts DistributedDataParallel's methods back. */
void comm_ddp_remove(void);

/* Models given Probing's hook so far (any thread). */
int comm_ddp_count(void);

#endif
