/*
 * pysource: the REPL's decision whether a statement is complete.
 */
#include "commands/pysource.h"
#include "test.h"

#define SCAN(src, want) CHECK(cli_pysource_scan(src) == (want))

static void test_scan(void)
{
	SCAN("1+1\n", CLI_PY_COMPLETE);
	SCAN("x = (1,\n", CLI_PY_MORE);
	SCAN("x = (1,\n2)\n", CLI_PY_COMPLETE);
	SCAN("def f():\n", CLI_PY_BLOCK);
	SCAN("def f():\n  return 1\n", CLI_PY_BLOCK);
	SCAN("s = '''abc\n", CLI_PY_MORE);
	SCAN("s = '''abc\n'''\n", CLI_PY_COMPLETE);
	SCAN("s = \"\"\"a'''\n", CLI_PY_MORE);
	SCAN("x = 1 + \\\n", CLI_PY_MORE);
	SCAN("x = 1 + \\\n 2\n", CLI_PY_COMPLETE);
	SCAN("x = '(' # ( [ {\n", CLI_PY_COMPLETE);
	SCAN("x = 'a\\'(' \n", CLI_PY_COMPLETE);
	SCAN("d = {'a': 1}\n", CLI_PY_COMPLETE);
	SCAN("d = {'a':\n", CLI_PY_MORE);
	SCAN("for i in x: print(i)\n", CLI_PY_BLOCK);
	SCAN("format = 3\n", CLI_PY_COMPLETE);
	SCAN("iffy = 3\n", CLI_PY_COMPLETE);
	SCAN("@dec\n", CLI_PY_BLOCK);
	SCAN("x = a[1:]\n", CLI_PY_COMPLETE);
	SCAN("x = 1 # comment:\n", CLI_PY_COMPLETE);
	SCAN("class A: # c\n", CLI_PY_BLOCK);
	SCAN("print('#')\n", CLI_PY_COMPLETE);
	SCAN("x = 'unterminated\n", CLI_PY_COMPLETE);
	SCAN("x = r'\\'\n", CLI_PY_COMPLETE);
	SCAN(")))\n", CLI_PY_COMPLETE);
	SCAN("lambda: 1\n", CLI_PY_COMPLETE);
	SCAN("x = f'{a}'\n", CLI_PY_COMPLETE);
}

static void test_block_lines(void)
{
	CHECK(!cli_pysource_opens("else: y = 2\n"));
	CHECK(cli_pysource_opens("  if x:  # hi\n"));
	CHECK(!cli_pysource_continues("elsewhere = 1"));
	CHECK(cli_pysource_continues("else:"));
	CHECK(cli_pysource_continues("  x"));
}

TEST_MAIN(test_scan, test_block_lines)
