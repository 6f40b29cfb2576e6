/*
 * hang_native: another thread's native stack, once in a while, for the
 * hang watchdog.
 *
 * The profiler's native capture (native.h) belongs to the sampler: one
 * consumer, started and stopped with it.  A hang report needs every
 * thread's stack once, at a moment the profiler may or may not be
 * running, so it has its own request slot, on the same signal
 * (HANG_NATIVE_SIGNAL is NATIVE_SIGNAL, SIGURG: its default action is to
 * ignore, so a signal of ours still pending when nobody handles it any
 * more, or on a thread that calls execve(), is harmless; Python programs
 * do not use it) and the same handler: native.c's, installed by the
 * first hang_native_capture() or sampler start, which stays and gives
 * every signal that is not a sampler request to our serve function
 * (native_signal_install).
 *
 * It serves only a request of ours (SI_QUEUE from our pid, tagged with
 * our slot, addressed to this thread, claimed with one compare-and-swap):
 * it unwinds its interrupted context with libunwind (unw_init_local2,
 * unw_step; no malloc, no locks), stores the instruction pointers in the
 * slot, wakes the caller (futex) and returns, never waiting.  Any other
 * SIGURG goes on to the action found before the agent's.
 *
 * The program's action comes first: when it has replaced the agent's
 * handler, nothing is sent (-EPERM).  A request not answered in time (the
 * thread blocks the signal) is withdrawn and its signal discarded
 * (native_signal_discard): none stays pending.
 *
 * A sleeping system call the signal interrupts is restarted where the
 * kernel can (SA_RESTART); sleeps, poll and select return EINTR, which
 * CPython retries (PEP 475): see native.h.  A hang report (hang.native)
 * and `backtrace --native` ask every thread, blocked or not: where a
 * thread waits is what they are for.
 *
 * Threads: any; calls wait for each other (one request at a time).
 */
#ifndef HANG_NATIVE_H
#define HANG_NATIVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "profiler/native.h"

#define HANG_NATIVE_SIGNAL NATIVE_SIGNAL
#define HANG_NATIVE_DEPTH_MAX 128
#define HANG_NATIVE_WAIT_MS 200 /* for the thread to answer */

/*
 * Captures thread tid's stack into ips (at most max; *n filled),
 * innermost first, every entry a return address (the interrupted
 * instruction is given + 1, like the rest).  Returns 0, -ETIMEDOUT (the
 * thread blocks the signal or did not run in time), -ESRCH (no such
 * thread), -EPERM (the program handles the signal itself), or -errno (the
 * handler could not be installed).
 */
int hang_native_capture(long tid, uintptr_t *ips, size_t max, size_t *n);

#endif
