/*
 * The frame walkers on memory that is not a live interpreter's: each must
 * return an error or a bounded answer, never fault (a fault here is the
 * sampler killing the training run it samples).  Cases built by hand from
 * reports, then random arenas with a fixed seed (the libFuzzer target
 * tests/fuzz/fuzz_walk.c explores further with the same harness):
 *
 *   - a torn `previous` pointer near the top of the address space while
 *     the walk copies the data stack in bulk (the bounds check wrapped and
 *     memcpy read 2^64 bytes away: probing-sample segfault at
 *     ffffffffff96aff7);
 *   - a frame whose `previous` is itself (a cycle);
 *   - a code object whose size or line table is absurd;
 *   - line tables whose deltas would overflow an int.
 */
#include "walk_arena.h"

#include "internal/pycore_pystate.h"

#include <errno.h>

#include "cpython/pyframes_mem.h"
#include "test.h"

#define MAXF 64

static struct cpython_raw raw[MAXF];
static struct cpython_frame frames[MAXF];

/* Offsets in the arena of the hand-built stack. */
enum {
	OFF_TSTATE = 0x0000,
	OFF_CFRAME = 0x2000,
	OFF_CHUNK = 0x3000,
	OFF_FRAME = 0x3100,
	OFF_CODE = 0x5000,
	OFF_NAME = 0x6000,
	OFF_TABLE = 0x7000,
	OFF_TOP = 0x4000,
};

/* One complete frame of a real code object's shape at OFF_FRAME whose
 * `previous` is prev; the thread's listing in *t. */
static unsigned char *build_stack(struct cpython_thread *t, uintptr_t prev)
{
	unsigned char *a = arena_fill(NULL, 0);
	_PyInterpreterFrame fr;
	_PyCFrame cf;
	PyCodeObject co;
	PyASCIIObject name;
	PyBytesObject lt;

	memset(&fr, 0, sizeof(fr));
	memset(&cf, 0, sizeof(cf));
	memset(&co, 0, sizeof(co));
	memset(&name, 0, sizeof(name));
	memset(&lt, 0, sizeof(lt));
	co.ob_base.ob_base.ob_type = &PyCode_Type;
	co.ob_base.ob_size = 4;
	co.co_firstlineno = 7;
	co.co_qualname = (PyObject *)arena_at(a, OFF_NAME);
	co.co_filename = (PyObject *)arena_at(a, OFF_NAME);
	co.co_linetable = (PyObject *)arena_at(a, OFF_TABLE);
	memcpy(a + OFF_CODE, &co, offsetof(PyCodeObject, co_code_adaptive));
	name.ob_base.ob_type = &PyUnicode_Type;
	name.length = 1;
	name.state.kind = 1;
	name.state.compact = 1;
	name.state.ascii = 1;
	name.state.ready = 1;
	memcpy(a + OFF_NAME, &name, sizeof(name));
	a[OFF_NAME + sizeof(name)] = 'f';
	lt.ob_base.ob_base.ob_type = &PyBytes_Type;
	lt.ob_base.ob_size = 1;
	memcpy(a + OFF_TABLE, &lt, offsetof(PyBytesObject, ob_sval));
	a[OFF_TABLE + offsetof(PyBytesObject, ob_sval)] = 0x80 | (10 << 3) | 3;
	fr.f_code = (PyCodeObject *)arena_at(a, OFF_CODE);
	fr.previous = (_PyInterpreterFrame *)prev;
	fr.prev_instr = (_Py_CODEUNIT *)(arena_at(a, OFF_CODE) +
					 offsetof(PyCodeObject,
						  co_code_adaptive) +
					 2);
	fr.owner = FRAME_OWNED_BY_THREAD;
	memcpy(a + OFF_FRAME, &fr, offsetof(_PyInterpreterFrame, localsplus));
	cf.current_frame = (_PyInterpreterFrame *)arena_at(a, OFF_FRAME);
	memcpy(a + OFF_CFRAME, &cf, sizeof(cf));
	arena_put(a, OFF_TSTATE + offsetof(PyThreadState, cframe),
		  arena_at(a, OFF_CFRAME));
	arena_put(a, OFF_TSTATE + offsetof(PyThreadState, thread_id), 42);
	memset(t, 0, sizeof(*t));
	t->thread_id = 42;
	t->tstate = arena_at(a, OFF_TSTATE);
	t->at[AT_CFRAME] = arena_at(a, OFF_CFRAME);
	t->at[AT_CHUNK] = arena_at(a, OFF_CHUNK);
	t->at[AT_TOP] = arena_at(a, OFF_TOP);
	return a;
}

/* The report: `previous` torn to just below the top of the address space
 * while the current chunk is copied in bulk.  Before the fix, f + head
 * wrapped below the chunk's top and memcpy read far out of bounds. */
static void test_previous_near_top(void)
{
	struct cpython_scratch *s = pyframes_scratch_new();
	struct cpython_thread t;
	size_t n = 0;
	int trunc;

	for (uintptr_t off = 1; off <= 0x10001; off += 0x1000) {
		build_stack(&t, UINTPTR_MAX - off);
		CHECK(pyframes_walk_raw(&t, s, NULL, raw, MAXF, &n, &trunc) ==
		      -EFAULT);
		CHECK(pyframes_walk(&t, frames, MAXF, &n, &trunc, NULL, 0) ==
		      -EFAULT);
		CHECK(n == 1 && !strcmp(frames[0].func, "f") &&
		      frames[0].lineno == 7);
	}
	/* The same frame ending the stack: a good walk. */
	build_stack(&t, 0);
	CHECK(pyframes_walk_raw(&t, s, NULL, raw, MAXF, &n, &trunc) == 0);
	CHECK(n == 1 && raw[0].lasti == 2 && pyframes_line_remote(&raw[0]) == 7);
	pyframes_scratch_free(s);
}

