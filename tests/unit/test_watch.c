/*
 * watch: the torch.watch list (VAR@FUNC items).
 */
#include <errno.h>

#include "test.h"
#include "torch/watch.h"

static void test_parse(void)
{
	struct watch_list l;
	char err[256];

	CHECK(watch_parse("loss@train;acc1@train", &l, err, sizeof(err)) == 0);
	CHECK(l.n == 2);
	CHECK_STR(l.items[0].name, "loss");
	CHECK_STR(l.items[0].func, "train");
	CHECK_STR(l.items[1].name, "acc1");
	CHECK(!l.items[1].qualified);
	/* Commas work too: every item is kept. */
	CHECK(watch_parse(" loss@train , acc1@Trainer.fit,x@f ", &l, err,
			  sizeof(err)) == 0);
	CHECK(l.n == 3);
	CHECK_STR(l.items[1].func, "Trainer.fit");
	CHECK(l.items[1].qualified);
	CHECK_STR(l.items[2].name, "x");
	CHECK(watch_parse("", &l, err, sizeof(err)) == 0 && l.n == 0);
	CHECK(watch_parse(";;", &l, err, sizeof(err)) == 0 && l.n == 0);
	CHECK(watch_parse(NULL, &l, err, sizeof(err)) == 0 && l.n == 0);
}

static void test_reject(void)
{
	static const char *bad[] = {
		"loss", "@train", "loss@", "1x@f",   "a b@f", "x@f.",
		"x@.f", "x@f..g", "x.y@f", "x@f(1)", "x@@f",
	};
	struct watch_list l;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		CHECK(watch_parse(bad[i], &l, err, sizeof(err)) == -EINVAL);
		CHECK(l.n == 0 && err[0]);
	}
	char many[1024] = "";
	for (int i = 0; i < WATCH_MAX + 1; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
			 "v%d@f;", i);
	CHECK(watch_parse(many, &l, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "more than") != NULL);
	char longname[200];
	memset(longname, 'a', sizeof(longname));
	strcpy(longname + WATCH_NAME_MAX, "@f");
	CHECK(watch_parse(longname, &l, err, sizeof(err)) == -EINVAL);
}

static void test_canon(void)
{
	char out[256], err[256];

	CHECK(watch_canon(" loss@train, acc1@train ;", out, sizeof(out), err,
			  sizeof(err)) == 0);
	CHECK_STR(out, "loss@train;acc1@train");
	CHECK(watch_canon("", out, sizeof(out), err, sizeof(err)) == 0);
	CHECK_STR(out, "");
	CHECK(watch_canon("a@f;b@g", out, 6, err, sizeof(err)) == -EINVAL);
	CHECK(watch_canon("nope", out, sizeof(out), err, sizeof(err)) ==
	      -EINVAL);
}

TEST_MAIN(test_parse, test_reject, test_canon)
