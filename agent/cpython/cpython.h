/*
 * cpython: the one door to CPython's internals (DESIGN.md, "one
 * version-specific layer").
 *
 * Everything in the agent that must know how an interpreter lays out its
 * thread states, frames, code objects and line tables, how it traces, or
 * where its C API changed between versions, asks through `cpython`, one
 * const struct of operations (as inject_arch is for processors).  Only the
 * files of agent/cpython include Py_BUILD_CORE or internal/pycore_*
 * headers or test PY_VERSION_HEX; scripts/check-layout enforces it.  The
 * agent is built once per CPython version, 3.9 to 3.15 (an extension's
 * ABI is per version), and `cpython` is that version's table.
 *
 * Three groups:
 *
 *  - cpython.read: thread states and frames read WITHOUT the GIL, from any
 *    thread, while another runs Python.  Every read of interpreter memory
 *    is a safe copy (process_vm_readv on our own pid, or a pipe when that
 *    system call is refused), so a thread state or frame freed or
 *    overwritten under us yields an error or a wrong-but-bounded answer,
 *    never a crash.  Nothing there calls into Python, takes a lock,
 *    allocates (but scratch_new) or blocks.  Walks are bounded: a fixed
 *    number of interpreters, the caller's array sizes, and a step limit
 *    that also stops cycles in a list rewritten while we read it.
 *  - cpython.frame: a frame object's variables and place, WITH the GIL.
 *  - cpython.trace: the debugger's trace backend, WITH the GIL: which
 *    Python frames are traced (debugger.h decides what must be; the
 *    backend makes exactly that traced and leaves everything else on
 *    CPython's fast path).
 *
 * A frame's line is always the line PyFrame_GetLineNumber() would give:
 * decoded from the code object's line table at the frame's current
 * instruction, or its frame object's f_lineno when a tracer set one.
 * Frames still being set up are skipped, as PyThreadState_GetFrame()
 * does.
 */
#ifndef CPYTHON_H
#define CPYTHON_H

#include <stddef.h>
#include <stdint.h>

struct _object;	     /* PyObject */
struct _ts;	     /* PyThreadState */
struct _frame;	     /* PyFrameObject */
struct PyCodeObject; /* PyCodeObject */

#define CPYTHON_NAME_MAX 256  /* bytes of a function name, NUL included */
#define CPYTHON_FILE_MAX 1024 /* bytes of a file name, NUL included */
#define CPYTHON_RAW_MAX 1024  /* frames per read.walk_raw */
#define CPYTHON_LEAF_MAX 8    /* frames per read.leaf_capture */

struct cpython_thread {
	uint64_t thread_id; /* PyThreadState.thread_id (threading ident) */
	long native_id;	    /* kernel tid, 0 when unknown */
	uintptr_t tstate;   /* address of its PyThreadState */
	/* The layer's own: where this thread's frames were when
	 * read.threads() listed it (walk_raw starts from there). */
	uintptr_t at[3];
};

struct cpython_frame {
	/* UTF-8; a name longer than its array is cut on a character
	 * boundary and ends in "...". */
	char func[CPYTHON_NAME_MAX]; /* qualified name (3.11 on), else name */
	char file[CPYTHON_FILE_MAX]; /* co_filename */
	int lineno;		     /* -1 when the table has no line */
	uintptr_t code;		     /* code object's address (identity) */
};

/*
 * A frame as the sampler's fast path gives it: no strings.  The caller
 * caches what it learnt of a code object (read.code_names,
 * read.linetable_copy) under its address, and trusts the cache while the
 * identity fields read now still match (a code object freed and its
 * memory reused shows different name or table pointers).
 */
struct cpython_raw {
	uintptr_t frame;     /* the frame's address */
	uintptr_t code;	     /* code object's address */
	uintptr_t qualname;  /* identity: its name, file and line table */
	uintptr_t filename;  /* pointers and first line; all 0 when */
	uintptr_t linetable; /* trusted (see below) */
	int firstlineno;
	int lasti;	/* byte offset of the current instruction, -1
			   before the first one */
	int eval_entry; /* the first frame of a C-level call of the
			   evaluation loop (one native
			   _PyEval_EvalFrameDefault frame per entry) */
	int trusted;	/* the code object was not read: see trust */
};

