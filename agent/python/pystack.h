/*
 * pystack: the Python stacks of every thread, as plain C data.
 *
 * Two ways to take them:
 *  - pystack_take_gil(): the caller holds the GIL.  Public C API; thread
 *    names from `threading`; locals with bounded repr (a repr that raises is
 *    shown as "<repr failed: Type: msg>"; one that runs long is stopped by
 *    pygil's run deadline, see pygil.h).
 *  - pystack_take_nogil(): any thread, GIL not needed (the GIL may be held
 *    by a thread stuck in C).  Reads interpreter memory through
 *    process_vm_readv on our own pid, so a frame freed under us yields an
 *    error, never a crash (py-spy's approach, faulthandler's data).  No
 *    locals; names from /proc/self/task/<tid>/comm.  CPython's internals
 *    are read through cpython.read (cpython.h), the version-specific
 *    layer.
 *
 * Both ways list the same threads in the same order (PyThreadState_Next
 * order, every interpreter), and a thread has the same thread_id,
 * native_id, func, file and lineno in both (file and func are cut to
 * CPYTHON_*_MAX bytes without the GIL, see cpython.h).  A thread that
 * has a thread state but runs no Python (a C thread between calls) has
 * nframes 0.
 *
 * Strings in the result are owned by it; free with pystack_release().
 */
#ifndef PYSTACK_H
#define PYSTACK_H

#include <stddef.h>
#include <stdint.h>

#define PYSTACK_DEPTH_MAX 512      /* frames per thread kept, innermost first */
#define PYSTACK_THREADS_MAX 4096
#define PYSTACK_REPR_DEFAULT 200   /* chars of one local's repr */
#define PYSTACK_REPR_LIMIT (1 << 20) /* the most a caller may ask for */
#define PYSTACK_LOCALS_MAX 256     /* locals per frame */

struct pystack_var {
	char *name;
	char *type;   /* type name, e.g. "int", "Tensor" */
	char *value;  /* bounded repr */
};

struct pystack_frame {
	char *func;       /* qualified name when known (co_qualname) */
	char *file;
	int lineno;
	struct pystack_var *locals;  /* NULL unless asked for */
	size_t nlocals;
};

struct pystack_thread {
	uint64_t thread_id;   /* threading.get_ident() */
	long native_id;       /* kernel tid */
	char *name;
	int daemon;           /* -1 unknown */
	int holds_gil;
	int is_main;
	char state[16];       /* "running", "sleeping", "disk", "stopped", "unknown" */
	struct pystack_frame *frames;  /* innermost first */
	size_t nframes;
	int truncated;        /* deeper than max_depth */
};

struct pystack {
	struct pystack_thread *threads;
	size_t nthreads;
	int with_gil;            /* taken with the GIL (names, locals) */
};

struct pystack_opts {
	int locals;              /* collect locals (GIL path only) */
	size_t max_depth;        /* 0 = PYSTACK_DEPTH_MAX */
	size_t repr_max;         /* 0 = PYSTACK_REPR_DEFAULT */
	const uint64_t *threads; /* only these thread_ids (NULL = all) */
	size_t nthreads;
	const uint64_t *exclude; /* leave these thread_ids out (the agent's
				    own GIL threads); may be NULL */
	size_t nexclude;
};

/*
 * Caller holds the GIL; o may be NULL (defaults).  Returns 0 or -ENOMEM
 * (err filled).  The calling thread is listed with holds_gil 1 when it runs
 * Python code (a Python function called into us); a calling thread with no
 * Python frame (an agent thread inside PyGILState_Ensure) is left out, and
 * then no thread holds_gil.  Thread names and daemon come from
 * threading._active when threading is imported (it is never imported
 * here), else from /proc/self/task/<tid>/comm with daemon -1.
 *
 * Locals: at most PYSTACK_LOCALS_MAX per frame (f_locals order); each value
 * is pystack_repr()'s.  Reprs run Python code, so other threads may run
 * meanwhile: the stacks and the functions' locals are taken first (no
 * Python code runs, the GC is paused), the reprs afterwards; a module or
 * class body's namespace (any mapping) is read then too.  When a repr is
 * stopped by KeyboardInterrupt (pygil's deadline), the values not yet
 * computed are "<interrupted>".  Never leaves an exception set; one set on
 * entry is kept.
 */
int pystack_take_gil(struct pystack *out, const struct pystack_opts *o,
		     char *err, size_t errlen);

/* Any thread, no GIL; o may be NULL (o->locals is ignored).  Returns 0,
 * -ENOMEM, -ENOENT when Python is not initialised, or -ENOTSUP (with the
 * reason) when the start-up check turned GIL-free reading off; threads whose
 * frames could not be read (after a few tries) come back with nframes 0 and
 * state "unknown". */
int pystack_take_nogil(struct pystack *out, const struct pystack_opts *o,
		       char *err, size_t errlen);

/* The thread_id (ident) and native id of the thread holding the GIL right
 * now, read without the GIL; 0 when none or unknown. */
uint64_t pystack_gil_holder(long *native_id);

/* Frees what s owns and zeroes it; safe on a zeroed or released s. */
/* Frees what one thread's entry owns (for callers that filter threads). */
void pystack_thread_release(struct pystack_thread *t);

void pystack_release(struct pystack *s);

struct _object; /* PyObject */

/*
 * The repr of obj as a UTF-8 string of at most max characters (0 =
 * PYSTACK_REPR_DEFAULT, at most PYSTACK_REPR_LIMIT); a longer one is cut
 * and ends in "...".  Its work is bounded too: built-in containers, str,
 * bytes and ints are written only as far as shown, and a large object's
 * own __repr__ is not run (pyrepr.h).  A repr that raises gives "<repr
 * failed: Type: msg>" and *failed 1 (2 when it was KeyboardInterrupt);
 * the error is cleared.  Caller holds the GIL.  Returns a malloc'd string
 * the caller frees, or NULL when out of memory.
 */
char *pystack_repr(struct _object *obj, size_t max, int *failed);

#endif
