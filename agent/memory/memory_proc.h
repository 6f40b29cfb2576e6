/*
 * memory_proc: the process's memory figures from /proc/self/status.
 *
 *   rss     VmRSS             resident set
 *   vms     VmSize            virtual size
 *   shared  RssFile+RssShmem  resident pages shared with other processes
 *                             (file mappings, shared memory)
 *   peak    VmHWM             the highest the resident set has been
 *   swap    VmSwap            swapped out
 *
 * All in MB (2^20 bytes).  A figure the kernel does not give reads 0.
 * Parsing is pure; reading is one open/read/close.  Any thread, no GIL,
 * async-signal-unsafe.
 */
#ifndef MEMORY_PROC_H
#define MEMORY_PROC_H

#include <stddef.h>

#define MEMORY_STATUS_MAX 8192 /* bytes of /proc/self/status read */

struct memory_proc {
	double rss, vms, shared, peak, swap; /* MB */
	long threads;
};

/* Parses the text of a status file (NUL-terminated).  0, or -EINVAL when
 * it has no VmRSS line (not a status file of a process with memory). */
int memory_proc_parse(const char *status, struct memory_proc *out);

/* Reads /proc/self/status.  0 or -errno. */
int memory_proc_read(struct memory_proc *out);

#endif
