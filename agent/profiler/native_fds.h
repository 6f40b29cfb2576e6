/*
 * native_fds: libunwind's descriptors, kept out of the program's way.
 *
 * libunwind checks that memory is readable before it reads it by write()ing
 * a byte of it to a pipe of its own (1.6 makes the pipe when it starts, 1.8
 * on its first check; Debian builds it with conservative checks, so every
 * step of a local unwind checks).  The pipe is kept for the life of the
 * process at the lowest free numbers: the program's numbers.  It loses two
 * of its RLIMIT_NOFILE; and once it closes them (os.closerange(3, N) when
 * it daemonizes) and opens files of its own there, libunwind's next check
 * reads a byte of one of the program's files and writes a byte of our
 * memory into another, or closes both.
 *
 * native_fds_guard() points libunwind's own calls to pipe2, read, close and
 * syscall (its write) at ours, in its global offset table, before libunwind
 * first runs:
 *   - pipe2 makes the pipe and moves both ends up (fdown_take_high:
 *     FDOWN_MIN or above, close-on-exec), remembering the identity of each
 *     end; when the limit leaves no room up there it fails instead, and
 *     libunwind's check with it: native stacks end at the first frame
 *     that needed a check, the program keeps its numbers;
 *   - read, write and close of a number that no longer holds that end (the
 *     program closed it and took the number) fail with EBADF, touching
 *     nothing of the program's; libunwind answers by making a new pipe;
 *   - every other call passes through unchanged (libunwind's reads of
 *     /proc and of ELF files, the program's own use of libunwind).
 *
 * Only libunwind's calls are redirected: the program's and the agent's own
 * calls of these functions go to the C library as before.
 *
 * Threads: native_fds_guard() from any thread, once is enough (later calls
 * return the first result).  The redirected calls are async-signal-safe
 * (system calls only, no locks): libunwind makes them in our signal
 * handler.
 */
#ifndef NATIVE_FDS_H
#define NATIVE_FDS_H

#include <stddef.h>

/*
 * Redirects the loaded libunwind's calls as above.  Returns 0, or -errno
 * with the reason in err: libunwind is not found in the process, or its
 * table cannot be read or changed.  Native stacks must not be taken then
 * (libunwind would take the program's numbers): the callers refuse.  Must
 * run before the agent's first libunwind call.
 */
int native_fds_guard(char *err, size_t errlen);

#endif
