/*
 * pyeval: run a piece of Python source in the target.
 *
 * Runs in __main__'s namespace, or in the globals and locals given (a
 * paused frame's).  An expression gives
 * its repr; statements run and their printed output comes back; the last
 * expression statement of a block is echoed like the interactive prompt.
 * Every BaseException (SystemExit, KeyboardInterrupt included) is caught and
 * comes back as a formatted traceback: nothing the code does stops the
 * target.  sys.stdout/sys.stderr are redirected to a buffer while it runs
 * (so output of other threads printed meanwhile is captured too).
 *
 * Caller holds the GIL.  Strings in the result are owned by it.
 */
#ifndef PYEVAL_H
#define PYEVAL_H

#include <stddef.h>

#define PYEVAL_OUTPUT_MAX (1u << 20)  /* bytes of captured output kept */
#define PYEVAL_RESULT_MAX (64u << 10) /* chars of the result's repr */

struct _object;

struct pyeval_result {
	int ok;		     /* 0: an exception was raised (see error) */
	char *value;	     /* repr of an expression's value, or NULL */
	char *type;	     /* its type name, or NULL */
	char *output;	     /* captured stdout+stderr ("" when none) */
	char *error;	     /* formatted traceback, or NULL */
	int interrupted;     /* stopped by pygil_interrupt (KeyboardInterrupt we
				sent) */
	struct _object *obj; /* the value itself when scope->keep: a new
				reference the caller drops with the GIL held,
				before pyeval_result_release() */
};

/* Where and how pyeval_run_in() runs code. */
struct pyeval_scope {
	struct _object *globals; /* borrowed; NULL: __main__'s namespace */
	struct _object *locals;	 /* borrowed; NULL: the globals */
	int expression;		 /* an expression only (hover, watch):
				    statements get a SyntaxError */
	int keep;		 /* keep the value in res->obj */
};

/*
 * Returns 0 (see res->ok) or, with err filled, for failures of our own
 * (not of the user's code): -ENOMEM, -EINVAL (code NULL), -EBUSY (more
 * than 8 evaluations in progress at once).
 *
 * Details: code is first compiled as an expression; its value, None
 * included, comes back in value/type (a REPL may hide "NoneType").  Else
 * it runs as a module; a last expression statement is evaluated after the
 * rest and echoed unless it is None, as the prompt does.  value is cut to
 * PYEVAL_RESULT_MAX characters (ending in "..."); a __repr__ that raises
 * gives "<repr failed: Type: msg>" with ok 1.  output is cut to
 * PYEVAL_OUTPUT_MAX bytes (ending in "\n[output truncated]\n"); the
 * writer keeps no more than that while the code runs.  sys.stdin is an
 * empty StringIO meanwhile (input() gets EOFError; exit() closes it, not
 * the target's).  The code's file name is "<probing-N>", with its lines in
 * linecache while it runs, so tracebacks show source.  On return the
 * streams are the ones found on entry, unless the code assigned sys.stdout
 * (etc.) itself: that assignment is kept.  Never leaves an exception set;
 * one set on entry is kept.
 */
int pyeval_run(const char *code, struct pyeval_result *res, char *err,
	       size_t errlen);

/* The same in scope (NULL: as pyeval_run).  Assignments to names go to
 * scope->locals; writing a frame's locals back into the frame
 * (PyFrame_LocalsToFast) is the caller's business. */
int pyeval_run_in(const char *code, const struct pyeval_scope *scope,
		  struct pyeval_result *res, char *err, size_t errlen);

void pyeval_result_release(struct pyeval_result *res);

#endif
