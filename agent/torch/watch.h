/*
 * watch: the list of watched variables, torch.watch ("loss@train;
 * acc1@train"): which locals of which functions the torch tracer records
 * into python.variables once per traced step.
 *
 * An item is NAME@FUNC: NAME a local variable (a Python identifier), FUNC
 * a function's name ("train") or qualified name ("Trainer.fit", matched
 * against co_qualname).  Items are separated by ';' or ',' (both work:
 * the original tool's comma form silently kept only the first item);
 * blanks around them are ignored; the canonical form joins them with ';'.
 * An empty text is an empty list.
 *
 * Pure: no Python, no allocation.  Any thread.
 */
#ifndef WATCH_H
#define WATCH_H

#include <stddef.h>

#define WATCH_MAX 16	   /* items in a list */
#define WATCH_NAME_MAX 64  /* bytes of a variable name, NUL included */
#define WATCH_FUNC_MAX 128 /* bytes of a function name, NUL included */

struct watch_item {
	char name[WATCH_NAME_MAX];
	char func[WATCH_FUNC_MAX];
	int qualified; /* func has a '.': match co_qualname */
};

struct watch_list {
	size_t n;
	struct watch_item items[WATCH_MAX];
};

/* Parses text into out.  Returns 0, or -EINVAL with the reason in err
 * (out is then empty). */
int watch_parse(const char *text, struct watch_list *out, char *err,
		size_t errlen);

/* Validates text and writes its canonical form into out (for config).
 * Returns 0 or -EINVAL with err. */
int watch_canon(const char *text, char *out, size_t outlen, char *err,
		size_t errlen);

#endif
