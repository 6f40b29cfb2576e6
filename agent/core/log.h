/*
 * log: the agent's few messages, to the stderr the process had when the
 * agent started, with a "[probing PID]" prefix.  Level from PROBING_LOG
 * (error, warn, info, debug; default warn), read once.  One write() per
 * message, so lines from threads do not mix.  log_msg is not
 * async-signal-safe (uses vsnprintf); log_fd is.
 *
 * Where the lines go: the program may close descriptor 2 and open a file
 * of its own that gets the number (a daemon does; so does a program that
 * closes 1 and 2 and opens its data file).  A line of ours written to
 * "descriptor 2" would then land in that file.  So the agent's stderr is
 * the open file descriptor 2 held at start-up (the library's
 * constructor, or the first message when that came earlier), known by its
 * identity (device and inode) and checked before every write: descriptor
 * 2 is written to only while it still holds that same file; otherwise the
 * line is dropped: a message lost is better than a
 * program's file written to.  No copy of it is kept: a copy would hold
 * the program's stderr open after the program let it go (a daemon's
 * caller waiting for the end of its pipe would wait for good).  When
 * descriptor 2 was closed at start-up,
 * open for reading only, or a regular file open for reading and writing
 * (the program's data at that number when the agent is injected later:
 * logs are opened write-only), the agent has no stderr at all.
 */
#ifndef LOG_H
#define LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/*
 * A descriptor that holds the agent's stderr now (checked as above), to
 * write one message to at once, or -1 when there is none.  For writers
 * that cannot use log_msg (signal handlers: crash reports).
 * Async-signal-safe once log_msg or the constructor has run (it only
 * calls fstat).
 */
int log_fd(void);

#endif
