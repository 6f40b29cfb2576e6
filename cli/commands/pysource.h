/*
 * pysource: does a piece of Python source need more lines?
 *
 * The REPL decides continuation locally, as Python's own REPL does, so it
 * can show "... " without a round trip to the agent.  A small scanner, not
 * a parser: it follows strings (single, triple, with escapes), comments and
 * brackets, which is what decides whether a statement can end.  Source that
 * is wrong anyway is reported complete, and Python says why.
 */
#ifndef CLI_PYSOURCE_H
#define CLI_PYSOURCE_H

enum cli_pysource_state {
	CLI_PY_COMPLETE = 0, /* can run now */
	CLI_PY_MORE,	     /* cannot end here: an open bracket, an
				unterminated triple-quoted string, or a
				trailing backslash; even an empty line
				continues it */
	CLI_PY_BLOCK,	     /* a compound statement (a line that starts
				with if/for/while/try/with/def/class/async/
				else/elif/except/finally or a decorator, or
				ends in ':' outside brackets): ends at an
				empty line */
};

/* Scans src (NUL-terminated, lines separated by '\n'). */
enum cli_pysource_state cli_pysource_scan(const char *src);

/*
 * Whether line (one line, or the last of a statement) must be followed by
 * an indented body: it ends in ':' outside brackets, strings and comments,
 * or is a decorator.
 */
int cli_pysource_opens(const char *line);

/*
 * Whether line, typed after a complete block, continues that block rather
 * than starting a new statement: it is indented, or it begins with else,
 * elif, except, finally, or a closing bracket or comment.
 */
int cli_pysource_continues(const char *line);

#endif
