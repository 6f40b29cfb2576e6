/*
 * libFuzzer target for the walkers that read interpreter memory without
 * the GIL (agent/cpython/pyframes*.c; built once per CPython version, with
 * that version's layout): the full walk, the sampler's raw walk
 * (with and without trust), names, line tables copied and in place, the
 * signal handler's leaf capture, and the line-table decoder itself.
 *
 * Input layout: six 8-byte words make the thread as the listing would
 * have given it (thread_id, native_id, tstate, cframe, stack_chunk,
 * stack_top, each relocated as walk_arena.h says); the next 8 bytes are
 * the decoder's firstlineno and lasti; the rest is the arena the walkers
 * read (thread state, frames, code objects, strings, tables), tagged words
 * relocated.  The thread state, when in the arena, is given the thread's
 * ids so the walks get past their first check.
 *
 * An input whose last byte is 0x5A ends with a layout the interpreter
 * would have published (pyframes_impl.h: pyl_moves), in the nine bytes
 * before it: four moves of a frame's and a code object's 8-byte fields
 * (a pair of word offsets each), and where the thread state's native id
 * (the leaf's) is, read at their places.
 *
 * The walkers must return an error or a bounded answer, never fault: a
 * crash here is a target process killed by its sampler.
 */
#include "walk_arena.h"

#include "internal/pycore_pystate.h"

#include "cpython/pyframes_impl.h"
#include "cpython/pyframes_mem.h"

#define MAXF 64

static struct cpython_frame frames[MAXF];
static struct cpython_raw raw[MAXF], raw2[MAXF];
static struct cpython_scratch *scratch;

static uint64_t word(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return w;
}

static void walk_all(const struct cpython_thread *t)
{
	uintptr_t tf[MAXF], tc[MAXF];
	struct cpython_trust trust = {tf, tc, 0};
	struct cpython_leaf leaf;
	size_t n = 0, nr = 0;
	int trunc;
	char err[128];

	(void)pyframes_walk(t, frames, MAXF, &n, &trunc, err, sizeof(err));
	(void)pyframes_walk_raw(t, scratch, NULL, raw, MAXF, &nr, &trunc);
	for (size_t i = 0; i < nr; i++) {
		char func[CPYTHON_NAME_MAX], file[CPYTHON_FILE_MAX];
		unsigned char lt[4096];
		size_t ltlen;

		(void)pyframes_code_names(&raw[i], func, sizeof(func), file,
					  sizeof(file));
		if (pyframes_linetable_copy(&raw[i], lt, sizeof(lt), &ltlen) ==
		    0)
			(void)pyframes_line_decode(lt, ltlen,
						   raw[i].firstlineno,
						   raw[i].lasti);
		(void)pyframes_line_remote(&raw[i]);
		tf[nr - 1 - i] = raw[i].frame;
		tc[nr - 1 - i] = raw[i].code;
	}
	trust.n = nr;
	(void)pyframes_walk_raw(t, scratch, &trust, raw2, MAXF, &n, &trunc);
	if (pyframes_leaf_capture(t->native_id, t->tstate, &leaf,
				  sizeof(leaf)) == sizeof(leaf))
		(void)pyframes_leaf_resolve(scratch, &leaf, raw, MAXF, &n);
}

/* The layout the input asks for (its last byte 0x5A), or the headers';
 * the input's size without it. */
static size_t layout_from(const uint8_t *data, size_t size)
{
	const uint8_t *m;

	atomic_store(&pyl_on, 0);
	memset(pyl_moves, 0, sizeof(pyl_moves));
	if (size < 56 + 10 || data[size - 1] != 0x5A)
		return size;
	size -= 10;
	m = data + size;
	for (int i = 0; i < 4; i++) {
		enum pyl_kind k = i < 2 ? PYL_FRAME : PYL_CODE;
		size_t ext = k == PYL_FRAME ? FRAME_HEAD : CODE_HEAD;
		struct pyl_moves *mv = &pyl_moves[k];

		mv->m[mv->n++] = (struct pyl_move){
			(uint16_t)((size_t)m[2 * i] * 8 % ext),
			(uint16_t)((size_t)m[2 * i + 1] * 8 % ext), 8};
	}
#if PY_VERSION_HEX >= 0x030B0000
	/* Anywhere up to past the thread state: the leaf refuses what it
	 * would not have copied. */
	pyl_moves[PYL_TSTATE].m[0] = (struct pyl_move){
		(uint16_t)offsetof(PyThreadState, native_thread_id),
		(uint16_t)((sizeof(PyThreadState) + 64) * m[8] / 255),
		sizeof(unsigned long)};
	pyl_moves[PYL_TSTATE].n = 1;
#endif
	atomic_store(&pyl_on, 1);
	return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cpython_thread t;
	unsigned char *a;
	int32_t firstlineno, lasti;

	if (size < 56)
		return 0;
	size = layout_from(data, size);
	if (!scratch) {
		unsigned char probe;

		scratch = pyframes_scratch_new();
		/* The leaf capture reads nothing before a first read. */
		(void)pyframes_mem_read(&probe, (uintptr_t)&probe, 1);
	}
	a = arena_fill(data + 56, size - 56);
	if (!scratch || !a)
		return 0;
	t.thread_id = arena_reloc(a, word(data));
	t.native_id = (long)arena_reloc(a, word(data + 8));
	t.tstate = arena_reloc(a, word(data + 16));
	t.at[AT_CFRAME] = arena_reloc(a, word(data + 24));
	t.at[AT_CHUNK] = arena_reloc(a, word(data + 32));
	t.at[AT_TOP] = arena_reloc(a, word(data + 40));
	if (t.tstate >= (uintptr_t)a &&
	    t.tstate - (uintptr_t)a <= WALK_ARENA_SIZE - sizeof(PyThreadState)) {
		size_t at = t.tstate - (uintptr_t)a;

		arena_put(a, at + offsetof(PyThreadState, thread_id),
			  t.thread_id);
#if PY_VERSION_HEX >= 0x030B0000
		arena_put(a, at + offsetof(PyThreadState, native_thread_id),
			  (uint64_t)t.native_id);
#endif
	}
	walk_all(&t);
	memcpy(&firstlineno, data + 48, 4);
	memcpy(&lasti, data + 52, 4);
	(void)pyframes_line_decode(data + 56, size - 56, firstlineno, lasti);
	return 0;
}
