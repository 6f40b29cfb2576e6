/*
 * crash_report: writes crash and hang reports, safe inside a signal
 * handler.
 *
 * The format (docs/forensics.md has the full grammar; cli/render/report.h reads
 * it) is line-oriented UTF-8 text, readable as it is and parseable line by
 * line:
 *
 *   probing-report: 1
 *   kind: crash                       (crash, exception or hang)
 *   reason: SIGSEGV (SEGV_MAPERR) at address 0x0
 *   signal: 11
 *   pid: 4242
 *   time: 2025-01-02T03:04:05.678Z    (UTC)
 *   executable: /usr/bin/python3.11
 *   cmdline: python3 app.py
 *   thread: 4242                      (kernel id of the crashed thread)
 *                                     (blank line)
 *   thread 4242 ident 0x7f0c... name "python3" crashed main
 *     python (most recent call first):
 *       File "/app.py", line 3, in crash
 *     native (most recent call first):
 *       #0 0x00007f0c12345678 memmove+0x18
 * (/usr/lib/x86_64-linux-gnu/libc.so.6+0x1a2b3c) (blank line)
 *   ...more threads...
 *   end: complete
 *
 * Header lines are "key: value"; a thread starts at "thread ", its
 * sections at two spaces, frames at four.  Control characters in names
 * are written as \xNN, a backslash as \\.  A report that lacks its "end:"
 * line was cut short (the process died while writing it).  Lines after
 * "end:" (a hang's "resumed: ...") are notes added later.
 *
 * Output goes to up to CRASH_OUT_FDS file descriptors with write(2), and
 * optionally into a caller's memory buffer (silently cut at its end),
 * through a fixed buffer: no malloc, no locks, no stdio.
 *
 * Threads: a struct crash_out is used by one thread.  Async-signal-safe.
 */
#ifndef CRASH_REPORT_H
#define CRASH_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "crash_sym.h"

#define CRASH_REPORT_VERSION 1
#define CRASH_OUT_FDS 2
#define CRASH_LINE_MAX 4096 /* bytes of one escaped string */

struct crash_out {
	int fd[CRASH_OUT_FDS];
	int nfd;
	char *mem; /* optional copy of everything written; NUL-terminated */
	size_t memcap, memlen;
	size_t len;
	char buf[2048];
};

/* An output to nothing yet. */
void crash_out_init(struct crash_out *o);
/* Adds fd (at most CRASH_OUT_FDS; more are ignored). */
void crash_out_fd(struct crash_out *o, int fd);
/* Copies everything written from now on into mem (cap bytes, the last
 * one for the NUL). */
void crash_out_mem(struct crash_out *o, char *mem, size_t cap);

void crash_out_str(struct crash_out *o, const char *s); /* as it is */
void crash_out_esc(struct crash_out *o, const char *s); /* escaped */
void crash_out_dec(struct crash_out *o, long long v);
void crash_out_hex(struct crash_out *o, uint64_t v, int width); /* 0x... */
void crash_out_flush(struct crash_out *o);

/* Formats Unix time sec.ms as "2025-01-02T03:04:05.678Z" into out
 * (at least 32 bytes). */
void crash_time_format(int64_t sec, int ms, char *out);

/* The name of a fatal signal ("SIGSEGV"), or NULL. */
const char *crash_signal_name(int sig);
/* The name of si_code for sig ("SEGV_MAPERR", "SI_USER"), or NULL. */
const char *crash_code_name(int sig, int code);

/*
 * The standard header lines, from "probing-report:" to "pid:", "time:",
 * "executable:" and "cmdline:" (the last two read from /proc/self).  kind
 * and reason are written as given (reason escaped).  Ends without the
 * blank line: the caller adds its own keys, then crash_report_body().
 */
void crash_report_head(struct crash_out *o, const char *kind,
		       const char *reason);
/* A "key: value" header line (value escaped). */
void crash_report_key(struct crash_out *o, const char *key, const char *value);
void crash_report_key_int(struct crash_out *o, const char *key, long long v);
/* The blank line between the header and the threads. */
void crash_report_body(struct crash_out *o);

/* "thread TID ident 0x... name "NAME" FLAGS" (flags: space-separated words
 * such as "crashed main"; may be NULL or ""); name NULL: read from
 * /proc/self/task/TID/comm. */
void crash_report_thread(struct crash_out *o, long tid, uint64_t ident,
			 const char *name, const char *flags);
/* "  python (most recent call first):" */
void crash_report_python(struct crash_out *o, const char *label);
/* "    File "FILE", line N, in FUNC" */
void crash_report_frame(struct crash_out *o, const char *func, const char *file,
			int lineno);
/* "    (NOTE)" under a section: "no Python frames", "truncated at 128". */
void crash_report_note(struct crash_out *o, const char *note);
/* The "  native (most recent call first):" section of ips[0..n):
 * ips[0] is the interrupted instruction when first_is_pc, else every
 * entry is a return address.  Symbolized through cache. */
void crash_report_native(struct crash_out *o, struct crash_sym_cache *cache,
			 const uintptr_t *ips, size_t n, int first_is_pc,
			 int truncated);
/* The blank line after a thread. */
void crash_report_thread_end(struct crash_out *o);
/* "end: complete", flushed. */
void crash_report_end(struct crash_out *o);

#endif
