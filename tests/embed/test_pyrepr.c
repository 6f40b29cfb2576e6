/*
 * pyrepr in an embedded interpreter: the bounded repr is repr() wherever
 * nothing is cut (a differential check over built-in values, nested,
 * recursive, subclassed, with odd characters), repr()'s first max - 3
 * characters and "..." where it is, and its work stays of the order of
 * what it shows: a 256 MiB bytearray, a 20M-item list, a huge int and a
 * large object whose own __repr__ would build everything are shown with
 * little time and no memory growth.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <time.h>

#include "python/pyrepr.h"
#include "test.h"

/* Values to compare: built in a namespace by this code. */
static const char *const values_src =
	"import collections\n"
	"class L(list): pass\n"
	"class D(dict): pass\n"
	"class S(set): pass\n"
	"class F(frozenset): pass\n"
	"class B(bytearray): pass\n"
	"class T(tuple): pass\n"
	"class U(str): pass\n"
	"class I(int): pass\n"
	"class R:\n"
	"    def __repr__(self): return 'R<\\u00e9\\U0001f600>'\n"
	"rec = [1, 2]\n"
	"rec.append(rec)\n"
	"drec = {'a': 1}\n"
	"drec['self'] = drec\n"
	"values = [\n"
	"    [], (), {}, set(), frozenset(), bytearray(), b'', '', 0,\n"
	"    [1, 'two', 3.0, None, True], (1,), (1, 2), {'a': [1, {2: 3}]},\n"
	"    {1, 2, 3}, frozenset({'x'}), S(), S({1}), F({2}), F(),\n"
	"    bytearray(b'ab\\x00\\xff\"\\''), B(b'q'), b'\\'\"', 'it\\'s \"q\"',\n"
	"    '\\u00e9\\U0001f600\\ud800', U('u'), I(7), 2 ** 200, -(2 ** 70),\n"
	"    L([1, L([2])]), D(a=D(b=1)), T((1, 2)), rec, drec, [rec, rec],\n"
	"    R(), [R(), {R(): R()}],\n"
	"    collections.OrderedDict(a=1), collections.deque([1, 2]),\n"
	"    {'k': (1, [2, {3}])}, [0.1, 1e300, float('nan')],\n"
	"]\n"
	"deep = [[[[[[[[[1]]]]]]]]]\n"
	"quoted = [i for i, v in enumerate(values)\n"
	"          if isinstance(v, (str, bytes, bytearray))\n"
	"          and any(q in v for q in ((\"'\", '\"') if isinstance(v, str)\n"
	"                                   else (b\"'\", b'\"')))]\n";

static PyObject *ns;

static PyObject *get(const char *name)
{
	return PyDict_GetItemString(ns, name);
}

static void check_same(PyObject *v)
{
	PyObject *want = PyObject_Repr(v), *got = pyrepr_bounded(v, 1 << 20);

	CHECK(want && got);
	if (want && got && PyUnicode_Compare(want, got) != 0) {
		test_failures++;
		fprintf(stderr, "repr %s != bounded %s\n",
			PyUnicode_AsUTF8(want), PyUnicode_AsUTF8(got));
	}
	Py_XDECREF(want);
	Py_XDECREF(got);
	PyErr_Clear();
}

static void test_same_as_repr(void)
{
	PyObject *values = get("values");

	CHECK(values && PyList_Check(values));
	for (Py_ssize_t i = 0; values && i < PyList_GET_SIZE(values); i++) {
		check_same(PyList_GET_ITEM(values, i));
	}
}

/* Every value cut at every length from 4 to its repr's: the repr's first
 * max - 3 characters and "...", or the whole repr when it fits. */
