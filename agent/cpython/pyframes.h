/*
 * pyframes: CPython 3.11 thread states and frames read without the GIL.
 *
 * The one version-specific layer (DESIGN.md): only the module's sources
 * include CPython's internal headers (pyframes.c: thread states and the
 * GIL; pyframes_walk.c: frames; pyframes_code.c: names and line tables;
 * pyframes_leaf.c: the signal handler's read; all through pyframes_mem.c,
 * sharing pyframes_impl.h).  Everything here reads interpreter memory
 * through a safe copy (process_vm_readv on our own pid, or a pipe when
 * that system call is refused), so a thread state or frame freed or
 * overwritten under us yields an error or a wrong-but-bounded answer,
 * never a crash.  No function here calls into Python, takes the GIL,
 * allocates or blocks: they may run on any thread, whether it has a
 * PyThreadState or not, while another thread runs Python.
 *
 * Walks are bounded: PYFRAMES_INTERPS_MAX interpreters, the caller's
 * array sizes, and a step limit that also stops cycles in a list that is
 * being rewritten while we read it.
 *
 * A frame's line is decoded here from the code object's location table
 * (PEP 626/657 format of 3.11, as PyCode_Addr2Line does), or taken from
 * its frame object's f_lineno when a tracer set one, so it is the line
 * PyFrame_GetLineNumber() would give.  Frames that are still being set up
 * (_PyFrame_IsIncomplete) are skipped, as PyThreadState_GetFrame() does.
 */
#ifndef PYFRAMES_H
#define PYFRAMES_H

#include <stddef.h>
#include <stdint.h>

#define PYFRAMES_NAME_MAX 256	/* bytes of a function name, NUL included */
#define PYFRAMES_FILE_MAX 1024	/* bytes of a file name, NUL included */
#define PYFRAMES_INTERPS_MAX 64 /* interpreters walked */
#define PYFRAMES_SKIP_MAX 64	/* incomplete frames skipped per walk */

struct pyframes_thread {
	uint64_t thread_id; /* PyThreadState.thread_id (threading ident) */
	long native_id;	    /* kernel tid, 0 when unknown */
	uintptr_t tstate;   /* address of its PyThreadState, for _walk */
	/* As pyframes_threads() read them (pyframes_walk_raw starts from
	 * these rather than reading the thread state again; 0 unknown). */
	uintptr_t cframe, stack_chunk, stack_top;
};

struct pyframes_frame {
	/* UTF-8; a name longer than its array is cut on a character
	 * boundary and ends in "...". */
	char func[PYFRAMES_NAME_MAX]; /* co_qualname */
	char file[PYFRAMES_FILE_MAX]; /* co_filename */
	int lineno;		      /* -1 when the table has no line */
	uintptr_t code;		      /* code object's address (identity) */
};

/* 0 when Python is initialised and not finalizing, else -ENOENT. */
int pyframes_ready(void);

/*
 * Lists the thread states of every interpreter, newest first within each
 * (the order of PyThreadState_Next).  Fills at most max entries; *n is the
 * number filled.  Returns 0, -ENOENT when Python is not initialised, or
 * -EFAULT when a list could not be read (*n then counts what was read).
 */
int pyframes_threads(struct pyframes_thread *out, size_t max, size_t *n,
		     char *err, size_t errlen);

/*
 * Reads the frames of one thread, innermost first, into out (at most max;
 * *n is the number filled).  *truncated is set when frames remained.  The
 * thread state is re-read and must still belong to t->thread_id, else
 * -ESRCH (it ended and the memory was reused).  Returns 0, -ESRCH, or
 * -EFAULT when a frame, code object or string could not be read (the
 * thread changed its stack under us; retrying usually works); out[0..*n)
 * is valid in every case.
 */
int pyframes_walk(const struct pyframes_thread *t, struct pyframes_frame *out,
		  size_t max, size_t *n, int *truncated, char *err,
		  size_t errlen);

/* The thread holding the GIL now (ceval.gil.locked, last_holder): 0 with
 * *thread_id and *native_id filled, or -ENOENT when it is free or the
 * holder cannot be read. */
int pyframes_gil_holder(uint64_t *thread_id, long *native_id);

/* The ident of the runtime's main thread, 0 when unknown. */
uint64_t pyframes_main_thread(void);

/*
 * The sampler's fast path.  pyframes_walk() reads two strings and a line
 * table per frame; a profiler taking a 50-frame stack a thousand times a
 * second cannot.  pyframes_walk_raw() gives each frame's code object
 * (address and identity) and instruction offset only, reading the frames
 * of the thread's current data-stack chunk in one copy and the code
 * objects' headers in one gathered system call.  The caller caches what it
 * learnt of a code object (pyframes_code_names, pyframes_linetable_copy)
 * under its address, and trusts the cache while the identity fields read
 * now still match (a code object freed and its memory reused shows
 * different name or table pointers).  No tracer line here: a frame's line
 * is always the one of its current instruction.
 */
#define PYFRAMES_RAW_MAX 1024 /* frames per raw walk */

struct pyframes_raw {
	uintptr_t frame;     /* the _PyInterpreterFrame's address */
	uintptr_t code;	     /* code object's address */
	uintptr_t qualname;  /* identity: its co_qualname, co_filename, */
	uintptr_t filename;  /* co_linetable pointers and co_firstlineno; */
	uintptr_t linetable; /* all 0 when trusted (see below) */
	int firstlineno;
	int lasti;	     /* byte offset of the current instruction, -1
				before the first one */
	int is_entry;	     /* the first frame of its C-level eval call:
				one _PyEval_EvalFrameDefault per entry frame */
	int trusted;	     /* the code object was not read: see trust */
};

