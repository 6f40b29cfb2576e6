/*
 * comm_wrap: the torch.distributed functions, wrapped so that every call
 * is recorded in a comm_log (comm_log.h).
 *
 * Installing replaces the collectives and point-to-point functions in the
 * module torch.distributed (all_reduce, broadcast, all_gather, barrier,
 * send, irecv, broadcast_object_list, ... : comm_wrap_op_name lists them)
 * by C callables that record the call and call the original, so that code
 * calling `dist.all_reduce(...)` (and torch's own code that calls through
 * the package, such as the DDP communication hooks) is recorded.  A
 * wrapper is as close to the original as a wrapper gets: no Python frame
 * of its own, the same arguments, result and exception, `==` and hash of
 * the original (torch.distributed.P2POp checks its op that way),
 * `__name__`, `__doc__`, `__wrapped__` and the other attributes read from
 * the original.  Code that took the function before the install (`from
 * torch.distributed import all_reduce` ran earlier) keeps the original
 * and is not recorded.
 *
 * Per call: the group (None: the default group) is named by
 * torch.distributed's group names ("0" the default, then "1", ...) and
 * gets the next sequence number of that group; the tensor this rank
 * contributes gives shape, dtype and bytes (a list of tensors: their
 * count and first shape, bytes summed).  A synchronous call's record ends
 * when it returns or raises; an asynchronous one (async_op=True,
 * isend/irecv) when the future of its Work completes (a callback on the
 * future), or at once, unobserved, when the Work has no future.
 *
 * torch 2.x's functional collectives (torch.distributed.
 * _functional_collectives: all_reduce, all_gather_tensor, ...; what
 * DTensor, FSDP2 and tensor parallelism call) are wrapped too once their
 * module is imported, named "funcol.all_reduce", ...: such a call returns
 * at once, and its record ends at the first wait for its result (the
 * module's wait_tensor, which an AsyncCollectiveTensor's first use
 * calls).  Calls with FakeTensors or other tensor subclasses (tracing)
 * are not recorded, nor a functional call made by another.
 *
 * DistributedDataParallel reduces its gradients in C++, past the Python
 * API: comm_ddp.h records those.
 *
 * Threads: with the GIL held.
 */
#ifndef COMM_WRAP_H
#define COMM_WRAP_H

#include "cpython/pycompat.h"
#include <stddef.h>
#include <stdint.h>

struct comm_log;

/* Wraps the functions of torch.distributed, recording into log.  0;
 * -EAGAIN when torch.distributed is not imported (yet); another negative
 * error with err. */
int comm_wrap_install(struct comm_log *log, char *err, size_t errlen);

/* 1 while the functional collectives could still come (torch 2.x, their
 * module not imported yet): comm_wrap_install again later wraps them. */
int comm_wrap_funcol_waiting(void);

/* Puts the original functions back (where the wrapper is still in
 * place).  Wrappers held elsewhere go on calling their original and
 * record nothing. */
void comm_wrap_remove(void);

/* Functions wrapped now (0 when not installed). */
int comm_wrap_count(void);

/* The name of op index op ("all_reduce"), "?" out of range.  Any thread. */
const char *comm_wrap_op_name(int op);

/* torch's number of the last call started on each of the process
 * groups named names[0..n) (torch.distributed's group names), from
 * Python or from C++ (DDP's broadcasts, compiled graphs' collectives),
 * into last[]: what ProcessGroup._get_sequence_number_for_group() says,
 * comparable with a record's pg_seq; 0 where torch says nothing (no such
 * group, a backend without numbers, not installed).  GIL held. */
void comm_wrap_torch_last(const char *const *names, size_t n, int64_t *last);

/* dist.all_reduce(tensor, group=pg, async_op=True), recorded: its Work
 * (NULL with an exception set).  The record's end is the caller's to say
 * (comm_wrap_end), with *id, when the Work's future completes: DDP's hook
 * learns it from the callback it has on that future anyway (a second one,
 * in the backend's thread, costs a GIL hand-over a step).  *id is 0 when
 * nothing was recorded.  GIL held. */
PyObject *comm_wrap_all_reduce_async(PyObject *tensor, PyObject *pg,
				     uint64_t *id);

/* Ends record id (0: nothing), done, or failed with the exception being
 * raised (ok 0), which stays set.  GIL held. */
void comm_wrap_end(uint64_t id, int ok);

/* The global rank seen by the last recorded call (-1 none yet). */
int comm_wrap_rank(void);

#endif
