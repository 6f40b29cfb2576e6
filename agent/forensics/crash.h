/*
 * crash: the crash handler — what the process was doing when it died.
 *
 * With crash.enabled on (PROBING_CRASH=1, `probing -t PID inject --crash`,
 * `probing config crash.enabled=on`):
 *
 *  - Fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) go to a
 *    handler that writes a report (crash_report.h): every thread's Python
 *    stack, read from interpreter memory without the GIL (cpython.read, each
 *    read a process_vm_readv, so a corrupt frame gives an error, not a
 *    second fault), and the crashing thread's native stack (libunwind's
 *    local unwinder from the signal's context; crash_sym.h names the
 *    frames).  The report goes to a new file in crash.path (empty: the
 *    working directory at the time of the crash), named
 *    probing-crash-<pid>-<YYYYmmddTHHMMSSZ>.txt, and to stderr; then
 *    "probing: crash report written to PATH" on stderr.
 *
 *  - Then the process dies as it would have: the handler puts the
 *    previous disposition of the signal back (one shot, as faulthandler)
 *    and hands the signal on: a previous handler function is called with
 *    the same siginfo and context (faulthandler, a sanitizer's); SIG_DFL
 *    is re-raised, so the exit status is the signal's and a core dump is
 *    written where the limits allow; SIG_IGN returns (a real fault then
 *    faults again and the kernel ends the process).
 *
 *  - Signal safety (faulthandler's rules): no malloc, no locks, no stdio,
 *    no Python API; buffers static and bounded (CRASH_THREADS_MAX threads,
 *    CRASH_FRAMES_MAX Python frames and CRASH_NATIVE_MAX native frames per
 *    thread); all signals blocked while it runs; errno saved.  One thread
 *    writes a report: another thread that crashes meanwhile waits for it
 *    (at most CRASH_WAIT_MS) and then hands its signal on; a fault inside
 *    the handler itself ends the process by the default action.
 *
 *  - Alternate stack: the main thread gets one (CRASH_ALTSTACK bytes,
 *    mmap'd with a guard page) through a pending call, so a stack
 *    overflow there is reported.  Other threads run the handler on their
 *    own stack (sigaltstack is per thread and the agent cannot run code on
 *    threads it did not start); one that overflowed its stack dies
 *    without a report.  An alternate stack set up earlier and large
 *    enough (faulthandler's, if larger) is kept.  Whatever stack the
 *    handler finds itself on, the report is written on a stack of the
 *    agent's own (CRASH_STACK bytes, guard page below): faulthandler's,
 *    or a thread's near its end, may have only a few KiB left.
 *
 *  - Uncaught exceptions: an audit hook on "sys.excepthook" (added once,
 *    from the same pending call, with the GIL) writes a report of kind
 *    "exception" when the main thread's top level ends with an exception
 *    (not in an interactive session): the traceback of the exception as
 *    the main thread's stack, every other thread's stack, and the
 *    exception's type and message.  sys.excepthook itself is not
 *    replaced, so a program's own hook still runs, and Python prints the
 *    traceback as usual.  Only "probing: crash report written to PATH"
 *    goes to stderr.  Py_FatalError() ends in abort(): a SIGABRT report.
 *
 * crash.enabled off restores the previous handlers (unless someone
 * replaced ours since); the alternate stack and the (then idle) audit
 * hook stay.  In a forked child the handler stays installed and reports
 * under the child's pid.
 *
 * Threads: crash_start on the agent thread; the rest as stated.
 */
#ifndef CRASH_H
#define CRASH_H

#include <stddef.h>

#define CRASH_THREADS_MAX 128
#define CRASH_FRAMES_MAX 128
#define CRASH_NATIVE_MAX 128
#define CRASH_WAIT_MS 10000
#define CRASH_ALTSTACK (256 * 1024)
#define CRASH_STACK (256 * 1024) /* the report is written on a stack of
				    its own this big (see crash.c) */

/* Registers for crash.* settings and applies the current ones.  0 or
 * -errno with err. */
int crash_start(char *err, size_t errlen);

/* The config check of crash.path: empty, or a directory this process
 * may write in (kept as given; at most PATH_MAX - 64 bytes). */
int crash_path_canon(const char *text, char *canon, size_t canonlen, char *err,
		     size_t errlen);

/* Is the handler installed now? */
int crash_enabled(void);

/*
 * The name of a new report file for kind ("crash", "hang") in the
 * configured directory, opened O_CREAT|O_EXCL for writing: the fd, with
 * the path in path (pathlen bytes), or -errno.  Async-signal-safe when
 * the directory was read from the settings beforehand (it is, at every
 * settings change).
 */
int crash_report_open(const char *kind, char *path, size_t pathlen);

#endif