/*
 * What the caller knows from its previous walk of the same thread: the
 * frames it got, root first.  A frame at the same place from the root,
 * at the same address and with the same code object, is the same frame
 * still running (a frame holds a reference to its code object, which
 * therefore cannot have been freed and replaced): its code object is not
 * read again (cpython_raw.trusted), only its instruction.  This is what
 * makes a deep stack cheap.  Callers should still drop their trust now
 * and then (a second or so): a walk cannot tell a frame popped and pushed
 * again between two walks with a code object reallocated at the same
 * address.
 */
struct cpython_trust {
	const uintptr_t *frames, *codes; /* root first */
	size_t n;
};

/* Scratch memory of walk_raw and threads_fast (a few hundred KiB), so
 * that a walk never allocates.  One per thread that walks. */
struct cpython_scratch;

/*
 * A thread's innermost frames, read by a signal handler running on that
 * thread (the native sampler's hook, native.h), so that they are of the
 * same instant as its native stack.  The caller's walk, later, finds the
 * rest: the frames from `outer` on did not change while the leaf's frames
 * ran (a caller's frame waits at its call), so leaf + the walk from
 * `outer` is the stack of the signal's instant, as long as `outer` is
 * still in the walk (the thread did not return past it meanwhile).
 */
struct cpython_leaf {
	uint32_t n;	   /* frames in f[], innermost first */
	uint32_t complete; /* the read went through: outer is valid */
	uintptr_t outer;   /* the frame after f[n-1] (its caller); 0: the
			      leaf is the whole stack */
	struct {	   /* the layer's own, for read.leaf_resolve */
		uintptr_t frame, code, instr;
		unsigned char entry, owner;
	} f[CPYTHON_LEAF_MAX];
};

/* The debugger's side of the trace backend.  classify(code) returns 1
 * when frames of code must be traced (GIL held; may run Python, must not
 * raise).  trace is called as a Py_tracefunc (PyTrace_LINE, _CALL,
 * _RETURN, _EXCEPTION) for the frames that are traced. */
typedef int (*cpython_classify_fn)(struct _object *code);
typedef int (*cpython_trace_fn)(struct _object *obj, struct _frame *frame,
				int what, struct _object *arg);
/* line_wanted(code, line) returns 1 when a line event at line of code
 * (a wanted one) may stop: a breakpoint is there.  The backend may stop
 * sending the events of the other lines while no thread has a mode
 * (3.12 on: sys.monitoring.DISABLE).  GIL held; must not raise. */
typedef int (*cpython_line_fn)(struct _object *code, int line);

#define CPYTHON_TRACE_NEW 0x1	  /* trace every frame the thread starts */
#define CPYTHON_TRACE_CALLERS 0x2 /* trace every frame control returns to */

