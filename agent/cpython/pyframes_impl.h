/*
 * pyframes_impl: what the sources of the pyframes module share (pyframes.c,
 * pyframes_code.c, pyframes_walk.c, cpython_leaf.c).  Private to them:
 * the only files that include CPython's internal headers.
 *
 * Every read of interpreter memory copies it into a local with
 * pyframes_mem_read() (pyframes_mem.h); structures are then used only
 * from those copies.  Pointers found in a copy are checked (type pointers
 * compared with &PyCode_Type / &PyUnicode_Type) before what they point to
 * is trusted.
 */
#ifndef PYFRAMES_IMPL_H
#define PYFRAMES_IMPL_H

#define Py_BUILD_CORE 1
#include <Python.h>

#if PY_VERSION_HEX < 0x03090000 || PY_VERSION_HEX >= 0x03100000
#error "pyframes reads the internals of CPython 3.9 to 3.15"
#endif

#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#else
#include <frameobject.h>
#endif
#include "internal/pycore_gil.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_pystate.h"
#include "internal/pycore_runtime.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "errbuf.h"
#include "pyframes.h"
#include "pyframes_mem.h"

#define CODE_SIZE_MAX (1 << 24) /* code units; larger is garbage */
#define LINETABLE_MAX (1 << 24) /* bytes */
#define STR_CHARS_MAX CPYTHON_FILE_MAX
#define PYFRAMES_THREADS_SCAN 65536 /* thread states looked at, in all */

#define READ_FIELD(dst, base, type, field)                                     \
	pyframes_mem_read(&(dst), (uintptr_t)(base) + offsetof(type, field),   \
			  sizeof(dst))
/* The same, for a field the interpreter may have elsewhere (a field of
 * kind k that it publishes: pyl_off). */
#define READ_FIELD_AT(dst, base, k, type, field)                               \
	pyframes_mem_read(&(dst),                                              \
			  (uintptr_t)(base) + pyl_off(k, offsetof(type, field)), \
			  sizeof(dst))

/* An interpreter's list of thread states (a field of its own up to 3.10). */
#if PY_VERSION_HEX >= 0x030B0000
#define THREADS_HEAD threads.head
#else
#define THREADS_HEAD tstate_head
#endif

/* The field of _PyRuntime that says the interpreter can be read: 3.15
 * sets initialized only once site has imported everything, and a program
 * whose .pth starts the agent (PROBING=1) runs before that; the core is
 * up then, and its thread states in place. */
#if PY_VERSION_HEX >= 0x030F0000
#define RUNTIME_INITIALIZED core_initialized
#else
#define RUNTIME_INITIALIZED initialized
#endif

/* The start of _PyRuntime that says whether Python runs and where its
 * interpreters are, read in one go; of an interpreter, where its next
 * and its threads are.  With some bytes more (both are far larger): a
 * field the interpreter publishes a little further on is in the copy
 * (pyl_moves). */
#define HEAD_SLACK 64
#define RUNTIME_HEAD                                                           \
	(offsetof(_PyRuntimeState, interpreters.head) + sizeof(void *) +       \
	 HEAD_SLACK)
#define INTERP_HEAD                                                            \
	(offsetof(PyInterpreterState, THREADS_HEAD) + sizeof(void *) +         \
	 HEAD_SLACK)

/*
 * The interpreter's own layout where it is not the headers' (3.13 on:
 * _PyRuntime.debug_offsets publishes it; pyframes_check.c compares it
 * with the headers at start-up and fills these).  A patch release or a
 * build with other options may move a field the reader uses: each copy
 * of one of these structures is then rearranged into the headers' layout
 * (pyl_fix) before it is used, and addresses computed from an offset
 * take the interpreter's (pyl_off).  Fields it does not publish are read
 * where the headers have them; the C API comparison that follows tells
 * whether that holds.  Set once, before the reader's first use by
 * another thread; read from signal handlers (pyframes_leaf.c):
 * async-signal-safe.
 */