static void test_cut(void)
{
	PyObject *values = get("values");

	for (Py_ssize_t i = 0; values && i < PyList_GET_SIZE(values); i++) {
		PyObject *v = PyList_GET_ITEM(values, i);
		PyObject *want = PyObject_Repr(v);
		Py_ssize_t n = want ? PyUnicode_GET_LENGTH(want) : 0;

		/* A cut str or bytes is the repr of its first characters,
		 * whose quotes are chosen by what they hold: alike only
		 * when no quote is in the value. */
		PyObject *ix = PyLong_FromSsize_t(i);

		if (ix && PySequence_Contains(get("quoted"), ix) == 1)
			n = 0;
		Py_XDECREF(ix);
		for (long max = 4; max <= n + 1; max++) {
			PyObject *got = pyrepr_bounded(v, max), *exp;

			if (n <= max)
				exp = want, Py_INCREF(exp);
			else {
				PyObject *h = PyUnicode_Substring(want, 0,
								  max - 3);
				exp = PyUnicode_FromFormat("%U...", h);
				Py_XDECREF(h);
			}
			CHECK(got && exp);
			if (got && exp && PyUnicode_Compare(got, exp) != 0) {
				test_failures++;
				fprintf(stderr, "max %ld: %s != %s\n", max,
					PyUnicode_AsUTF8(got),
					PyUnicode_AsUTF8(exp));
				max = n + 2;
			}
			Py_XDECREF(got);
			Py_XDECREF(exp);
		}
		Py_XDECREF(want);
	}
	PyErr_Clear();
}

static void test_deep(void)
{
	PyObject *got = pyrepr_bounded(get("deep"), 200);

	CHECK(got);
	CHECK_STR(got ? PyUnicode_AsUTF8(got) : NULL, "[[[[[[[...]]]]]]]");
	Py_XDECREF(got);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* name's bounded repr in 200 characters: its text's start, and that it
 * took no time to speak of (a whole repr takes seconds) and no memory. */
static void check_large(const char *name, const char *start)
{
	PyObject *v = get(name), *got;
	long before = rss_kb(), after;
	double t = now();

	got = pyrepr_bounded(v, 200);
	t = now() - t;
	after = rss_kb();
	CHECK(got);
	if (!got) {
		PyErr_Print();
		return;
	}
	CHECK(PyUnicode_GET_LENGTH(got) <= 200);
	if (strncmp(PyUnicode_AsUTF8(got), start, strlen(start)) != 0) {
		test_failures++;
		fprintf(stderr, "%s: %s does not start with %s\n", name,
			PyUnicode_AsUTF8(got), start);
	}
	/* Generous: the whole repr takes seconds and gigabytes. */
	CHECK(t < 0.5);
	CHECK(after - before < 16 * 1024);
	Py_DECREF(got);
}

static const char *const large_src =
	"import sys\n"
	"big_bytes = bytearray(256 << 20)\n"
	"big_list = [0] * 20000000\n"
	"big_nested = [big_bytes, {'k': big_list}]\n"
	"big_str = 'x' * (64 << 20)\n"
	"if hasattr(sys, 'set_int_max_str_digits'):\n"
	"    sys.set_int_max_str_digits(0)\n"
	"big_int = 7 ** 2000000\n"
	"class Big:\n"
	"    def __init__(self): self.items = big_list\n"
	"    def __len__(self): return len(self.items)\n"
	"    def __repr__(self): return 'Big(%r)' % (self.items,)\n"
	"big_user = Big()\n";

static void test_large(void)
{
	CHECK(PyRun_String(large_src, Py_file_input, ns, ns) != NULL);
	PyErr_Print();
	check_large("big_bytes", "bytearray(b'\\x00\\x00");
	check_large("big_list", "[0, 0, 0");
	check_large("big_nested", "[bytearray(b'\\x00");
	check_large("big_str", "'xxxx");
	check_large("big_int", "<int of 5614710 bits>");
	check_large("big_user", "<Big of 20000000 items>");
}

/* A __repr__ that raises: NULL with its exception. */
static void test_raises(void)
{
	PyObject *v;

	CHECK(PyRun_String("class Bad:\n"
			   "    def __repr__(self): raise ValueError('no')\n"
			   "bad = [1, Bad()]\n",
			   Py_file_input, ns, ns) != NULL);
	v = get("bad");
	CHECK(v && pyrepr_bounded(v, 100) == NULL);
	CHECK(PyErr_ExceptionMatches(PyExc_ValueError));
	PyErr_Clear();
}

static void test_start(void)
{
	PyObject *r;

	Py_Initialize();
	ns = PyDict_New();
	PyDict_SetItemString(ns, "__builtins__", PyEval_GetBuiltins());
	r = PyRun_String(values_src, Py_file_input, ns, ns);
	if (!r)
		PyErr_Print();
	CHECK(r != NULL);
	Py_XDECREF(r);
}

TEST_MAIN(test_start, test_same_as_repr, test_cut, test_deep, test_large,
	  test_raises)
