/*
 * remote_exec: load a shared library into a running CPython 3.14+ through
 * the interpreter's own remote debugging support (PEP 768) — the way
 * sys.remote_exec() hands a script to a process — so that no thread is
 * stopped.  `probing -t PID inject` goes this way where it can, and the
 * ptrace way (inject.h) where it cannot (docs/injection.md).
 *
 * The sequence:
 *   1. Checks, touching nothing: the process runs (not stopped by job
 *      control) and is a CPython this install has an agent for
 *      (inject_layout_python: initialised, not finalising), of 3.14 or
 *      later with a layout here (remote_layout.h).  _PyRuntime is found in
 *      its ELF symbols and its _Py_DebugOffsets read through
 *      /proc/PID/mem: the cookie must be "xdebugpy", the version the one
 *      found from Py_Version, and every offset used must lie inside the
 *      structure it is an offset into.  The main interpreter (id 0) is
 *      found in the list of interpreters, and its config.remote_debug
 *      must be 1: 0 is remote debugging turned off (the environment's
 *      PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug, a build
 *      --without-remote-debug, an embedder's PyConfig; err says which it
 *      sees).  Its main thread state must name a thread of the process.
 *   2. Two files in the target's /tmp, written through /proc/PID/root:
 *      the loader, a few lines of Python that load the library as the
 *      extension module it also is (probing._probing, through _imp: no
 *      file read, so the GIL is held throughout), or, when a
 *      libprobing*.so is mapped already — a forked child's — open that
 *      one with ctypes and call its restart function (layout.h); and the
 *      report, into which the loader writes what happened.
 *   3. The request, as CPython's own sys.remote_exec makes it, to the
 *      main thread: the loader's path into its
 *      PyThreadState.remote_debugger_support.debugger_script_path, then
 *      debugger_pending_call = 1, then the eval breaker's
 *      _PY_EVAL_PLEASE_STOP_BIT.  The thread runs the loader at its next
 *      eval-breaker check (a loop's back edge, a call's return), holding
 *      the GIL, and clears debugger_pending_call as it takes the request:
 *      that is how we see it taken.  A request pending already (another
 *      debugger's) is not overwritten: -EBUSY.
 *      Only the main thread is asked: its thread state lives as long as
 *      the interpreter, while another thread's is freed when that thread
 *      ends, and a write that raced its end would land in freed memory.
 *   4. When the main thread has not taken the request within
 *      opts->safe_point_ms (it waits in C: a blocking read, a join, a
 *      long call into a C library), the request is withdrawn
 *      (debugger_pending_call = 0) and -EBUSY returned, err saying where
 *      the thread waits (/proc state and wchan).  Nothing was loaded and
 *      the thread will not run the loader later: the caller may go the
 *      ptrace way.  (Should the thread take the request in the very
 *      moment it is withdrawn, the report still arrives within
 *      INJECT_REMOTE_GRACE_MS and the load counts.)
 *   5. Once taken, the report is awaited (up to opts->timeout_ms from the
 *      start): loaded, restarted, or the Python exception's text.  Both
 *      files are removed before returning (also on failure).
 *
 * What stays in the target: the library, and probing._probing in
 * sys.modules (ctypes too, after a restart); after a withdrawn request, the
 * eval breaker bit (the thread's next check handles it as a no-op).  The loader
 * runs in the main thread, with the GIL: every Python thread waits for the
 * length of its run (res->run_ms: mostly the dlopen); none is stopped.
 *
 * One race, CPython's own: the eval breaker is a word the target changes
 * with atomic operations; our write of its low byte (the event bits) is
 * no atomic operation for it.  An event bit the target sets between our
 * read and our write (a few microseconds) is lost: a GIL drop request is
 * made again within the switch interval (5 ms); a pending signal's
 * handler runs at the next check for signals instead.
 *
 * Hostile targets: every address read comes from the target and is
 * checked (non-null, aligned, below 2^63); every read is of a fixed, small
 * size and must come back whole; lists are walked at most
 * INJECT_REMOTE_*_MAX steps.  The report is read with a cap.
 *
 * Threads: call from one thread; blocks up to opts->timeout_ms.
 */
#ifndef INJECT_REMOTE_EXEC_H
#define INJECT_REMOTE_EXEC_H

#include <limits.h>
#include <signal.h>
#include <sys/types.h>

#define INJECT_REMOTE_SAFE_POINT_DEFAULT 2000 /* ms for a safe point */
#define INJECT_REMOTE_GRACE_MS 100	      /* after a withdrawal */
#define INJECT_REMOTE_INTERPS_MAX 256	      /* interpreters walked */
#define INJECT_REMOTE_REPORT_MAX 4096	      /* bytes of the report */

struct inject_remote_opts {
	int timeout_ms;	   /* the whole; 0: INJECT_TIMEOUT_DEFAULT */
	int safe_point_ms; /* for the main thread to take the request
			    * (at most the whole);
			    * 0: INJECT_REMOTE_SAFE_POINT_DEFAULT */
	/* Set (by a signal handler) to stop waiting: a request not taken
	 * yet is withdrawn, the files are removed, and the call returns
	 * -EINTR.  NULL: never. */
	const volatile sig_atomic_t *stop;
};

struct inject_remote_result {
	unsigned version;	    /* major << 8 | minor */
	pid_t tid;		    /* the thread asked: the main one */
	int restarted;		    /* an agent mapped already was restarted */
	char target_path[PATH_MAX]; /* what the loader loaded */
	char note[512];		    /* mount namespace note, or "" */
	double taken_ms; /* from the request to the thread taking it */
	double run_ms;	 /* the loader's own run, GIL held */
	double total_ms;
};

/*
 * Loads the shared library at path (made absolute here) into process pid
 * through PEP 768, as above.  Fills *res (also partly on failure).
 * Returns 0, or with a sentence in err:
 *   -ENOSYS     no PEP 768 here: CPython before 3.14, or a version this
 *               install has no layout for (nothing touched)
 *   -ENOTSUP    remote debugging is off in the target (nothing touched)
 *   -EBUSY      the main thread reached no safe point in
 *               opts->safe_point_ms (the request was withdrawn, nothing
 *               was loaded), or another debugger's request is pending
 *   -ENOPKG     the loader ran but could not import ctypes (to restart a
 *               mapped agent): nothing was done
 *   -ELIBBAD    the loader ran and the load failed (the exception's text),
 *               or the agent mapped already did not start again
 *   -EALREADY   the library is mapped already, without the restart
 *               function
 *   -ETIMEDOUT  the thread took the request, but no report came in time
 *               (an audit hook may have refused it: see its stderr)
 *   -ESRCH, -EPERM (not allowed to read or write its memory: err says
 *   why), -ENOEXEC, -EAGAIN, -ENOENT as inject_library; other -errno.
 */
int inject_remote_library(pid_t pid, const char *path,
			  const struct inject_remote_opts *opts,
			  struct inject_remote_result *res, char *err,
			  size_t errlen);

#endif