enum pyl_kind { PYL_RUNTIME, PYL_INTERP, PYL_TSTATE, PYL_FRAME, PYL_CODE,
		PYL_KINDS };
#define PYL_MOVES_MAX 16

struct pyl_move {
	uint16_t ours, theirs; /* offsets in the headers, in the interpreter */
	uint8_t size;	       /* bytes, at most 8 */
};

struct pyl_moves {
	unsigned n; /* 0: as in the headers */
	struct pyl_move m[PYL_MOVES_MAX];
};

extern struct pyl_moves pyl_moves[PYL_KINDS];
extern _Atomic int pyl_on; /* set once the tables are filled */

/* Rearranges buf, len bytes of a kind-k structure copied from the
 * interpreter at the extent the headers give it. */
void pyl_apply(const struct pyl_moves *mv, unsigned char *buf, size_t len);

static inline void pyl_fix(enum pyl_kind k, void *buf, size_t len)
{
	if (atomic_load_explicit(&pyl_on, memory_order_acquire) &&
	    pyl_moves[k].n)
		pyl_apply(&pyl_moves[k], buf, len);
}

/* The interpreter's offset of the field that the headers put at ours. */
static inline size_t pyl_off(enum pyl_kind k, size_t ours)
{
	if (atomic_load_explicit(&pyl_on, memory_order_acquire))
		for (unsigned i = 0; i < pyl_moves[k].n; i++)
			if (pyl_moves[k].m[i].ours == ours)
				return pyl_moves[k].m[i].theirs;
	return ours;
}

/*
 * What moved between versions, as the rest of the module uses it.
 *
 * A thread's innermost frame is found through an anchor, whose address
 * is cpython_thread.at[AT_CFRAME]: its current _PyCFrame (3.11, 3.12),
 * or its thread state's own field (3.9, 3.10: frame; 3.13:
 * current_frame).
 */
#if PY_VERSION_HEX >= 0x030D0000
typedef struct {
	struct _PyInterpreterFrame *current_frame;
} frame_anchor;
#define ANCHOR_OF(at, t)                                                       \
	((at) + pyl_off(PYL_TSTATE, offsetof(PyThreadState, current_frame)))
#elif PY_VERSION_HEX >= 0x030B0000
typedef _PyCFrame frame_anchor;
#define ANCHOR_OF(at, t) ((uintptr_t)(t)->cframe)
#else
typedef struct {
	PyFrameObject *current_frame;
} frame_anchor;
#define ANCHOR_OF(at, t) ((at) + offsetof(PyThreadState, frame))
#endif

/* The kernel's id of a thread (3.11 on: its thread state says). */
#if PY_VERSION_HEX >= 0x030B0000
#define NATIVE_ID(t) ((long)(t)->native_thread_id)
#else
#define NATIVE_ID(t) pyframes_native_id((t)->thread_id)
#endif

/* The GIL of the main interpreter: in the runtime up to 3.11, in the
 * (static) main interpreter from 3.12; atomics in structs up to 3.12. */
#if PY_VERSION_HEX >= 0x030C0000
#define GIL_AT ((uintptr_t)&_PyRuntime._main_interpreter._gil)
#else
#define GIL_AT ((uintptr_t)&_PyRuntime.ceval.gil)
#endif
#if PY_VERSION_HEX >= 0x030D0000
#define GIL_LOCKED(g) ((g).locked)
#define GIL_HOLDER(g) ((uintptr_t)(g).last_holder)
#else
#define GIL_LOCKED(g) ((g).locked._value)
#define GIL_HOLDER(g) ((uintptr_t)(g).last_holder._value)
#endif

