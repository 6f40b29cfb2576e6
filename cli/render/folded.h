/*
 * folded: collapsed stacks read back, and the hottest functions in them.
 *
 * The folded format is one line per distinct stack: frames from the root
 * separated by ';', a space, and a sample count ("main;f;g 12").  Frames
 * are labels such as "func (file)", as probing/flamegraph writes them.
 *
 * folded_top() adds up, per label, its self samples (where it is the
 * innermost frame) and its total samples (stacks it appears in, once per
 * stack however often it recurses).  Labels come out sorted by self, then
 * total, then label.
 *
 * Caps: FOLDED_TEXT_MAX bytes of input, FOLDED_DEPTH_MAX frames per line,
 * FOLDED_LABELS_MAX distinct labels; past them, -E2BIG.  Pure.
 */
#ifndef CLI_FOLDED_H
#define CLI_FOLDED_H

#include <stddef.h>
#include <stdint.h>

/* The flamegraph format a file name asks for: "speedscope"
 * (.speedscope.json), "chrome" (.json), "svg", "folded" (.folded,
 * .collapsed, .txt), or NULL. */
const char *folded_format_of(const char *path);

#define FOLDED_TEXT_MAX ((size_t)256 << 20)
#define FOLDED_DEPTH_MAX 8192
#define FOLDED_LABELS_MAX 1000000

struct folded_fn {
	char *label;
	uint64_t self, total;
};

struct folded_top {
	struct folded_fn *fns; /* sorted, owned */
	size_t n;
	uint64_t samples; /* all samples */
	size_t stacks;	  /* lines read */
};

/*
 * Reads text (NUL-terminated) into out.  Empty lines are skipped.
 * Returns 0, -EINVAL for a line that is not "stack count" (err names
 * it), -E2BIG past a cap, or -ENOMEM.  out is valid (maybe empty) and
 * must be released in every case.
 */
int folded_top(const char *text, struct folded_top *out, char *err,
	       size_t errlen);

void folded_top_release(struct folded_top *t);

/* Splits "func (where)" at its last " (" into func and where (without
 * the parentheses); a label without one is all func, where "". */
void folded_label_split(const char *label, char *func, size_t funclen,
			char *where, size_t wherelen);

#endif
