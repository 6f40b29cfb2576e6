/*
 * torch_rate: torch.step_rate's text, and the rate auto picks.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "test.h"
#include "torch/torch_rate.h"

static void test_parse(void)
{
	static const char *bad[] = {
		"", "0", "-1", "+3", "1.5", "1e3", "auto2", "Auto", "x",
		"1000001", "99999999999999999999", "3 4",
	};
	char out[64], err[256];
	int64_t n;

	CHECK(torch_rate_parse("auto", &n) == 0 && n == 0);
	CHECK(torch_rate_parse("1", &n) == 0 && n == 1);
	CHECK(torch_rate_parse(" 10 ", &n) == 0 && n == 10);
	CHECK(torch_rate_parse("1000000", &n) == 0 && n == TORCH_RATE_MAX);
	CHECK(torch_rate_parse(NULL, &n) == -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(torch_rate_parse(bad[i], &n) == -EINVAL);
		err[0] = 0;
		CHECK(torch_rate_canon(bad[i], out, sizeof(out), err,
				       sizeof(err)) == -EINVAL);
		CHECK(strstr(err, "neither auto nor a whole number") != NULL);
	}
	CHECK(torch_rate_canon(" 007", out, sizeof(out), err, sizeof(err)) ==
	      0);
	CHECK_STR(out, "7");
	CHECK(torch_rate_canon("auto", out, sizeof(out), err, sizeof(err)) ==
	      0);
	CHECK_STR(out, "auto");
}

static int pow2(int64_t n)
{
	return n > 0 && (n & (n - 1)) == 0;
}

static void test_auto(void)
{
	/* 30 rows of 4 µs: 120 µs.  Against 0.5% of a 1 ms step (5 µs):
	 * 24 steps wanted, so 32 — reached in growth steps of four. */
	int64_t n = 1;

	n = torch_rate_auto(30, 0.001, n);
	CHECK(n == 4);
	n = torch_rate_auto(30, 0.001, n);
	CHECK(n == 16);
	n = torch_rate_auto(30, 0.001, n);
	CHECK(n == 32);
	CHECK(torch_rate_auto(30, 0.001, n) == 32);
	/* Long steps: every step, at once (falling is not capped). */
	CHECK(torch_rate_auto(30, 0.1, 32) == 1);
	/* Exactly at the budget: 20 rows of 4 µs over 16 ms (0.5% = 80 µs). */
	CHECK(torch_rate_auto(20, 0.016, 1) == 1);
	CHECK(torch_rate_auto(21, 0.016, 1) == 2);
	/* The bound, powers of two only. */
	CHECK(torch_rate_auto(1000000, 1e-6, TORCH_RATE_AUTO_MAX) ==
	      TORCH_RATE_AUTO_MAX);
	CHECK(torch_rate_auto(1000000, 1e-6, 512) == TORCH_RATE_AUTO_MAX);
	for (int64_t rows = 1; rows < 5000; rows = rows * 3 + 1)
		for (double s = 1e-5; s < 10; s *= 7) {
			int64_t r = torch_rate_auto(rows, s, 1024);

			CHECK(pow2(r) && r <= TORCH_RATE_AUTO_MAX);
			/* The rows' cost is within the budget at r (or r is
			 * the largest). */
			CHECK(r == TORCH_RATE_AUTO_MAX ||
			      rows * TORCH_RATE_ROW_US * 1e-6 <=
				      TORCH_RATE_BUDGET * s * (double)r + 1e-12);
			/* r is the smallest such power of two. */
			CHECK(r == 1 || rows * TORCH_RATE_ROW_US * 1e-6 >
						TORCH_RATE_BUDGET * s *
							(double)(r / 2));
		}
	/* Nothing measured, or nonsense: nothing learnt, or the widest
	 * allowed by the growth limit. */
	CHECK(torch_rate_auto(0, 0.01, 8) == 8);
	CHECK(torch_rate_auto(-5, 0.01, 8) == 8);
	CHECK(torch_rate_auto(10, 0, 1) == TORCH_RATE_GROWTH);
	CHECK(torch_rate_auto(10, -1, 2) == 2 * TORCH_RATE_GROWTH);
	CHECK(torch_rate_auto(10, NAN, 1) == TORCH_RATE_GROWTH);
	CHECK(torch_rate_auto(10, INFINITY, 64) == 1);
	CHECK(torch_rate_auto(10, 0.01, 0) >= 1);
	CHECK(torch_rate_auto(10, 0.01, -7) >= 1);
}

TEST_MAIN(test_parse, test_auto)
