/*
 * errbuf_line: a client's text quoted in a message — its first line,
 * control characters as '?', cut on a UTF-8 character's edge (a
 * character that fits whole is kept, one that does not is left out), and
 * never read past the string's end.
 */
#include <string.h>

#include "errbuf.h"
#include "test.h"

static void check(const char *s, size_t cap, const char *want, int cut)
{
	char out[64];

	memset(out, 'x', sizeof(out));
	CHECK(cap <= sizeof(out));
	CHECK(errbuf_line(out, cap, s) == cut);
	CHECK_STR(out, want);
	CHECK(strlen(out) < cap);
}

static void test_whole(void)
{
	check("", 8, "", 0);
	check("abc", 8, "abc", 0);
	check("abc\ndef", 8, "abc", 0);
	check("a\tb\x1b]0;x\x07\x7f", 16, "a?b?]0;x??", 0);
}

static void test_cut(void)
{
	check("abcdef", 4, "abc", 1);
	check("abc\ndef", 4, "abc", 0); /* the first line fits */
	/* "é" is 2 bytes, "€" 3, "😀" 4: kept whole when they fit. */
	check("ab\xc3\xa9z", 5, "ab\xc3\xa9", 1);
	check("ab\xc3\xa9z", 4, "ab", 1);
	check("a\xe2\x82\xac", 5, "a\xe2\x82\xac", 0);
	check("a\xe2\x82\xacz", 4, "a", 1);
	check("a\xf0\x9f\x98\x80", 5, "a", 1);
	check("a\xf0\x9f\x98\x80", 6, "a\xf0\x9f\x98\x80", 0);
	check("x", 1, "", 1);
}

static void test_not_utf8(void)
{
	/* A lead byte without its continuation: a byte alone, and the
	 * string's end is never passed. */
	check("a\xf0", 8, "a\xf0", 0);
	check("a\xf0\x9f", 8, "a\xf0\x9f", 0);
	check("\xc3z", 8, "\xc3z", 0);
	check("\x80\x80", 8, "\x80\x80", 0);
}

TEST_MAIN(test_whole, test_cut, test_not_utf8)
