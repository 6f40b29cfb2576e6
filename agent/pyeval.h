/*
 * pyeval: run a piece of Python source in the target.
 *
 * Runs in __main__'s namespace (or a frame's, later).  An expression gives
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

#define PYEVAL_OUTPUT_MAX (1u << 20)   /* bytes of captured output kept */
#define PYEVAL_RESULT_MAX (64u << 10)  /* chars of the result's repr */

struct pyeval_result {
	int ok;          /* 0: an exception was raised (see error) */
	char *value;     /* repr of an expression's value, or NULL */
	char *type;      /* its type name, or NULL */
	char *output;    /* captured stdout+stderr ("" when none) */
	char *error;     /* formatted traceback, or NULL */
	int interrupted; /* stopped by pygil_interrupt (KeyboardInterrupt we sent) */
};

/* Returns 0 (see res->ok) or -ENOMEM/-EINVAL with err filled for failures
 * of our own (not of the user's code). */
int pyeval_run(const char *code, struct pyeval_result *res, char *err,
	       size_t errlen);

void pyeval_result_release(struct pyeval_result *res);

#endif
