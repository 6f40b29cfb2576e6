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

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "pyframes reads CPython 3.11 internals; port it for this version"
#endif

#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_gil.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_pystate.h"
#include "internal/pycore_runtime.h"

#include <stdarg.h>
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

/* The start of _PyRuntime that says whether Python runs and where its
 * interpreters are, read in one go. */
#define RUNTIME_HEAD                                                           \
	(offsetof(_PyRuntimeState, interpreters.head) + sizeof(void *))
#define INTERP_HEAD                                                            \
	(offsetof(PyInterpreterState, threads.head) + sizeof(void *))

#define BULK_MAX (64u << 10) /* bytes of the current data-stack chunk */
#define CODE_HEAD offsetof(PyCodeObject, co_code_adaptive)
#define FRAME_HEAD offsetof(_PyInterpreterFrame, localsplus)
#define GATHER_MAX 512 /* iovecs per process_vm_readv (IOV_MAX 1024) */
#define LIST_CACHE_MAX 48 /* thread states checked in one read */

/* pyframes_walk_raw's copies (pyframes_walk.c) and pyframes_threads_fast's
 * list (pyframes.c): one per thread that walks, never shared. */
struct cpython_scratch {
	unsigned char bulk[BULK_MAX];
	PyCodeObject code[CPYTHON_RAW_MAX]; /* headers only are read */
	uintptr_t codeaddr[CPYTHON_RAW_MAX];
	uintptr_t frameaddr[CPYTHON_RAW_MAX];
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

/* ---- pyframes_walk.c -------------------------------------------------- */

/* s->frameaddr..owner[0..nf) (innermost first) to out: the code objects
 * the caller does not vouch for are read in one gathered call and checked,
 * incomplete frames skipped.  0, or -EFAULT when a code object is not
 * one (out[0..*n) is still valid).  *truncated as pyframes_walk_raw. */
int pyframes_walk_resolve(struct cpython_scratch *s, size_t nf,
			  const struct cpython_trust *trust, int *truncated,
			  struct cpython_raw *out, size_t max, size_t *n);

#endif
