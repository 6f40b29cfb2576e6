/*
 * pyframes: cpython.read for CPython 3.9 to 3.15 (contracts in
 * cpython.h).  Private to agent/cpython: everything else goes through
 * `cpython`.  Included after <Python.h>.
 *
 * The sources: pyframes.c (thread states and the GIL), pyframes_code.c
 * (names and line tables, as each version's PyCode_Addr2Line reads
 * them), the frames of 3.11 on (pyframes_walk.c; pyframes_leaf.c, the
 * signal handler's read) or the frame objects of 3.9 and 3.10
 * (pyframes_fo.c), all through pyframes_mem.c and sharing
 * pyframes_impl.h, which says what moved between versions.
 */
#ifndef PYFRAMES_H
#define PYFRAMES_H

#include "cpython.h"

#define PYFRAMES_INTERPS_MAX 64 /* interpreters walked */
#define PYFRAMES_SKIP_MAX 64	/* incomplete frames skipped per walk */

/* cpython_thread.at[]: the thread's frames as threads() saw them. */
#define AT_CFRAME                                                              \
	0	    /* where its innermost frame's address is (its             \
		       _PyCFrame on 3.11 and 3.12; pyframes_impl.h) */
#define AT_CHUNK 1  /* its data stack's current chunk (3.11 on) */
#define AT_TOP 2    /* and top */

int pyframes_ready(void);
int pyframes_threads(struct cpython_thread *out, size_t max, size_t *n,
		     char *err, size_t errlen);
int pyframes_threads_fast(struct cpython_scratch *s, struct cpython_thread *out,
			  size_t max, size_t *n, uintptr_t *gil_tstate);
int pyframes_walk(const struct cpython_thread *t, struct cpython_frame *out,
		  size_t max, size_t *n, int *truncated, char *err,
		  size_t errlen);
int pyframes_walk_raw(const struct cpython_thread *t, struct cpython_scratch *s,
		      const struct cpython_trust *trust,
		      struct cpython_raw *out, size_t max, size_t *n,
		      int *truncated);
int pyframes_code_names(const struct cpython_raw *r, char *func, size_t funclen,
			char *file, size_t filelen);
int pyframes_linetable_copy(const struct cpython_raw *r, unsigned char *buf,
			    size_t cap, size_t *len);
int pyframes_line_decode(const unsigned char *table, size_t len,
			 int firstlineno, int lasti);
int pyframes_line_remote(const struct cpython_raw *r);
int pyframes_gil_holder(uint64_t *thread_id, long *native_id);
uintptr_t pyframes_gil_tstate(void);
void pyframes_gil_range(uintptr_t *lo, uintptr_t *hi);
uint64_t pyframes_main_thread(void);
struct cpython_scratch *pyframes_scratch_new(void);
void pyframes_scratch_free(struct cpython_scratch *s);
size_t pyframes_leaf_capture(long tid, uintptr_t tstate, void *buf, size_t cap);
int pyframes_leaf_resolve(struct cpython_scratch *s,
			  const struct cpython_leaf *l, struct cpython_raw *out,
			  size_t max, size_t *n);
void pyframes_force_pipe(int on);
/* cpython.read.self_check (pyframes_check.c): GIL held. */
int pyframes_self_check(char *err, size_t errlen);

/* cpython.h (read.named_same); pyframes_code.c. */
int pyframes_named_same(uintptr_t obj, uintptr_t type, size_t field,
			int64_t len, int64_t hash);
/* cpython.h (frame.gen_raw_addr); pyframes_fo.c up to 3.10,
 * pyframes_walk.c from 3.11. */
uintptr_t pyframes_gen_frame_addr(struct _object *gen, struct _object *code);
/* cpython.h (read.learn_layout). */
int pyframes_layout_learn(char *err, size_t errlen);
/* Turns the reader off for good: threads() fails with why. */
void pyframes_disable(const char *why);
/* cpython.read.off_reason. */
const char *pyframes_off_reason(void);
#if PY_VERSION_HEX < 0x030B0000
/* The kernel id of the thread whose pthread_t is ident (3.9 and 3.10 keep
 * none in the thread state: glibc's thread descriptor has it); 0 when
 * unknown.  pyframes_fo.c. */
long pyframes_native_id(unsigned long ident);
/* Finds where glibc keeps the id (from a thread other than the main
 * one): 0, or -ENOENT (ids stay 0). */
int pyframes_native_calibrate(void);
#endif

#endif
