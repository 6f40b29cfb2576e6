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

/*
 * A client's text quoted in a message: the first line of s into out
 * (outlen bytes with the NUL, outlen >= 1), control characters as '?',
 * cut short on a UTF-8 character's edge (a character that does not fit
 * whole is left out, one that does is kept).  Returns 1 when s went on
 * beyond what out holds (its first line, that is), else 0.
 */
int errbuf_line(char *out, size_t outlen, const char *s);

#endif
