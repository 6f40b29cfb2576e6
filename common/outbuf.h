/*
 * outbuf: a growing text buffer with a cap, for output written piece by
 * piece (the flamegraph's renderers, probing/trace's events).  Errors are
 * sticky: once a write would pass max bytes (-E2BIG) or memory runs out
 * (-ENOMEM), err is set and every later write does nothing, so a writer
 * checks once at the end.  p is NUL-terminated once anything was written.
 *
 *   struct outbuf b = {.max = 12u << 20};
 *   outbuf_printf(&b, "{\"n\":%d,\"name\":", n);
 *   outbuf_json_str(&b, name);
 *   if (b.err) ...;   else use b.p, b.len; then outbuf_release(&b)
 *
 * Single-threaded (one buffer, one writer).
 */
#ifndef OUTBUF_H
#define OUTBUF_H

#include <stddef.h>

struct outbuf {
	char *p;
	size_t len, cap;
	size_t max; /* bytes at most, the NUL included */
	int err;    /* 0, -E2BIG or -ENOMEM */
};

void outbuf_putn(struct outbuf *b, const char *s, size_t n);
void outbuf_puts(struct outbuf *b, const char *s);
void outbuf_printf(struct outbuf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* s as a JSON string, quoted and escaped (NULL: ""); _chars: escaped,
 * without the quotes (a string written in pieces).  Bytes that are not
 * UTF-8 (a name cut mid-character, a library's symbol) become U+FFFD:
 * the output is always valid JSON. */
void outbuf_json_str(struct outbuf *b, const char *s);
void outbuf_json_chars(struct outbuf *b, const char *s);
/* s made UTF-8 in place: each byte that is not becomes '?' (text going
 * to a JSON writer that does not check, cJSON). */
void outbuf_utf8_scrub(char *s);
/* s escaped for XML text and attributes (NULL: nothing). */
void outbuf_xml_str(struct outbuf *b, const char *s);
/* Frees p; the buffer is empty again (max and err kept). */
void outbuf_release(struct outbuf *b);

#endif
