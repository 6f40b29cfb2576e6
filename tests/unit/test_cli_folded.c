/*
 * folded: parsing collapsed stacks, self and total per function.
 */
#include "render/folded.h"
#include "test.h"

#include <errno.h>

static const struct folded_fn *find(const struct folded_top *t,
				    const char *label)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->fns[i].label, label))
			return &t->fns[i];
	return NULL;
}

static void test_top(void)
{
	struct folded_top t;
	char err[128];
	const struct folded_fn *f;

	CHECK(folded_top("main;f;g 5\n"
			 "main;f 3\r\n"
			 "\n"
			 "main;rec;rec;rec 2\n"
			 "main 1",
			 &t, err, sizeof(err)) == 0);
	CHECK(t.samples == 11 && t.stacks == 4 && t.n == 4);
	f = find(&t, "main");
	CHECK(f && f->self == 1 && f->total == 11);
	f = find(&t, "f");
	CHECK(f && f->self == 3 && f->total == 8);
	f = find(&t, "g");
	CHECK(f && f->self == 5 && f->total == 5);
	/* Recursion counts once in total. */
	f = find(&t, "rec");
	CHECK(f && f->self == 2 && f->total == 2);
	/* Sorted by self. */
	CHECK_STR(t.fns[0].label, "g");
	CHECK_STR(t.fns[1].label, "f");
	folded_top_release(&t);
	folded_top_release(&t);
}

static void test_labels_with_spaces(void)
{
	struct folded_top t;
	char err[128];

	CHECK(folded_top("<module> (/a b/x.py);f (/a b/x.py:3) 7\n", &t, err,
			 sizeof(err)) == 0);
	CHECK(t.n == 2 && t.samples == 7);
	CHECK(find(&t, "f (/a b/x.py:3)") != NULL);
	folded_top_release(&t);
}

static void test_errors(void)
{
	struct folded_top t;
	char err[128] = "";

	CHECK(folded_top("main;f 3\nmain;g\n", &t, err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "line 2") != NULL);
	/* What came before the bad line is kept. */
	CHECK(t.samples == 3);
	folded_top_release(&t);
	CHECK(folded_top("main;f x3\n", &t, err, sizeof(err)) == -EINVAL);
	folded_top_release(&t);
	CHECK(folded_top("main;f -3\n", &t, err, sizeof(err)) == -EINVAL);
	folded_top_release(&t);
	CHECK(folded_top("", &t, err, sizeof(err)) == 0 && t.n == 0);
	folded_top_release(&t);
}

static void test_split(void)
{
	char func[64], where[64];

	folded_label_split("f (a.py:3)", func, sizeof(func), where,
			   sizeof(where));
	CHECK_STR(func, "f");
	CHECK_STR(where, "a.py:3");
	folded_label_split("Model.forward (x (y).py)", func, sizeof(func),
			   where, sizeof(where));
	CHECK_STR(func, "Model.forward");
	CHECK_STR(where, "x (y).py");
	folded_label_split("(idle)", func, sizeof(func), where, sizeof(where));
	CHECK_STR(func, "(idle)");
	CHECK_STR(where, "");
	folded_label_split("sgemm (libblas.so.3)", func, sizeof(func), where,
			   sizeof(where));
	CHECK_STR(func, "sgemm");
	CHECK_STR(where, "libblas.so.3");
}

TEST_MAIN(test_top, test_labels_with_spaces, test_errors, test_split)
