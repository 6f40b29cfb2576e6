/*
 * units: see units.h.
 */
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <strings.h>

int units_parse(const char *text, const struct unit *units, size_t n,
		double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || !isfinite(v) || !(v >= 0))
		return -1;
	while (*end == ' ')
		end++;
	for (size_t i = 0; i < n; i++)
		if (!strcasecmp(end, units[i].name)) {
			*out = v * units[i].scale;
			return 0;
		}
	return -1;
}
