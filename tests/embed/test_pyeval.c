/*
 * pyeval in an embedded interpreter: expressions, statements, blocks,
 * errors of every kind, exits that must not exit, bounded output and
 * values, nested and overlapping evaluations, and the streams restored
 * after each.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pyeval.h"
#include "test.h"

static PyObject *orig_out, *orig_err, *orig_in;

/* Runs code; checks our own part succeeded and the interpreter is left as
 * it was found. */
static void eval(const char *code, struct pyeval_result *r)
{
	char err[128] = "";

	CHECK(pyeval_run(code, r, err, sizeof(err)) == 0);
	CHECK(PyErr_Occurred() == NULL);
	CHECK(PySys_GetObject("stdout") == orig_out);
	CHECK(PySys_GetObject("stderr") == orig_err);
	CHECK(PySys_GetObject("stdin") == orig_in);
	CHECK(r->output != NULL);
}

static int contains(const char *s, const char *part)
{
	return s && strstr(s, part) != NULL;
}

static void test_expression(void)
{
	struct pyeval_result r;

	eval("1 + 2", &r);
	CHECK(r.ok == 1);
	CHECK_STR(r.value, "3");
	CHECK_STR(r.type, "int");
	CHECK_STR(r.output, "");
	CHECK(r.error == NULL);
	pyeval_result_release(&r);

	eval("print('hi')", &r);
	CHECK(r.ok == 1);
	CHECK_STR(r.output, "hi\n");
	CHECK_STR(r.value, "None");
	CHECK_STR(r.type, "NoneType");
	pyeval_result_release(&r);
	CHECK(r.value == NULL && r.output == NULL);
}

static void test_statements(void)
{
	struct pyeval_result r;

	eval("x = 5\nprint(x * 2)", &r);
	CHECK(r.ok == 1);
	CHECK(r.value == NULL);
	CHECK_STR(r.output, "10\n");
	pyeval_result_release(&r);

	/* The namespace is __main__'s and persists. */
	eval("x", &r);
	CHECK_STR(r.value, "5");
	pyeval_result_release(&r);

	eval("for i in range(3):\n    print(i)\n    print('-', i)\n", &r);
	CHECK(r.ok == 1);
	CHECK_STR(r.output, "0\n- 0\n1\n- 1\n2\n- 2\n");
	CHECK(r.value == NULL);
	pyeval_result_release(&r);

	eval("y = 7\nif y:\n    print('yes')\ny * 3", &r);
	CHECK(r.ok == 1);
	CHECK_STR(r.output, "yes\n");
	CHECK_STR(r.value, "21");
	CHECK_STR(r.type, "int");
	pyeval_result_release(&r);

	/* A last expression that is None is not echoed. */
	eval("z = 1\nprint('p')", &r);
	CHECK_STR(r.output, "p\n");
	CHECK(r.value == NULL);
	pyeval_result_release(&r);

	eval("import sys\nprint('e', file=sys.stderr)", &r);
	CHECK_STR(r.output, "e\n");
	pyeval_result_release(&r);

	eval("  x + 1", &r);
	CHECK_STR(r.value, "6");
	pyeval_result_release(&r);

	eval("", &r);
	CHECK(r.ok == 1 && r.value == NULL);
	pyeval_result_release(&r);
}

static void test_errors(void)
{
	struct pyeval_result r;

	eval("1/0", &r);
	CHECK(r.ok == 0);
	CHECK(contains(r.error, "Traceback"));
	CHECK(contains(r.error, "ZeroDivisionError: division by zero"));
	CHECK(r.value == NULL);
	CHECK(r.interrupted == 0);
	pyeval_result_release(&r);

	eval("def f():\n    raise KeyError('k')\nprint('before')\nf()", &r);
	CHECK(r.ok == 0);
	CHECK_STR(r.output, "before\n");
	CHECK(contains(r.error, "KeyError: 'k'"));
	CHECK(contains(r.error, "line 2, in f"));
	CHECK(contains(r.error, "raise KeyError('k')")); /* source shown */
	pyeval_result_release(&r);

	eval("x = (", &r);
	CHECK(r.ok == 0);
	CHECK(contains(r.error, "SyntaxError"));
	pyeval_result_release(&r);

	/* A syntax error in the last line runs nothing. */
	eval("print('no')\n1 +", &r);
	CHECK(r.ok == 0);
	CHECK_STR(r.output, "");
	CHECK(contains(r.error, "SyntaxError"));
	pyeval_result_release(&r);

	eval("class B:\n    def __repr__(self):\n        raise ValueError("
	     "'no')\nB()",
	     &r);
	CHECK(r.ok == 1);
	CHECK_STR(r.value, "<repr failed: ValueError: no>");
	CHECK_STR(r.type, "B");
	pyeval_result_release(&r);

	/* Output of the echoed value's __repr__ is captured too. */
	eval("class P:\n    def __repr__(self):\n        print('in repr')\n"
	     "        return 'P!'\nP()",
	     &r);
	CHECK_STR(r.value, "P!");
	CHECK_STR(r.output, "in repr\n");
	pyeval_result_release(&r);

	eval("input('prompt? ')", &r);
	CHECK(r.ok == 0);
	CHECK(contains(r.error, "EOFError"));
	pyeval_result_release(&r);

	CHECK(pyeval_run(NULL, &r, NULL, 0) == -EINVAL);
}

