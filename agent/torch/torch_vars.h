/*
 * torch_vars: the watched variables (torch_opts.watch), recorded at the
 * end of each traced step from the innermost frame of their function on
 * the stepping thread's stack (at most TORCH_VARS_DEPTH frames searched).
 * A number (or a one-element tensor) is kept as a number, anything else
 * as its repr, cut at repr_max bytes (TORCH_VALUE_MAX at most).
 *
 * Threads: the GIL held (torch_intern.h).
 */
#ifndef TORCH_VARS_H
#define TORCH_VARS_H

#define TORCH_VARS_DEPTH 256 /* frames searched for watched functions */

/* Records each watched variable found for the recorder.  Keeps any
 * exception that is set. */
void torch_vars_record(void);

#endif
