/*
 * nearest: see nearest.h.
 */
#include "nearest.h"

#include <string.h>

#define WORD_MAX 64

int nearest_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int row[WORD_MAX + 1], prev, tmp;

	if (la >= WORD_MAX || lb >= WORD_MAX)
		return NEAREST_FAR;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int best = prev + (a[i - 1] != b[j - 1]);

			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb] < NEAREST_FAR ? row[lb] : NEAREST_FAR;
}

const char *nearest_word(const char *word, const char *const *words,
			 size_t n)
{
	size_t len = strlen(word);
	int near = len <= 4 ? 1 : len <= 8 ? 2 : 3, best = NEAREST_FAR;
	const char *found = NULL;

	for (size_t i = 0; i < n; i++) {
		int d = nearest_distance(word, words[i]);

		if (d < best) {
			best = d;
			found = words[i];
		}
	}
	return best <= near ? found : NULL;
}
