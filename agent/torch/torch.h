/*
 * torch: PyTorch module tracing (python.torch_trace) and watched
 * variables (python.variables), switched by the torch.* settings.
 *
 * Off until asked: torch.profiling=on (PROBING_TORCH_PROFILING=on,
 * `probing config torch.profiling=on`, `probing perf --torch`).  Turning
 * it on installs the hooks of torch_hooks.h once torch is imported (it
 * may be asked before: the process's `import torch` is then awaited);
 * turning it off removes every hook again.  The hooks hand records to the
 * recorder thread through rings; torch_tick() writes them into the store.
 *
 *   python.torch_trace(step, seq, module, stage, duration, cpu_duration,
 *                      clock, allocated, max_allocated, cached,
 *                      max_cached, time_offset, rank)
 *   python.variables(step, func, name, value)
 *
 * Times in seconds: duration is the GPU's where clock is 'cuda' (a
 * module call whose work went to CUDA, timed with CUDA events:
 * torch_hooks.h), else the CPU's ('cpu'); cpu_duration is always the
 * CPU's; time_offset, on the CPU's clock, from the start of the step (the
 * end of the previous optimizer step, or when tracing began) to the start
 * of the stage.  Memory in MB from torch's CUDA allocator (of the device
 * the module's work went to, else the current one) when CUDA is
 * initialised in the process, else 0 (the CPU allocator keeps no
 * statistics; process.memory has the process's figures).
 *
 * The setting torch.status (read-only) says what tracing does now.
 *
 * Threads: torch_init on the agent thread at start-up (before the GIL
 * threads); torch_tick on the recorder thread (memory.h), which it may
 * block for a bounded time waiting for the GIL.
 */
#ifndef TORCH_H
#define TORCH_H

#include <stddef.h>

struct store;

/* Creates the tables and listens to the torch.* settings.  0, or a
 * negative error with err. */
int torch_init(struct store *st, char *err, size_t errlen);

/* Applies settings that changed (installs or removes the hooks, with the
 * GIL), and writes waiting records into the tables.  Returns the ms after
 * which it wants to run again (-1: only when a setting changes). */
int torch_tick(void);

/* Torch settings changed: set by the listener, for the recorder thread's
 * wake-up (memory.h).  Any thread. */
int torch_pending(void);

#endif
