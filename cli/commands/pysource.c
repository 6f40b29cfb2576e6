/*
 * pysource: see pysource.h.
 */
#include "pysource.h"

#include <ctype.h>
#include <string.h>

#define DEPTH_MAX 1000 /* brackets deeper than this count as this */

/* Whether the word at s (n bytes) starts a compound statement. */
static int compound_keyword(const char *s, size_t n)
{
	static const char *const kw[] = {
		"if",  "elif",	"else",	 "while",  "for",     "try", "with",
		"def", "class", "async", "except", "finally", NULL,
	};

	for (int i = 0; kw[i]; i++)
		if (strlen(kw[i]) == n && !strncmp(s, kw[i], n))
			return 1;
	return 0;
}

static enum cli_pysource_state scan(const char *src, int keywords)
{
	const char *p = src;
	int depth = 0;
	int block = 0;	    /* some logical line opened a block */
	char last = 0;	    /* last significant char of the logical line */
	int line_start = 1; /* nothing significant yet on this logical line */
	int backslash = 0;  /* the source ends in a line continuation */

	while (*p) {
		char c = *p;

		if (c == '#') {
			while (*p && *p != '\n')
				p++;
			continue;
		}
		if (c == '\\' && p[1] == '\n') {
			p += 2;
			backslash = *p == '\0';
			continue;
		}
		if (c == '\\' && p[1] == '\0') {
			backslash = 1;
			p++;
			continue;
		}
		if (c == '\n') {
			if (depth == 0) {
				if (last == ':')
					block = 1;
				last = 0;
				line_start = 1;
			}
			p++;
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\f' || c == '\r') {
			p++;
			continue;
		}
		if (c == '"' || c == '\'') {
			int triple = p[1] == c && p[2] == c;

			p += triple ? 3 : 1;
			for (;;) {
				if (!*p)
					return triple ? CLI_PY_MORE
						      : CLI_PY_COMPLETE;
				if (*p == '\\' && p[1]) {
					p += 2;
					continue;
				}
				if (!triple && *p == '\n')
					break; /* unterminated: Python says */
				if (*p == c &&
				    (!triple || (p[1] == c && p[2] == c))) {
					p += triple ? 3 : 1;
					break;
				}
				p++;
			}
			last = c;
			line_start = 0;
			continue;
		}
		if (line_start && depth == 0 && c == '@')
			block = 1; /* a decorator: the def follows */
		if (keywords && line_start && depth == 0 &&
		    (isalpha((unsigned char)c) || c == '_')) {
			size_t n = 1;
			while (isalnum((unsigned char)p[n]) || p[n] == '_')
				n++;
			/* "for x in y: f(x)" waits for an empty line too, so
			 * that an else can follow, as in Python. */
			if (compound_keyword(p, n))
				block = 1;
			last = p[n - 1];
			line_start = 0;
			p += n;
			continue;
		}
		if (c == '(' || c == '[' || c == '{') {
			if (depth < DEPTH_MAX)
				depth++;
		} else if (c == ')' || c == ']' || c == '}') {
			if (depth > 0)
				depth--;
		}
		last = c;
		line_start = 0;
		p++;
	}
	if (depth > 0 || backslash)
		return CLI_PY_MORE;
	if (block || last == ':')
		return CLI_PY_BLOCK;
	return CLI_PY_COMPLETE;
}

enum cli_pysource_state cli_pysource_scan(const char *src)
{
	return scan(src, 1);
}

int cli_pysource_opens(const char *line)
{
	return scan(line, 0) == CLI_PY_BLOCK;
}

static int starts_word(const char *s, const char *w)
{
	size_t n = strlen(w);

	return !strncmp(s, w, n) && !isalnum((unsigned char)s[n]) &&
	       s[n] != '_';
}

int cli_pysource_continues(const char *line)
{
	if (*line == ' ' || *line == '\t')
		return 1;
	return starts_word(line, "else") || starts_word(line, "elif") ||
	       starts_word(line, "except") || starts_word(line, "finally") ||
	       *line == ')' || *line == ']' || *line == '}' || *line == '#';
}