/*
 * What the caller knows from its previous walk of the same thread: the
 * frames it got, root first.  A frame at the same place from the root,
 * at the same address and with the same code object, is the same frame
 * still running (a frame holds a reference to its code object, which
 * therefore cannot have been freed and replaced): its code object is not
 * read again (pyframes_raw.trusted), only its instruction.  This is what
 * makes a deep stack cheap: only the frames that changed cost a read.
 * Callers should still drop their trust now and then (a second or so),
 * as the walk cannot tell a frame popped and pushed again between two
 * walks with a code object reallocated at the same address.
 */
struct pyframes_trust {
	const uintptr_t *frames, *codes; /* root first */
	size_t n;
};

/* Scratch memory of pyframes_walk_raw (about 300 KiB), so that a walk
 * never allocates.  One per thread that walks. */
struct pyframes_scratch;
struct pyframes_scratch *pyframes_scratch_new(void);
void pyframes_scratch_free(struct pyframes_scratch *s);

/*
 * Like pyframes_walk() without the strings: out[0..*n) innermost first,
 * at most max (<= PYFRAMES_RAW_MAX); trust may be NULL.  t must come from
 * pyframes_threads() just before (its cframe and data stack are used as
 * they were then; a thread that ended since gives -EFAULT or nothing).  Returns 0, -ESRCH (thread gone) or
 * -EFAULT (the stack changed under us; out[0..*n) is still valid).
 */
int pyframes_walk_raw(const struct pyframes_thread *t,
		      struct pyframes_scratch *s,
		      const struct pyframes_trust *trust,
		      struct pyframes_raw *out, size_t max, size_t *n,
		      int *truncated);

/* The names of r's code object, as pyframes_frame's func and file.
 * 0 or -EFAULT. */
int pyframes_code_names(const struct pyframes_raw *r, char *func,
			size_t funclen, char *file, size_t filelen);

/* Copies r's line table into buf (cap bytes); *len is its length.
 * 0, -E2BIG when longer than cap (nothing copied), or -EFAULT. */
int pyframes_linetable_copy(const struct pyframes_raw *r, unsigned char *buf,
			    size_t cap, size_t *len);

/* The line of byte offset lasti in a copied line table (as
 * PyCode_Addr2Line; firstlineno for lasti < 0); -1 when none.  Pure. */
int pyframes_line_decode(const unsigned char *table, size_t len,
			 int firstlineno, int lasti);

/* The same, reading the table in place (for tables too long to copy). */
int pyframes_line_remote(const struct pyframes_raw *r);

/*
 * pyframes_threads() for a caller that lists the threads again and again
 * (the sampler): the list of its previous call (one interpreter, at most
 * 48 threads) is checked in one system call, together with the runtime's
 * state and the GIL, and walked again only when it changed.
 * *gil_tstate is as pyframes_gil_tstate().  Returns 0, -ENOENT (Python
 * not running) or -EFAULT.
 */
int pyframes_threads_fast(struct pyframes_scratch *s,
			  struct pyframes_thread *out, size_t max, size_t *n,
			  uintptr_t *gil_tstate);

/* The thread state holding the GIL now, unchecked (compare it with
 * pyframes_thread.tstate); 0 when the GIL is free or unreadable. */
uintptr_t pyframes_gil_tstate(void);

/* The address range [*lo, *hi) of the GIL's mutexes and condition
 * variables: a thread blocked in futex() on an address in it waits for
 * the GIL. */
void pyframes_gil_range(uintptr_t *lo, uintptr_t *hi);

/*
 * A thread's innermost frames, read by a signal handler running on that
 * thread (the native sampler's hook, native.h), so that they are of the
 * same instant as its native stack.  The caller's walk, later, finds the
 * rest: the frames from `outer` on did not change while the leaf's
 * frames ran (a caller's frame waits at its call), so leaf + the walk
 * from `outer` is the stack of the signal's instant, as long as `outer`
 * is still in the walk (the thread did not return past it meanwhile).
 */
#define PYFRAMES_LEAF_MAX 8

struct pyframes_leaf {
	uint32_t n;	   /* frames in f[], innermost first */
	uint32_t complete; /* the read went through: outer is valid */
	uintptr_t outer;   /* the frame after f[n-1] (its caller); 0: the
			      leaf is the whole stack */
	struct {
		uintptr_t frame, code, prev_instr;
		unsigned char entry, owner;
	} f[PYFRAMES_LEAF_MAX];
};

/*
 * Fills buf (cap bytes, at least sizeof(struct pyframes_leaf)) with the
 * innermost frames of the calling thread, whose kernel id is tid and
 * thread state tstate (as pyframes_threads() listed it: a thread state
 * that is not tid's any more gives complete = 0).  Returns the bytes used
 * (0 when cap is too small).  Async-signal-safe: only process_vm_readv
 * (a raw system call; with the pipe fallback in force, or before any
 * other read of this module, nothing is read), no locks, no allocation;
 * may change errno.  At most PYFRAMES_LEAF_MAX + 2 system calls.
 */
size_t pyframes_leaf_capture(long tid, uintptr_t tstate, void *buf,
			     size_t cap);

/* The leaf's frames as pyframes_walk_raw() gives them (code objects read
 * and checked, incomplete frames skipped), innermost first, at most max.
 * 0 or -EFAULT (a code object that is not one: out[0..*n) still valid). */
int pyframes_leaf_resolve(struct pyframes_scratch *s,
			  const struct pyframes_leaf *l,
			  struct pyframes_raw *out, size_t max, size_t *n);

/* Tests only: 1 forces the pipe fallback used when process_vm_readv is
 * refused (seccomp), 0 goes back to automatic. */
void pyframes_force_pipe(int on);

#endif
