/*
 * log: the agent's few messages, to the target's stderr with a "[probing]"
 * prefix.  Level from PROBING_LOG (error, warn, info, debug; default warn),
 * read once.  One write() per message, so lines from threads do not mix.
 * Not async-signal-safe (uses vsnprintf).
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

#endif
