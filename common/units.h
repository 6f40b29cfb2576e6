/*
 * units: a number with a unit ("1.5s", "512 MiB", "5 min"), the one
 * parser of the CLI's durations, SQL's ago() and the original Probing's
 * sizes.
 */
#ifndef UNITS_H
#define UNITS_H

#include <stddef.h>

struct unit {
	const char *name; /* "" for a bare number */
	double scale;	  /* what one of it is worth */
};

/*
 * text is a finite number >= 0, spaces, then one of units' names (matched
 * without regard to case): *out = number * scale, 0.  -1 when it is not
 * (no number, a negative or non-finite one, or a name not in units).
 */
int units_parse(const char *text, const struct unit *units, size_t n,
		double *out);

#endif
