/*
 * pyframes_walk_raw (the sampler's fast walk) against pyframes_walk (the
 * reference): for threads parked in a deep recursion, a generator and a
 * coroutine, the same code objects, names (through pyframes_code_names)
 * and lines (through a copied or an in-place line table), innermost
 * first; a second walk trusting the first reads no code object and
 * gives the same; the frames a trusted walk is told about must match or
 * they are read again.  The leaf (the innermost frames a signal handler
 * reads of its own thread) is the walk's first frames, and its outer
 * frame the next one; for another thread's id it is refused.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpython/pyframes.h"
#include "test.h"

#define FIXTURE FIXTURE_DIR "/fixture_walk.py"
#define MAXF 256

static int compared, deep_seen, leaf_checked;

static void compare_thread(const struct cpython_thread *t,
			   struct cpython_scratch *s)
{
	static struct cpython_frame ref[MAXF];
	static struct cpython_raw raw[MAXF], raw2[MAXF];
	uintptr_t tf[MAXF], tc[MAXF];
	struct cpython_trust trust = {tf, tc, 0};
	size_t nref = 0, nraw = 0, nraw2 = 0;
	int trunc;

	CHECK(pyframes_walk(t, ref, MAXF, &nref, &trunc, NULL, 0) == 0);
	CHECK(pyframes_walk_raw(t, s, NULL, raw, MAXF, &nraw, &trunc) == 0);
	CHECK(nraw == nref);
	for (size_t i = 0; i < nraw && i < nref; i++) {
		char func[CPYTHON_NAME_MAX], file[CPYTHON_FILE_MAX];
		unsigned char lt[1 << 16];
		size_t ltlen = 0;
		int line;

		CHECK(!raw[i].trusted);
		CHECK(raw[i].code == ref[i].code);
		CHECK(pyframes_code_names(&raw[i], func, sizeof(func), file,
					  sizeof(file)) == 0);
		CHECK_STR(func, ref[i].func);
		CHECK_STR(file, ref[i].file);
		CHECK(pyframes_linetable_copy(&raw[i], lt, sizeof(lt),
					      &ltlen) == 0);
		line = pyframes_line_decode(lt, ltlen, raw[i].firstlineno,
					    raw[i].lasti);
		CHECK(line == ref[i].lineno);
		CHECK(pyframes_line_remote(&raw[i]) == ref[i].lineno);
		/* Too small a buffer: refused, nothing copied. */
		if (ltlen > 1)
			CHECK(pyframes_linetable_copy(&raw[i], lt, 1,
						      &ltlen) == -E2BIG);
		if (!strcmp(ref[i].func, "deep"))
			deep_seen++;
	}
	/* The root frame starts its C-level eval call. */
	CHECK(nraw && raw[nraw - 1].eval_entry);
	/* Trusting all of it: nothing is read again, the same comes out. */
	for (size_t pos = 0; pos < nraw; pos++) {
		tf[pos] = raw[nraw - 1 - pos].frame;
		tc[pos] = raw[nraw - 1 - pos].code;
	}
	trust.n = nraw;
	CHECK(pyframes_walk_raw(t, s, &trust, raw2, MAXF, &nraw2, &trunc) ==
	      0);
	CHECK(nraw2 == nraw);
	for (size_t i = 0; i < nraw2 && i < nraw; i++) {
		CHECK(raw2[i].trusted && raw2[i].code == raw[i].code &&
		      raw2[i].lasti == raw[i].lasti &&
		      raw2[i].frame == raw[i].frame);
		CHECK(raw2[i].qualname == 0);
	}
	/* A frame the caller remembers wrongly is not trusted. */
	if (nraw > 2) {
		tc[1] ^= 0x10;
		CHECK(pyframes_walk_raw(t, s, &trust, raw2, MAXF, &nraw2,
					&trunc) == 0);
		CHECK(raw2[nraw - 2].trusted == 0 &&
		      raw2[nraw - 2].qualname == raw[nraw - 2].qualname);
		CHECK(raw2[nraw - 1].trusted == 1);
	}
	compared++;
}

/* The calling thread's leaf against its walk. */
static void check_leaf(const struct cpython_thread *t,
		       struct cpython_scratch *s)
{
	static struct cpython_raw raw[MAXF], lr[CPYTHON_LEAF_MAX];
	struct cpython_leaf leaf;
	size_t nraw = 0, nl = 0;
	int trunc;

