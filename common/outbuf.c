/*
 * outbuf: see outbuf.h.
 */
#include "outbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(struct outbuf *b, size_t more)
{
	size_t cap;
	char *p;

	if (b->err)
		return;
	if (more >= b->max || b->len + 1 > b->max - more) {
		b->err = -E2BIG;
		return;
	}
	if (b->len + more + 1 <= b->cap)
		return;
	cap = b->cap ? b->cap : 65536;
	while (cap < b->len + more + 1)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = -ENOMEM;
		return;
	}
	b->p = p;
	b->cap = cap;
}

void outbuf_putn(struct outbuf *b, const char *s, size_t n)
{
	reserve(b, n);
	if (b->err)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void outbuf_puts(struct outbuf *b, const char *s)
{
	outbuf_putn(b, s, strlen(s));
}

void outbuf_printf(struct outbuf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		outbuf_putn(b, small, (size_t)n);
		return;
	}
	reserve(b, (size_t)n);
	if (b->err)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* The length of the UTF-8 sequence at p (1 to 4), or 0 when it is not
 * one (a stray or cut byte, an overlong form, a surrogate). */
static size_t utf8_len(const unsigned char *p)
{
	size_t n;
	unsigned cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80) /* the NUL that ends s too */
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

void outbuf_utf8_scrub(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (p && *p) {
		size_t n = utf8_len(p);

		if (!n)
			*p++ = '?';
		else
			p += n;
	}
}

void outbuf_json_chars(struct outbuf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	const unsigned char *run = p;

	while (*p) {
		size_t n = utf8_len(p);

		if (n > 1 || (n == 1 && *p >= 0x20 && *p != '"' &&
			      *p != '\\')) {
			p += n;
			continue;
		}
		outbuf_putn(b, (const char *)run, (size_t)(p - run));
		if (!n) {
			outbuf_puts(b, "\\ufffd"); /* not UTF-8: replaced */
		} else if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};

			outbuf_putn(b, e, 2);
		} else {
			outbuf_printf(b, "\\u%04x", *p);
		}
		run = ++p;
	}
	outbuf_putn(b, (const char *)run, (size_t)(p - run));
}

void outbuf_json_str(struct outbuf *b, const char *s)
{
	outbuf_putn(b, "\"", 1);
	outbuf_json_chars(b, s);
	outbuf_putn(b, "\"", 1);
}

void outbuf_xml_str(struct outbuf *b, const char *s)
{
	const char *p = s ? s : "", *run = p;

	for (; *p; p++) {
		const char *e = NULL;

		switch (*p) {
		case '&':
			e = "&amp;";
			break;
		case '<':
			e = "&lt;";
			break;
		case '>':
			e = "&gt;";
			break;
		case '"':
			e = "&quot;";
			break;
		case '\'':
			e = "&apos;";
			break;
		default:
			/* XML 1.0 allows no control characters but tab,
			 * newline and carriage return. */
			if ((unsigned char)*p < 0x20)
				e = " ";
		}
		if (!e)
			continue;
		outbuf_putn(b, run, (size_t)(p - run));
		outbuf_puts(b, e);
		run = p + 1;
	}
	outbuf_putn(b, run, (size_t)(p - run));
}

void outbuf_release(struct outbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
