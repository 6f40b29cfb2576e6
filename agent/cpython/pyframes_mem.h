/*
 * pyframes_mem: copies of our own memory that never fault.  Private to the
 * pyframes module (pyframes*.c); no Python here.
 *
 * Every read of interpreter memory goes through these: process_vm_readv
 * on our own pid, or, when that system call is refused (seccomp: ENOSYS,
 * EPERM), a pipe whose write() fails with EFAULT on memory we may not
 * read.  The fallback is learnt once and kept (pyframes_force_pipe()
 * forces it for tests).  The pid is cached and forgotten in a forked
 * child, where process_vm_readv on the parent's pid would read the parent.
 *
 * Threads: any.  Signals: only pyframes_mem_pid_known(),
 * pyframes_mem_piped() (relaxed atomic loads) and pyframes_mem_read_raw()
 * are async-signal-safe; the other reads are not (the pipe, pthread_once,
 * a sanitizer's interceptors).
 */
#ifndef PYFRAMES_MEM_H
#define PYFRAMES_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Copies len bytes of our own memory at src into dst; 0 or -EFAULT.
 * Never faults, whatever src is. */
int pyframes_mem_read(void *dst, uintptr_t src, size_t len);

/* Reads n regions in one system call where it can: 0 when all were read,
 * else -EFAULT (what was read is in place; the caller decides).  Falls
 * back to region by region through pyframes_mem_read. */
int pyframes_mem_gather(struct iovec *local, struct iovec *remote, size_t n);

/* Our pid, learnt on first use (and again after a fork). */
pid_t pyframes_mem_pid(void);

/* Our pid as last learnt, 0 when no read has learnt it yet in this
 * process.  Async-signal-safe. */
pid_t pyframes_mem_pid_known(void);

/* process_vm_readv itself on pid (pyframes_mem_pid_known()), never the
 * pipe nor a sanitizer's interceptor: 0, or -1 when not all len bytes at
 * src (0: none) could be read.  Async-signal-safe: for signal handlers. */
int pyframes_mem_read_raw(pid_t pid, void *dst, uintptr_t src, size_t len);

/* Nonzero when reads go through the pipe (forced or learnt): too slow for
 * a signal handler.  Async-signal-safe. */
int pyframes_mem_piped(void);

#endif
