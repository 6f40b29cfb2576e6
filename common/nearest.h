/*
 * nearest: the word a mistyped one was meant to be ("backtrac" ->
 * "backtrace", "query.max_row" -> "query.max_rows"), for messages that
 * suggest instead of only refusing.
 */
#ifndef NEAREST_H
#define NEAREST_H

#include <stddef.h>

/* The edit distance (insertions, deletions, substitutions) of a and b,
 * capped at NEAREST_FAR; words of 64 bytes or more are NEAREST_FAR. */
#define NEAREST_FAR 4
int nearest_distance(const char *a, const char *b);

/*
 * The word of words[0..n) nearest to word, or NULL when none is near
 * enough to be what was meant: at most 1 edit for words up to 4 bytes,
 * 2 up to 8, 3 beyond.  Ties go to the first.
 */
const char *nearest_word(const char *word, const char *const *words,
			 size_t n);

#endif