static void test_exits(void)
{
	const char *codes[] = {"raise SystemExit(3)", "import sys\nsys.exit(2)",
			       "exit()", "quit(5)"};
	struct pyeval_result r;
	PyObject *closed;

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		eval(codes[i], &r);
		CHECK(r.ok == 0);
		CHECK(contains(r.error, "SystemExit"));
		CHECK(r.interrupted == 0);
		pyeval_result_release(&r);
	}
	eval("import sys\nsys.exit(2)", &r);
	CHECK(contains(r.error, "SystemExit: 2"));
	pyeval_result_release(&r);
	/* exit() closes sys.stdin: it must have been our stand-in. */
	closed = PyObject_GetAttrString(orig_in, "closed");
	CHECK(closed == Py_False);
	Py_XDECREF(closed);

	eval("raise KeyboardInterrupt", &r);
	CHECK(r.ok == 0);
	CHECK(r.interrupted == 1);
	CHECK(contains(r.error, "KeyboardInterrupt"));
	pyeval_result_release(&r);
}

static void test_bounds(void)
{
	struct pyeval_result r;
	const char *note = "\n[output truncated]\n";
	size_t n;

	eval("for i in range(300000):\n    print('x' * 9)", &r);
	CHECK(r.ok == 1);
	n = strlen(r.output);
	CHECK(n <= PYEVAL_OUTPUT_MAX);
	CHECK(n > PYEVAL_OUTPUT_MAX - 64);
	CHECK(n >= strlen(note) &&
	      strcmp(r.output + n - strlen(note), note) == 0);
	pyeval_result_release(&r);

	eval("'z' * (1 << 22)", &r);
	CHECK(r.ok == 1);
	CHECK(r.value && strlen(r.value) == PYEVAL_RESULT_MAX);
	CHECK(r.value && strncmp(r.value, "'zzz", 4) == 0);
	CHECK(r.value && strcmp(r.value + strlen(r.value) - 3, "...") == 0);
	pyeval_result_release(&r);

	/* Non-ASCII output and values come back as UTF-8. */
	eval("print('h\\u00e9\\u4e2d\\U0001f600')\n'\\u00e9'", &r);
	CHECK_STR(r.output, "h\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\n");
	CHECK_STR(r.value, "'\xc3\xa9'");
	pyeval_result_release(&r);
}

/* _ev(code) -> (ok, output): pyeval from inside an evaluation. */
static PyObject *ev(PyObject *m, PyObject *arg)
{
	struct pyeval_result r;
	PyObject *res;

	(void)m;
	if (!PyUnicode_Check(arg) ||
	    pyeval_run(PyUnicode_AsUTF8(arg), &r, NULL, 0) < 0)
		return PyErr_Format(PyExc_RuntimeError, "pyeval_run failed");
	res = Py_BuildValue("(is)", r.ok, r.output);
	pyeval_result_release(&r);
	return res;
}

static PyMethodDef ev_def = {"_ev", ev, METH_O, NULL};

static void test_nested(void)
{
	struct pyeval_result r;
	PyObject *fn = PyCFunction_New(&ev_def, NULL);

	PyDict_SetItemString(PyModule_GetDict(PyImport_AddModule("__main__")),
			     "_ev", fn);
	Py_XDECREF(fn);
	eval("print('outer')\ninner = _ev(\"print('inner')\")\n"
	     "print('after')\ninner",
	     &r);
	CHECK(r.ok == 1);
	CHECK_STR(r.output, "outer\nafter\n");
	CHECK_STR(r.value, "(1, 'inner\\n')");
	pyeval_result_release(&r);

	/* Two threads evaluating at once, ending in the other order than
	 * they began: the streams still come back. */
	eval("import threading, time\n"
	     "res = {}\n"
	     "def a():\n"
	     "    res['a'] = _ev('import time\\nprint(1)\\ntime.sleep(0.3)')\n"
	     "def b():\n"
	     "    time.sleep(0.1)\n"
	     "    res['b'] = _ev('import time\\nprint(2)\\ntime.sleep(0.05)')\n"
	     "ts = [threading.Thread(target=a), threading.Thread(target=b)]\n"
	     "for t in ts: t.start()\n"
	     "for t in ts: t.join()\n"
	     "sorted(res)",
	     &r);
	CHECK(r.ok == 1);
	CHECK_STR(r.value, "['a', 'b']");
	pyeval_result_release(&r);

	/* Code that sets sys.stdout itself keeps it. */
	CHECK(pyeval_run("import io, sys\nsys.stdout = io.StringIO()", &r, NULL,
			 0) == 0);
	CHECK(r.ok == 1);
	CHECK(PySys_GetObject("stdout") != orig_out);
	pyeval_result_release(&r);
	PySys_SetObject("stdout", orig_out);
}

static void test_pending_exception_kept(void)
{
	struct pyeval_result r;

	PyErr_SetString(PyExc_RuntimeError, "pending");
	CHECK(pyeval_run("1", &r, NULL, 0) == 0);
	CHECK(r.ok == 1);
	CHECK(PyErr_ExceptionMatches(PyExc_RuntimeError));
	PyErr_Clear();
	pyeval_result_release(&r);
}

static void test_all(void)
{
	Py_Initialize();
	orig_out = PySys_GetObject("stdout");
	orig_err = PySys_GetObject("stderr");
	orig_in = PySys_GetObject("stdin");
	CHECK(orig_out && orig_err && orig_in);
	test_expression();
	test_statements();
	test_errors();
	test_exits();
	test_bounds();
	test_nested();
	test_pending_exception_kept();
	CHECK(Py_FinalizeEx() == 0);
}

TEST_MAIN(test_all)
