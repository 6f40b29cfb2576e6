/*
 * errbuf: the message of a failing call, into the caller's buffer.
 *
 * The house convention (STYLE.md): a function returns 0 or a negative
 * errno and writes why into `char *err, size_t errlen`.  errbuf_set()
 * formats into such a buffer, and does nothing when it is NULL or empty.
 * Not async-signal-safe (vsnprintf): not for signal handlers.
 */
#ifndef ERRBUF_H
#define ERRBUF_H

#include <stddef.h>

void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
