/*
 * A minimal test harness (libuv test/ style): CHECK() records a failure
 * with file:line and goes on; TEST_MAIN() runs the listed tests and exits
 * non-zero when any check failed.
 *
 *   static void test_x(void) { CHECK(1 + 1 == 2); }
 *   TEST_MAIN(test_x, test_y)
 */
#ifndef TEST_H
#define TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;
static int test_checks;

#define CHECK(cond)                                                        \
	do {                                                               \
		test_checks++;                                             \
		if (!(cond)) {                                             \
			test_failures++;                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n",       \
				__FILE__, __LINE__, #cond);                \
		}                                                          \
	} while (0)

#define CHECK_STR(a, b)                                                    \
	do {                                                               \
		const char *a_ = (a), *b_ = (b);                           \
		test_checks++;                                             \
		if (!a_ || !b_ || strcmp(a_, b_) != 0) {                   \
			test_failures++;                                   \
			fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n",        \
				__FILE__, __LINE__, a_ ? a_ : "(null)",    \
				b_ ? b_ : "(null)");                       \
		}                                                          \
	} while (0)

typedef void (*test_fn)(void);

static inline int test_run(const char *names, test_fn *fns, size_t n)
{
	(void)names;
	for (size_t i = 0; i < n; i++)
		fns[i]();
	printf("%d checks, %d failed\n", test_checks, test_failures);
	return test_failures ? 1 : 0;
}

#define TEST_MAIN(...)                                                     \
	int main(void)                                                     \
	{                                                                  \
		test_fn fns[] = {__VA_ARGS__};                             \
		return test_run(#__VA_ARGS__, fns,                         \
				sizeof(fns) / sizeof(fns[0]));             \
	}

#endif