#if PY_VERSION_HEX >= 0x030B0000
/*
 * The interpreter's own frames (3.11 on).  FRAME_CODE: the code object
 * (3.13: f_executable, which is None in a shim frame; 3.14: a tagged
 * reference to it); FRAME_INSTR: the
 * instruction whose line the frame is at (3.11, 3.12: prev_instr, the one
 * before the next; 3.13: instr_ptr, the current one); FRAME_SHIM: a frame
 * the C stack owns (3.12 on), which starts a C-level call of the
 * evaluation loop: the frame after it (its callee) is that call's first
 * (3.11 marks that frame itself: is_entry).
 */
#if PY_VERSION_HEX >= 0x030E0000
/* 3.14: a _PyStackRef, its low bits tags (a deferred reference): the
 * object's address with them cleared (objects are 8-aligned). */
#define FRAME_CODE(fr) ((uintptr_t)(fr).f_executable.bits & ~(uintptr_t)3)
#define FRAME_INSTR(fr) ((uintptr_t)(fr).instr_ptr)
#elif PY_VERSION_HEX >= 0x030D0000
#define FRAME_CODE(fr) ((uintptr_t)(fr).f_executable)
#define FRAME_INSTR(fr) ((uintptr_t)(fr).instr_ptr)
#else
#define FRAME_CODE(fr) ((uintptr_t)(fr).f_code)
#define FRAME_INSTR(fr) ((uintptr_t)(fr).prev_instr)
#endif
#if PY_VERSION_HEX >= 0x030E0000
/* 3.14: the evaluation loop's entry frame is FRAME_OWNED_BY_INTERPRETER
 * (3.14 also has FRAME_OWNED_BY_CSTACK, after it; 3.15 not):
 * _PyFrame_IsIncomplete's test. */
#define FRAME_SHIM(fr) ((fr).owner >= FRAME_OWNED_BY_INTERPRETER)
#define FRAME_ENTRY_BYTE(fr) 0
#elif PY_VERSION_HEX >= 0x030C0000
#define FRAME_SHIM(fr) ((fr).owner == FRAME_OWNED_BY_CSTACK)
/* A bool in memory that may be changing under us would be read as a
 * byte; 3.12 has none. */
#define FRAME_ENTRY_BYTE(fr) 0
#else
#define FRAME_SHIM(fr) 0
#define FRAME_ENTRY_BYTE(fr)                                                   \
	(((const unsigned char *)&(                                            \
		 fr))[offsetof(_PyInterpreterFrame, is_entry)] == 1)
#endif

#define BULK_MAX (64u << 10) /* bytes of the current data-stack chunk */
#define CODE_HEAD offsetof(PyCodeObject, co_code_adaptive)
/* Where a code object's instructions start (CODE_HEAD the bytes of its
 * header that are copied). */
#define CODE_FIRST(co) ((co) + pyl_off(PYL_CODE, CODE_HEAD))
#define FRAME_HEAD offsetof(_PyInterpreterFrame, localsplus)
#else
/* Frame objects (3.9, 3.10): each frame is a PyFrameObject on the heap,
 * linked to its caller by f_back; each runs in a C-level call of the
 * evaluation loop of its own. */
#define CODE_HEAD sizeof(PyCodeObject)
#define CODE_FIRST(co) ((co) + CODE_HEAD)
#define FRAME_HEAD offsetof(PyFrameObject, f_blockstack)
#endif
#define GATHER_MAX 512 /* iovecs per process_vm_readv (IOV_MAX 1024) */
#define LIST_CACHE_MAX 48 /* thread states checked in one read */
#define LIST_TRIES 4	  /* reads of a thread list seen changing */

/* pyframes_walk_raw's copies (pyframes_walk.c, pyframes_fo.c) and
 * pyframes_threads_fast's list (pyframes.c): one per thread that walks,
 * never shared. */