struct cpython_read_ops {
	/* 0 when Python is initialised and not finalizing, else -ENOENT. */
	int (*ready)(void);
	/*
	 * Lists the thread states of every interpreter, newest first
	 * within each (the order of PyThreadState_Next).  Fills at most
	 * max; *n is the number filled.  0, -ENOENT when Python is not
	 * initialised, or -EFAULT when a list could not be read in a few
	 * tries (a list seen changing is read again; *n then counts what
	 * the last try read).
	 */
	int (*threads)(struct cpython_thread *out, size_t max, size_t *n,
		       char *err, size_t errlen);
	/*
	 * threads() for a caller that lists them again and again (the
	 * sampler): the list of its previous call (one interpreter, a few
	 * dozen threads) is checked in one system call, together with the
	 * runtime's state and the GIL, and walked again only when it
	 * changed.  *gil_tstate as gil_tstate().  0, -ENOENT or -EFAULT.
	 */
	int (*threads_fast)(struct cpython_scratch *s,
			    struct cpython_thread *out, size_t max, size_t *n,
			    uintptr_t *gil_tstate);
	/*
	 * Reads the frames of one thread, innermost first, into out (at
	 * most max; *n is the number filled); *truncated is set when frames
	 * remained.  The thread state is re-read and must still belong to
	 * t->thread_id, else -ESRCH (it ended and the memory was reused).
	 * 0, -ESRCH, or -EFAULT when a frame, code object or string could
	 * not be read (the thread changed its stack under us; retrying
	 * usually works); out[0..*n) is valid in every case.
	 */
	int (*walk)(const struct cpython_thread *t, struct cpython_frame *out,
		    size_t max, size_t *n, int *truncated, char *err,
		    size_t errlen);
	/*
	 * The sampler's fast path: walk() without the strings, reading a
	 * thread's frames in few copies and the code objects' headers in
	 * one gathered system call.  out[0..*n) innermost first, at most
	 * max (<= CPYTHON_RAW_MAX); trust may be NULL.  t must come from
	 * threads() or threads_fast() just before (a thread that ended
	 * since gives -EFAULT or nothing).  0, -ESRCH (thread gone) or
	 * -EFAULT (the stack changed under us; out[0..*n) still valid).
	 */
	int (*walk_raw)(const struct cpython_thread *t,
			struct cpython_scratch *s,
			const struct cpython_trust *trust,
			struct cpython_raw *out, size_t max, size_t *n,
			int *truncated);
	/* The names of r's code object, as cpython_frame's func and file.
	 * 0 or -EFAULT. */
	int (*code_names)(const struct cpython_raw *r, char *func,
			  size_t funclen, char *file, size_t filelen);
	/* Copies r's line table into buf (cap bytes); *len is its length.
	 * 0, -E2BIG when longer than cap (nothing copied), or -EFAULT. */
	int (*linetable_copy)(const struct cpython_raw *r, unsigned char *buf,
			      size_t cap, size_t *len);
	/* The line of byte offset lasti in a copied line table (as
	 * PyCode_Addr2Line; firstlineno for lasti < 0); -1 when none.
	 * Pure: any bytes give an answer, never a read out of the table. */
	int (*line_decode)(const unsigned char *table, size_t len,
			   int firstlineno, int lasti);
	/* The same, reading r's table in place (for tables too long to
	 * copy). */
	int (*line_remote)(const struct cpython_raw *r);
	/* The thread holding the GIL now: 0 with *thread_id and *native_id
	 * filled, or -ENOENT when it is free or cannot be read. */
	int (*gil_holder)(uint64_t *thread_id, long *native_id);
	/* The thread state holding the GIL now, unchecked (compare it with
	 * cpython_thread.tstate); 0 when free or unreadable. */
	uintptr_t (*gil_tstate)(void);
	/* The address range [*lo, *hi) of the GIL's mutexes and condition
	 * variables: a thread blocked in futex() on an address in it waits
	 * for the GIL. */
	void (*gil_range)(uintptr_t *lo, uintptr_t *hi);
	/* The ident of the runtime's main thread, 0 when unknown. */
	uint64_t (*main_thread)(void);
	struct cpython_scratch *(*scratch_new)(void);
	void (*scratch_free)(struct cpython_scratch *s);
	/*
	 * Fills buf (cap bytes, at least sizeof(struct cpython_leaf)) with
	 * the innermost frames of the calling thread, whose kernel id is tid
	 * and thread state tstate (as threads() listed it: a thread state
	 * that is not tid's any more gives complete = 0).  Returns the bytes
	 * used (0 when cap is too small).  Async-signal-safe: only
	 * process_vm_readv (a raw system call; with the pipe fallback in
	 * force, or before any other read of this layer, nothing is read),
	 * no locks, no allocation; may change errno.  At most
	 * CPYTHON_LEAF_MAX + 2 system calls.
	 */
	size_t (*leaf_capture)(long tid, uintptr_t tstate, void *buf,
			       size_t cap);
	/* The leaf's frames as walk_raw() gives them (code objects read and
	 * checked, incomplete frames skipped), innermost first, at most
	 * max.  0 or -EFAULT (a code object that is not one: out[0..*n)
	 * still valid). */
	int (*leaf_resolve)(struct cpython_scratch *s,
			    const struct cpython_leaf *l,
			    struct cpython_raw *out, size_t max, size_t *n);
	/*
	 * With the GIL held (every other thread waits, its frames still):
	 * compares what this reader reads with what the C API says — the
	 * thread states and every thread's frames (names, files, lines);
	 * on 3.13 and later also the offsets the interpreter publishes for
	 * debuggers (_PyRuntime.debug_offsets) with the compiled ones: where
	 * they differ the reader reads at the interpreter's, and err says
	 * so ("ok: ..."; empty when nothing differs).  On a mismatch it
	 * cannot follow or a comparison that fails (another patch release
	 * or build laid out differently) the reader is turned off for good —
	 * threads() then fails with the reason — and -ENOTSUP is returned
	 * with it.  Once, at start-up.
	 */
	int (*self_check)(char *err, size_t errlen);
	/*
	 * The layout the interpreter publishes (_PyRuntime.debug_offsets,
	 * 3.13 on), learned before the reader's first use, without the GIL:
	 * where it differs from the headers the reader follows it from then
	 * on.  0, or -ENOTSUP with err when it cannot be followed (the
	 * reader is then off for good, as self_check's failure leaves it).
	 * Once, at start-up (self_check does it too when it was not).
	 */
	int (*learn_layout)(char *err, size_t errlen);
	/* Why self_check turned the reader off, or NULL while it is on.
	 * The text stays valid for the life of the process. */
	const char *(*off_reason)(void);
	/* Read without the GIL (obj may have been freed): is obj a live
	 * object of type type whose field at byte offset field holds a str
	 * of len characters with the cached hash hash?  1 or 0; never a
	 * fault. */
	int (*named_same)(uintptr_t obj, uintptr_t type, size_t field,
			  int64_t len, int64_t hash);
	/* Tests only: 1 forces the pipe fallback used when process_vm_readv
	 * is refused (seccomp), 0 goes back to automatic. */
	void (*force_pipe)(int on);
};

