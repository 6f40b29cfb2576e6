/*
 * output: text width and fitting, and the table formats.
 */
#include "render/output.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>

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

TEST_MAIN(test_text, test_formats)