struct cpython_scratch {
#if PY_VERSION_HEX >= 0x030B0000
	unsigned char bulk[BULK_MAX];
#endif
	PyCodeObject code[CPYTHON_RAW_MAX]; /* headers only are read */
	uintptr_t codeaddr[CPYTHON_RAW_MAX];
	uintptr_t frameaddr[CPYTHON_RAW_MAX];
	/* 3.11 on: FRAME_INSTR; before: f_lasti in bytes + 1 (0: none) */
	uintptr_t prev_instr[CPYTHON_RAW_MAX];
	uintptr_t gather[CPYTHON_RAW_MAX]; /* code objects to read */
	unsigned char trusted[CPYTHON_RAW_MAX];
	unsigned char entry[CPYTHON_RAW_MAX], owner[CPYTHON_RAW_MAX];
	struct iovec local[GATHER_MAX], remote[GATHER_MAX];
	/* pyframes_threads_fast's list of the previous call (one
	 * interpreter only), checked again in one read. */
	uintptr_t interp, ts[LIST_CACHE_MAX];
	size_t nts;
	PyThreadState tcopy[LIST_CACHE_MAX];
	unsigned char rt[RUNTIME_HEAD], ib[INTERP_HEAD];
	struct _gil_runtime_state gil;
};

/* Which of the frames s->frameaddr/codeaddr[0..nf) (innermost first) the
 * caller vouches for (trust: the same place from the root, same frame,
 * same code; none when the walk was truncated): s->trusted[]; the others'
 * code object headers are read into s->code, in order, with as few
 * system calls as the kernel allows (one that cannot be read is zeroed:
 * its type check then fails).  pyframes_code.c. */
void pyframes_read_untrusted(struct cpython_scratch *s, size_t nf,
			     const struct cpython_trust *trust, int truncated);

/*
 * The start of leaf_capture (pyframes_leaf.c, pyframes_fo.c): l emptied,
 * the head of thread state tstate (len bytes) copied into ts.  The pid to
 * read with, or 0 when nothing can be read from a handler now (no walk on
 * this side yet: its pthread_once is not for a handler; the pipe: too slow
 * here).  Async-signal-safe.
 */
static inline pid_t pyframes_leaf_start(struct cpython_leaf *l,
					uintptr_t tstate, void *ts, size_t len)
{
	pid_t pid = pyframes_mem_pid_known();

	l->n = 0;
	l->complete = 0;
	l->outer = 0;
	if (!pid || pyframes_mem_piped() ||
	    pyframes_mem_read_raw(pid, ts, tstate, len))
		return 0;
	return pid;
}

/* ---- pyframes_code.c: strings and line tables ------------------------- */

/*
 * A location table being read (Objects/locations.md), either a local copy
 * (local) or in place at base, in small chunks as it is scanned.
 */
struct lt_reader {
	uintptr_t base;
	const unsigned char *local; /* a copied table, or NULL */
	size_t len;
	size_t start; /* index of buf[0] */
	size_t have;
	unsigned char buf[256];
};


/* Reads the str at addr into out (cap bytes, cap >= 4) as UTF-8; a
 * string that does not fit is cut and ends in "...".  0 or -EFAULT. */
int pyframes_code_str(uintptr_t addr, char *out, size_t cap);

/* The line of the instruction at byte offset addr, as PyCode_Addr2Line;
 * -1 when it has none (less than -1: a table read while it was
 * replaced). */
int pyframes_code_line(struct lt_reader *rd, int firstlineno, long addr);

/* ---- pyframes_walk.c (3.11 on), pyframes_fo.c (3.9, 3.10) ------------- */

/* s->frameaddr..owner[0..nf) (innermost first) to out: the code objects
 * the caller does not vouch for are read in one gathered call and checked,
 * incomplete frames skipped.  0, or -EFAULT when a code object is not
 * one (out[0..*n) is still valid).  *truncated as pyframes_walk_raw. */
int pyframes_walk_resolve(struct cpython_scratch *s, size_t nf,
			  const struct cpython_trust *trust, int *truncated,
			  struct cpython_raw *out, size_t max, size_t *n);

#endif