struct cpython_frame_ops {
	/* A new reference to a dict of f's local variables as they are
	 * now (PyFrame_GetLocals up to 3.12).  Changing the dict changes
	 * the frame only through locals_write().  NULL with an exception
	 * set on failure. */
	struct _object *(*locals)(struct _frame *f);
	/* A new dict of f's local variables, leaving f as it was (nothing
	 * cached in it that would keep objects alive, nothing written
	 * back): for a frame that runs on.  NULL with an exception set. */
	struct _object *(*locals_copy)(struct _frame *f);
	/* Writes what was changed in locals (from locals()) back into f's
	 * variables.  0, or -1 with an exception set. */
	int (*locals_write)(struct _frame *f, struct _object *locals);
	/* A new reference to f's globals. */
	struct _object *(*globals)(struct _frame *f);
	/* The number of complete frames from f to the bottom of its
	 * thread's stack (f counted): 1 for a thread's outermost frame. */
	int (*depth)(struct _frame *f);
	/* Has f just started (not resumed: a generator's frame that
	 * continues after a yield is not starting)? */
	int (*starting)(struct _frame *f);
	/* A borrowed reference to the name shown for code co's frames:
	 * co_qualname where the version has one (3.11 on), else co_name. */
	struct _object *(*qualname)(struct PyCodeObject *co);
	/* The kernel id of the thread ts, 0 when the version does not
	 * record it and ts is not the calling thread's. */
	unsigned long (*native_id)(struct _ts *ts);
	/*
	 * Is thread state ts complete?  A thread that makes its thread
	 * state without the GIL (PyGILState_Ensure in a C thread, the
	 * agent's own threads starting) lists it under the runtime's lock
	 * only, and one who walks the list with the GIL may see it before
	 * its initialisation ended: on 3.11 and 3.12 its C frame is still
	 * NULL, which PyThreadState_GetFrame() reads.  Walks of the thread
	 * states skip the incomplete ones.  GIL held.
	 */
	int (*thread_complete)(struct _ts *ts);
	/* A new reference to the innermost complete frame of ts, or NULL
	 * (none, or ts not complete).  GIL held: for another thread's
	 * state, use this, never PyThreadState_GetFrame(). */
	struct _frame *(*thread_frame)(struct _ts *ts);
	/* The address read.walk_raw gives the frame of gen (a generator,
	 * coroutine or async generator) while it has one (cpython_raw.frame):
	 * its frame object up to 3.10, the interpreter's frame inside gen
	 * from 3.11 (no frame object made); 0 when it has none, or its frame
	 * does not run code (its code object, checked).  GIL held. */
	uintptr_t (*gen_raw_addr)(struct _object *gen, struct _object *code);
};

