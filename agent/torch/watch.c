/*
 * watch: parsing the list of watched variables.  See watch.h.
 */
#include "watch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int ident_char(char c, int first)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (!first && c >= '0' && c <= '9') || (unsigned char)c >= 0x80;
}

/* Is s[0..n) an identifier (dotted when dots)? */
static int is_ident(const char *s, size_t n, int dots)
{
	int first = 1;

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (dots && s[i] == '.' && !first && i + 1 < n) {
			first = 1;
			continue;
		}
		if (!ident_char(s[i], first))
			return 0;
		first = 0;
	}
	return 1;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int parse_item(const char *s, size_t n, struct watch_item *it, char *err,
		      size_t errlen)
{
	const char *at;

	while (n && is_blank(*s))
		s++, n--;
	while (n && is_blank(s[n - 1]))
		n--;
	at = memchr(s, '@', n);
	if (!at) {
		snprintf(err, errlen, "watch: '%.*s' is not VARIABLE@FUNCTION",
			 (int)(n > 80 ? 80 : n), s);
		return -EINVAL;
	}
	size_t nn = (size_t)(at - s), fn = n - nn - 1;
	if (!is_ident(s, nn, 0) || nn >= WATCH_NAME_MAX) {
		snprintf(err, errlen, "watch: '%.*s' is not a variable name",
			 (int)(nn > 80 ? 80 : nn), s);
		return -EINVAL;
	}
	if (!is_ident(at + 1, fn, 1) || fn >= WATCH_FUNC_MAX) {
		snprintf(err, errlen, "watch: '%.*s' is not a function name",
			 (int)(fn > 80 ? 80 : fn), at + 1);
		return -EINVAL;
	}
	memcpy(it->name, s, nn);
	it->name[nn] = 0;
	memcpy(it->func, at + 1, fn);
	it->func[fn] = 0;
	it->qualified = memchr(it->func, '.', fn) != NULL;
	return 0;
}

int watch_parse(const char *text, struct watch_list *out, char *err,
		size_t errlen)
{
	const char *p = text ? text : "", *end;
	size_t n;

	out->n = 0;
	while (*p) {
		end = p + strcspn(p, ";,");
		n = (size_t)(end - p);
		size_t b = 0;
		while (b < n && is_blank(p[b]))
			b++;
		if (b < n) { /* empty items (";;", a trailing ';') are fine */
			if (out->n == WATCH_MAX) {
				snprintf(err, errlen,
					 "watch: more than %d "
					 "variables",
					 WATCH_MAX);
				out->n = 0;
				return -EINVAL;
			}
			if (parse_item(p, n, &out->items[out->n], err,
				       errlen)) {
				out->n = 0;
				return -EINVAL;
			}
			out->n++;
		}
		p = *end ? end + 1 : end;
	}
	return 0;
}

int watch_canon(const char *text, char *out, size_t outlen, char *err,
		size_t errlen)
{
	struct watch_list l;
	size_t k = 0;

	if (watch_parse(text, &l, err, errlen))
		return -EINVAL;
	if (outlen)
		out[0] = 0;
	for (size_t i = 0; i < l.n; i++) {
		int w = snprintf(out + k, outlen - k, "%s%s@%s", i ? ";" : "",
				 l.items[i].name, l.items[i].func);
		if (w < 0 || (size_t)w >= outlen - k) {
			snprintf(err, errlen, "watch: the list is too long");
			return -EINVAL;
		}
		k += (size_t)w;
	}
	return 0;
}