/* A frame that is its own caller: the walk stops at its step limit. */
static void test_cycle(void)
{
	struct cpython_scratch *s = pyframes_scratch_new();
	struct cpython_thread t;
	unsigned char *a = build_stack(&t, 0);
	size_t n = 0;
	int trunc = 0;

	arena_put(a, OFF_FRAME + offsetof(_PyInterpreterFrame, previous),
		  arena_at(a, OFF_FRAME));
	CHECK(pyframes_walk_raw(&t, s, NULL, raw, MAXF, &n, &trunc) == 0);
	CHECK(n == MAXF && trunc);
	CHECK(pyframes_walk(&t, frames, MAXF, &n, &trunc, NULL, 0) == 0);
	CHECK(n == MAXF && trunc);
	pyframes_scratch_free(s);
}

/* A code object or line table of absurd size: refused. */
static void test_absurd_sizes(void)
{
	struct cpython_scratch *s = pyframes_scratch_new();
	struct cpython_thread t;
	unsigned char *a = build_stack(&t, 0);
	size_t n = 0, len;
	int trunc;
	unsigned char lt[64];

	arena_put(a, OFF_TABLE + offsetof(PyVarObject, ob_size),
		  (uint64_t)PTRDIFF_MAX);
	CHECK(pyframes_walk_raw(&t, s, NULL, raw, MAXF, &n, &trunc) == 0);
	CHECK(n == 1 && pyframes_line_remote(&raw[0]) == -1);
	CHECK(pyframes_linetable_copy(&raw[0], lt, sizeof(lt), &len) ==
	      -EFAULT);
	arena_put(a, OFF_CODE + offsetof(PyVarObject, ob_size),
		  (uint64_t)-1);
	CHECK(pyframes_walk_raw(&t, s, NULL, raw, MAXF, &n, &trunc) ==
	      -EFAULT);
	CHECK(n == 0);
	pyframes_scratch_free(s);
}

/* Line deltas of +-2^23 a code unit: no int overflow (UBSan), no line
 * outside int. */
static void test_line_overflow(void)
{
	static unsigned char t[1 << 16];
	size_t n = 0;
	int line;

	while (n + 6 <= sizeof(t)) {
		t[n++] = 0x80 | (13 << 3); /* no columns, one code unit */
		t[n++] = 0x40 | 0x3E;	   /* svarint +2^23 - 1, 5 bytes */
		t[n++] = 0x7F;
		t[n++] = 0x7F;
		t[n++] = 0x7F;
		t[n++] = 0x0F;
	}
	line = pyframes_line_decode(t, n, INT_MAX - 5, (int)(n / 6 * 2 - 2));
	CHECK(line == -1);
	line = pyframes_line_decode(t, n, INT_MAX - 5, -1);
	CHECK(line == INT_MAX - 5);
}

/* Random arenas, a fixed seed: every walker returns. */
static void test_random(void)
{
	static unsigned char buf[WALK_ARENA_SIZE];
	struct cpython_scratch *s = pyframes_scratch_new();
	uint64_t x = 0x9E3779B97F4A7C15ull;
	unsigned long done = 0;

	for (int round = 0; round < 3000; round++) {
		struct cpython_thread t;
		unsigned char *a;
		size_t n;
		int trunc;

		for (size_t i = 0; i + 8 <= sizeof(buf); i += 8) {
			uint64_t w;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			w = x;
			/* Mostly pointers into the arena and type
			 * pointers, as a torn stack holds. */
			if ((x & 3) != 0)
				w = ((uint64_t)(0xA5 + (x >> 8) % 7) << 56) |
				    ((x >> 16) & 0xFFF8);
			memcpy(buf + i, &w, 8);
		}
		a = arena_fill(buf, sizeof(buf));
		memset(&t, 0, sizeof(t));
		t.tstate = arena_at(a, (x >> 20) % 0x8000 & ~7ull);
		t.at[AT_CFRAME] = arena_at(a, (x >> 24) % 0x8000 & ~7ull);
		t.at[AT_CHUNK] = arena_at(a, (x >> 28) % 0x8000 & ~7ull);
		t.at[AT_TOP] = round % 5 ? arena_at(a, (x >> 32) % 0x10000)
					 : UINTPTR_MAX - (x & 0xFFFF);
		(void)pyframes_walk_raw(&t, s, NULL, raw, MAXF, &n, &trunc);
		for (size_t i = 0; i < n; i++) {
			char func[CPYTHON_NAME_MAX], file[CPYTHON_FILE_MAX];

			(void)pyframes_code_names(&raw[i], func, sizeof(func),
						  file, sizeof(file));
			(void)pyframes_line_remote(&raw[i]);
		}
		memcpy(&t.thread_id,
		       a + (t.tstate - (uintptr_t)a) +
			       offsetof(PyThreadState, thread_id),
		       sizeof(t.thread_id));
		(void)pyframes_walk(&t, frames, MAXF, &n, &trunc, NULL, 0);
		done++;
	}
	CHECK(done == 3000);
	pyframes_scratch_free(s);
}

TEST_MAIN(test_previous_near_top, test_cycle, test_absurd_sizes,
	  test_line_overflow, test_random)
