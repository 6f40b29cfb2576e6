/*
 * output: text width and fitting, and the table formats.
 */
#include "render/output.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_text(void)
{
	char buf[64];

	CHECK_STR(cli_text_fit("hello", 0, buf, sizeof(buf)), "hello");
	CHECK(cli_text_width(cli_text_fit("hello world", 5, buf, sizeof(buf)),
			     strlen(buf)) <= 5);
	CHECK(cli_text_width(cli_text_fit("日本語テキスト", 5, buf,
					  sizeof(buf)), strlen(buf)) <= 5);
	CHECK(strlen(cli_text_fit("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 0,
				  buf, 10)) < 10);
	CHECK_STR(cli_text_fit("", 3, buf, sizeof(buf)), "");
	/* code points, not bytes; wide characters count double */
	CHECK(cli_text_width("é", strlen("é")) == 1);
	CHECK(cli_text_width("日本", strlen("日本")) == 4);
	/* control characters never reach the terminal raw */
	cli_text_fit("a\nb\tc\x01", 0, buf, sizeof(buf));
	CHECK(strchr(buf, '\n') == NULL && strchr(buf, '\x01') == NULL);
}

static char *render(const struct cli_table *t, enum cli_format fmt, int tty)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cli_table_print(t, f, fmt, tty);
	fclose(f);
	return text;
}

static void test_formats(void)
{
	const char *cols[] = {"n", "s"};
	const char *r1[] = {"1", "a,b"};
	const char *r2[] = {NULL, "q\"x\ny"};
	struct cli_table *t = cli_table_new(2, cols);
	char *s;

	CHECK(cli_table_add(t, r1) == 0 && cli_table_add(t, r2) == 0);
	CHECK(cli_table_rows(t) == 2);
	s = render(t, CLI_FORMAT_CSV, 0);
	CHECK_STR(s, "n,s\r\n1,\"a,b\"\r\n,\"q\"\"x\ny\"\r\n");
	free(s);
	s = render(t, CLI_FORMAT_JSON, 0);
	CHECK(strstr(s, "\"s\":\"a,b\"") || strstr(s, "\"s\": \"a,b\""));
	CHECK(strstr(s, "null") != NULL);
	free(s);
	s = render(t, CLI_FORMAT_TABLE, 0);   /* piped: tab-separated */
	CHECK(strncmp(s, "n\ts\n1\ta,b\n", 10) == 0);
	free(s);
	s = render(t, CLI_FORMAT_TABLE, 1);   /* terminal: boxed */
	CHECK(strstr(s, "│") != NULL);
	free(s);
	cli_table_free(t);
}

/* The widest line's width in columns. */
static size_t widest_line(const char *s)
{
	size_t most = 0;

	while (*s) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);
		size_t w = cli_text_width(s, n);

		if (w > most)
			most = w;
		s += n + (nl ? 1 : 0);
	}
	return most;
}

static void test_fits_the_terminal(void)
{
	/* Not a terminal here: cli_term_width() is 80.  A table of 153
	 * columns (config's) is cut to 80, its wide columns first; the
	 * narrow ones keep their text. */
	const char *cols[] = {"name", "value", "default", "description"};
	const char *r1[] = {"python.gil_timeout_ms", "1000", "1000",
			    ("how long a request waits for the GIL before it "
			     "reads stacks without it (ms)")};
	const char *r2[] = {"x", "2", "2", "short"};
	struct cli_table *t = cli_table_new(4, cols);
	char *s;

	if (isatty(1)) { /* run by hand: its own terminal's width */
		cli_table_free(t);
		return;
	}
	CHECK(cli_term_width() == 80);
	CHECK(cli_table_add(t, r1) == 0 && cli_table_add(t, r2) == 0);
	s = render(t, CLI_FORMAT_TABLE, 1);
	CHECK(widest_line(s) == 80);
	CHECK(strstr(s, "│ 1000 ") != NULL);
	CHECK(strstr(s, "how long") != NULL && strstr(s, "…") != NULL);
	CHECK(strstr(s, "(ms)") == NULL);
	free(s);
	/* Piped: whole. */
	s = render(t, CLI_FORMAT_TABLE, 0);
	CHECK(strstr(s, "without it (ms)") != NULL);
	free(s);
	cli_table_free(t);
	{
		/* Too many columns even cut: the blank one ("-"
		 * everywhere) goes, then the last ones, named below. */
		const char *c9[] = {"run", "pid", "rank", "job", "started",
				    "ended", "how", "mb", "command"};
		const char *row[] = {"vm-16046-20261126T190606", "16046", "-",
				     "", "2026-11-26 19:06:06", "-", "unknown",
				     "0.1", "/usr/bin/python3 /tmp/x.py"};
		struct cli_table *u = cli_table_new(9, c9);

		cli_table_upper_header(u);
		CHECK(cli_table_add(u, row) == 0);
		s = render(u, CLI_FORMAT_TABLE, 1);
		CHECK(widest_line(s) <= 80);
		CHECK(strstr(s, "│ 16046 │") && strstr(s, "│ RANK") == NULL);
		CHECK(strstr(s, "not shown: RANK (empty)") != NULL);
		CHECK(strstr(s, "vm-16046-20261126T190606") != NULL);
		free(s);
		cli_table_free(u);
	}
}

TEST_MAIN(test_text, test_formats, test_fits_the_terminal)
