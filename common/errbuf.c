/*
 * errbuf: see errbuf.h.
 */
#include "errbuf.h"

#include <stdarg.h>
#include <stdio.h>

void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The bytes of the UTF-8 character that starts with byte c (1 for a
 * byte that starts none: it is taken alone). */
static size_t utf8_len(unsigned char c)
{
	return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

int errbuf_line(char *out, size_t outlen, const char *s)
{
	size_t n = 0, k;

	while (*s && *s != '\n') {
		k = utf8_len((unsigned char)*s);
		for (size_t i = 1; i < k; i++)
			if (((unsigned char)s[i] & 0xc0) != 0x80) {
				k = 1; /* not a whole character: a byte */
				break;
			}
		if (n + k + 1 > outlen)
			break;
		for (size_t i = 0; i < k; i++, s++)
			out[n++] = (unsigned char)*s < 0x20 || *s == 0x7f
					   ? '?'
					   : *s;
	}
	out[n] = '\0';
	return *s && *s != '\n';
}
