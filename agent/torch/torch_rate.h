/*
 * torch_rate: torch.step_rate — which steps torch tracing times.
 *
 * "N" traces step s when s % N == 0.  "auto" (the default) picks N itself
 * so that tracing costs the training thread about TORCH_RATE_BUDGET of its
 * time: after each traced step it estimates what the step's tracing cost
 * (TORCH_RATE_ROW_US per row it recorded: the hook calls' instructions and
 * the cache misses of their cold code, measured in docs/benchmarks.md)
 * against how long the step took, and takes the smallest power of two
 * that spreads that cost thin enough.  Powers of two keep ranks aligned:
 * ranks at different rates still trace the multiples of the larger one.
 * N grows at most TORCH_RATE_GROWTH-fold per traced step (the first traced
 * step may have begun mid-step) and falls at once.
 *
 * Pure: no Python, no locks (the caller's, torch_step.c's GIL).
 */
#ifndef TORCH_RATE_H
#define TORCH_RATE_H

#include <stddef.h>
#include <stdint.h>

#define TORCH_RATE_MAX 1000000	/* torch.step_rate's largest N */
#define TORCH_RATE_AUTO_MAX 1024 /* auto's largest N */
#define TORCH_RATE_BUDGET 0.005	 /* auto: the share of the steps' time */
#define TORCH_RATE_ROW_US 4.0	 /* auto: the cost of one row, µs */
#define TORCH_RATE_GROWTH 4

/* torch.step_rate's text: "auto" gives *n = 0, "N" (1..TORCH_RATE_MAX)
 * gives N.  0, or -EINVAL. */
int torch_rate_parse(const char *text, int64_t *n);

/* Validates text and writes its canonical form into out (for config).
 * 0, or -EINVAL with err. */
int torch_rate_canon(const char *text, char *out, size_t outlen, char *err,
		     size_t errlen);

/* auto: the rate after a traced step that recorded rows rows and took
 * secs seconds (from the previous optimizer step to its own), the rate
 * having been prev.  A power of two in 1..TORCH_RATE_AUTO_MAX. */
int64_t torch_rate_auto(int64_t rows, double secs, int64_t prev);

#endif