	CHECK(pyframes_leaf_capture(t->native_id, t->tstate, &leaf,
				    sizeof(leaf)) == sizeof(leaf));
	CHECK(pyframes_walk_raw(t, s, NULL, raw, MAXF, &nraw, &trunc) == 0);
	CHECK(leaf.complete && leaf.n > 0);
	CHECK(pyframes_leaf_resolve(s, &leaf, lr, CPYTHON_LEAF_MAX, &nl) == 0);
	CHECK(nl == (nraw < CPYTHON_LEAF_MAX ? nraw : CPYTHON_LEAF_MAX));
	for (size_t i = 0; i < nl && i < nraw; i++)
		CHECK(lr[i].frame == raw[i].frame &&
		      lr[i].code == raw[i].code &&
		      lr[i].lasti == raw[i].lasti &&
		      lr[i].eval_entry == raw[i].eval_entry &&
		      lr[i].qualname == raw[i].qualname);
	CHECK(leaf.outer == (nraw > nl ? raw[nl].frame : 0));
	/* Not this thread's state: nothing. */
	CHECK(pyframes_leaf_capture(t->native_id + 1, t->tstate, &leaf,
				    sizeof(leaf)) == sizeof(leaf));
	CHECK(!leaf.complete);
	CHECK(pyframes_leaf_capture(t->native_id, t->tstate, &leaf, 8) == 0);
}

static PyObject *walk_compare(PyObject *m, PyObject *a)
{
	static struct cpython_thread ts[64];
	struct cpython_scratch *s = pyframes_scratch_new();
	struct timespec t0, t1;
	size_t n = 0;

	(void)m;
	(void)a;
	Py_BEGIN_ALLOW_THREADS
	CHECK(pyframes_threads(ts, 64, &n, NULL, 0) == 0);
	/* The cached listing gives the same, walked or checked. */
	for (int k = 0; k < 3; k++) {
		static struct cpython_thread fast[64];
		size_t nf = 0;
		uintptr_t gil = 1;

		CHECK(pyframes_threads_fast(s, fast, 64, &nf, &gil) == 0);
		CHECK(nf == n);
		for (size_t i = 0; i < n && i < nf; i++)
			CHECK(fast[i].tstate == ts[i].tstate &&
			      fast[i].thread_id == ts[i].thread_id &&
			      fast[i].at[AT_CFRAME] == ts[i].at[AT_CFRAME]);
		CHECK(gil == pyframes_gil_tstate());
	}
	for (size_t i = 0; i < n; i++)
		if (ts[i].thread_id != PyThread_get_thread_ident())
			compare_thread(&ts[i], s);
		else if (ts[i].native_id == syscall(SYS_gettid))
			check_leaf(&ts[i], s), leaf_checked++;
	/* The fast path's cost on the 62-frame stack, for the record. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int k = 0; k < 1000; k++) {
		static struct cpython_raw raw[MAXF];
		size_t nraw;
		int trunc;

		uintptr_t gil;

		pyframes_threads_fast(s, ts, 64, &n, &gil);
		for (size_t i = 0; i < n; i++)
			pyframes_walk_raw(&ts[i], s, NULL, raw, MAXF, &nraw,
					  &trunc);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("raw walks of %zu threads: %.1f us each round\n", n,
	       ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
		       1e3 / 1000);
	Py_END_ALLOW_THREADS
	pyframes_scratch_free(s);
	Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
	{"compare", walk_compare, METH_NOARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef walk_module = {
	PyModuleDef_HEAD_INIT, "_walk", NULL, -1, methods,
	NULL, NULL, NULL, NULL,
};

static PyObject *init_walk(void)
{
	return PyModule_Create(&walk_module);
}

static void test_walk_raw(void)
{
	FILE *f;

	PyImport_AppendInittab("_walk", init_walk);
	Py_Initialize();
	f = fopen(FIXTURE, "r");
	CHECK(f != NULL);
	if (f) {
		CHECK(PyRun_SimpleFileEx(f, FIXTURE, 1) == 0);
	}
	CHECK(compared == 3);
	CHECK(leaf_checked == 1);
	CHECK(deep_seen == 61);
	Py_FinalizeEx();
}

TEST_MAIN(test_walk_raw)
