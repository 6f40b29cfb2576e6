/*
 * sqlglobal: global.<schema>.<table> in a query.  See sqlglobal.h.
 */
#include "sqlglobal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* The identifier at s: its length (0: none). */
static size_t ident(const char *s)
{
	size_t n = 0;

	while (ident_char(s[n]))
		n++;
	return n;
}

/* Past a quoted part or comment starting at s[i], or i when none. */
static size_t skip_quoted(const char *s, size_t i)
{
	char close;

	if (s[i] == '-' && s[i + 1] == '-') {
		while (s[i] && s[i] != '\n')
			i++;
		return i;
	}
	if (s[i] == '/' && s[i + 1] == '*') {
		const char *e = strstr(s + i + 2, "*/");

		return e ? (size_t)(e - s) + 2 : strlen(s);
	}
	if (s[i] != '\'' && s[i] != '"' && s[i] != '`' && s[i] != '[')
		return i;
	close = s[i] == '[' ? ']' : s[i];
	for (i++; s[i]; i++) {
		if (s[i] == close && s[i + 1] == close && close != ']')
			i++; /* a doubled quote stays inside */
		else if (s[i] == close)
			return i + 1;
	}
	return i;
}

int sqlglobal_refs(const char *sql, struct sqlglobal_ref *refs, int max)
{
	size_t i = 0;
	int n = 0;

	while (sql[i]) {
		size_t j = skip_quoted(sql, i), a, b;

		if (j != i) {
			i = j;
			continue;
		}
		if (!ident_char(sql[i])) {
			i++;
			continue;
		}
		a = ident(sql + i);
		if (a == 6 && !strncasecmp(sql + i, "global", 6) &&
		    (i == 0 || sql[i - 1] != '.') && sql[i + 6] == '.' &&
		    (b = ident(sql + i + 7)) > 0 && sql[i + 7 + b] == '.') {
			size_t c = ident(sql + i + 8 + b);

			if (c > 0 && b + 1 + c < sizeof(refs->name)) {
				if (n < max) {
					refs[n].start = i;
					refs[n].end = i + 8 + b + c;
					snprintf(refs[n].name,
						 sizeof(refs[n].name),
						 "%.*s.%.*s", (int)b,
						 sql + i + 7, (int)c,
						 sql + i + 8 + b);
				}
				n++;
				i += 8 + b + c;
				continue;
			}
		}
		i += a;
	}
	return n;
}