struct cpython_trace_ops {
	/* Records the debugger's callbacks (before anything else).
	 * Idempotent. */
	void (*init)(cpython_classify_fn classify, cpython_trace_fn trace,
		     cpython_line_fn line_wanted);
	/* Starts tracing what classify() wants, and a new classification
	 * generation.  0, or with a message: -ENOSPC when the backend's
	 * per-code slot could not be had, -EBUSY when sys.monitoring has no
	 * free tool id (3.12 on: other tools hold them all).  Idempotent. */
	int (*enable)(char *err, size_t errlen);
	int (*enabled)(void);
	/* Turns every trace switch this backend set off again; calls still
	 * on some thread's C stack find it disabled and only undo their own
	 * changes. */
	void (*disable)(void);
	/* The classification of every code object is stale: classify()
	 * will be asked again (after breakpoints changed). */
	void (*invalidate)(void);
	/* Send raised exceptions to trace() (PyTrace_EXCEPTION) on every
	 * thread it manages, traced frame or not. */
	void (*exception_events)(int on);
	/* Sets the mode (CPYTHON_TRACE_* bits, 0 to clear) of one thread,
	 * or of every thread (ts NULL).  0, or -ENOSPC when too many
	 * threads have a mode of their own. */
	int (*set_mode)(struct _ts *ts, int mode);
	/* The mode of thread ts: its own ORed with the global one. */
	int (*mode)(struct _ts *ts);
	/*
	 * Recomputes the tracing of every running frame of thread ts
	 * (traced when the thread's mode asks, or when its code object is
	 * wanted), so that a breakpoint in a loop already running takes
	 * effect at its next line.  When disabled it switches everything of
	 * ours off.  retrace_all() does it for every thread but the agent's
	 * own (skip(native_id) returns 1 for those; may be NULL).
	 */
	void (*retrace)(struct _ts *ts);
	void (*retrace_all)(int (*skip)(long native_id));
	/* Is code wanted (classify's cached answer this generation)? */
	int (*code_wanted)(struct _object *code);
	/* Thread ts (the agent's own, evaluating) is not traced: its trace
	 * function goes (up to 3.11); from 3.12 events are per interpreter
	 * and keep coming: trace() must ignore them. */
	void (*forget)(struct _ts *ts);
	/* In a forked child: the backend is considered disabled (the
	 * parent's debugger session does not exist here). */
	void (*atfork_child)(void);
};

struct cpython {
	const char *version; /* "3.11": the CPython this agent is built for */
	/* 0 when the running interpreter is that version, else -ENOEXEC
	 * with a message (a library loaded into another version by hand).
	 * Needs no GIL; call it before anything else of the table. */
	int (*check)(char *err, size_t errlen);
	/* Py_GetVersion()'s text, copied into out: up to 3.12 that call
	 * rewrites a static buffer each time, and two threads calling it
	 * at once may read it half written; the agent's calls copy it
	 * under one lock.  Needs no GIL. */
	void (*version_text)(char *out, size_t outlen);
	/* Python is finalizing: no new work may start (GIL or not). */
	int (*finalizing)(void);
	/* Calls fn(arg, line) for each line of code object code that has
	 * instructions, in the order of its instructions (a line may come
	 * more than once), until fn returns nonzero.  GIL held.  0, or -1
	 * with an exception set. */
	int (*code_lines)(struct _object *code, int (*fn)(void *arg, int line),
			  void *arg);
	struct cpython_read_ops read;
	struct cpython_frame_ops frame;
	struct cpython_trace_ops trace;
};

extern const struct cpython cpython;

#endif
