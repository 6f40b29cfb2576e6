/*
 * torch_rate: torch.step_rate.  See torch_rate.h.
 */
#include "torch_rate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int torch_rate_parse(const char *text, int64_t *n)
{
	char *end;
	long long v;

	if (!text)
		return -EINVAL;
	while (*text == ' ')
		text++;
	if (!strcmp(text, "auto")) {
		*n = 0;
		return 0;
	}
	if (*text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	v = strtoll(text, &end, 10);
	while (*end == ' ')
		end++;
	if (errno || *end || v < 1 || v > TORCH_RATE_MAX)
		return -EINVAL;
	*n = v;
	return 0;
}

int torch_rate_canon(const char *text, char *out, size_t outlen, char *err,
		     size_t errlen)
{
	int64_t n;

	if (torch_rate_parse(text, &n)) {
		snprintf(err, errlen,
			 "torch.step_rate: '%s' is neither auto nor a whole "
			 "number from 1 to %d",
			 text ? text : "", TORCH_RATE_MAX);
		return -EINVAL;
	}
	if (n)
		snprintf(out, outlen, "%lld", (long long)n);
	else
		snprintf(out, outlen, "auto");
	return 0;
}

int64_t torch_rate_auto(int64_t rows, double secs, int64_t prev)
{
	double need;
	int64_t n = 1, cap;

	if (prev < 1)
		prev = 1;
	if (rows <= 0)
		return prev;
	if (!(secs > 0)) /* no time measured (or NaN): the widest */
		need = TORCH_RATE_AUTO_MAX;
	else
		need = (double)rows * TORCH_RATE_ROW_US * 1e-6 /
		       (TORCH_RATE_BUDGET * secs);
	while (n < need && n < TORCH_RATE_AUTO_MAX)
		n <<= 1;
	cap = prev > TORCH_RATE_AUTO_MAX / TORCH_RATE_GROWTH
		      ? TORCH_RATE_AUTO_MAX
		      : prev * TORCH_RATE_GROWTH;
	return n < cap ? n : cap;
}
