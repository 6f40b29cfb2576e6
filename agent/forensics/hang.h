/*
 * hang: the hang watchdog, and process.hangs.
 *
 * With hang.timeout set (300s, 5m, 1500ms; 0 or off: off, the default),
 * an agent thread ("probing-hang", signals blocked) reads the main
 * thread's Python stack every hang.timeout / 10 (at least every second,
 * at most every 50 ms), without the GIL (cpython.h).  A stack is the
 * sequence of (code object, line) of its frames: when it has not changed
 * for hang.timeout, the main thread is stuck (a lock, a C call that does
 * not return, a loop on one line), and the watchdog records, once per
 * hang:
 *   - every Python thread's Python stack (pystack_take_nogil) and, with
 *     hang.native on (the default), its native stack (hang_native.h: one
 *     signal per thread);
 *   - a report file, crash_report.h's format with kind "hang", in
 *     crash.path (probing-hang-<pid>-<time>.txt), and a warning on
 *     stderr naming it;
 *   - a row of process.hangs (the report's text included).
 * When the stack changes again the hang is over: the row gets its
 * `resumed` time and duration, the report file a "resumed:" line.
 *
 * Time the watchdog itself did not run (the process stopped, SIGSTOP or
 * a debugger; the machine suspended) does not count: a gap between two
 * looks longer than twice the period counts as twice the period.  A main
 * thread paused by the debugger is not hung.
 *
 *   process.hangs(id, started, detected, resumed, seconds, thread_id,
 *                 native_id, func, file, lineno, path, report)
 *
 * started/detected/resumed in Unix seconds (resumed NULL while stuck);
 * seconds: how long it was stuck (so far); func/file/lineno: where (the
 * innermost frame, NULL when the thread had no Python frame); path: the
 * report file (NULL when it could not be written); report: its text.  At
 * most hang.max_rows rows (oldest go first).
 *
 * Threads: hang_start/hang_stop on the agent thread (or at exit); the
 * watchdog thread owns the rest.
 */
#ifndef HANG_H
#define HANG_H

#include <stddef.h>
#include <stdint.h>

struct store;

#define HANG_FRAMES_MAX 128	   /* frames compared and reported per thread */
#define HANG_REPORT_MAX (1u << 20) /* bytes of one report kept */

/* Creates process.hangs, registers for hang.* settings and applies them.
 * 0 or a negative error with err. */
int hang_start(struct store *st, char *err, size_t errlen);

/* Stops the watchdog: joins it for at most a second.  Idempotent. */
void hang_stop(void);

/* In a forked child: the thread does not exist there. */
void hang_atfork_child(void);

/*
 * hang.timeout's value: "off", "0", or a positive number with a unit
 * (ms, s, m, h; none means s).  *ms is 0 for off.  Returns 0 or -EINVAL.
 */
int hang_timeout_parse(const char *text, int64_t *ms);

/* The config check of hang.timeout (config.c): canonical text into
 * canon ("off", "300s", "1500ms"), or -EINVAL with err. */
int hang_timeout_canon(const char *text, char *canon, size_t canonlen,
		       char *err, size_t errlen);

#endif
