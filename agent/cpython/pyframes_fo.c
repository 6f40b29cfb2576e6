/*
 * pyframes_fo: a thread's frames, read without the GIL, on CPython 3.9 and
 * 3.10, where every frame is a frame object (PyFrameObject) on the heap:
 * the thread state's `frame` is the innermost, each frame's f_back its
 * caller, and each runs in a C-level call of the evaluation loop of its
 * own (every frame is an eval_entry).  The full walk, the sampler's raw
 * one and the signal handler's leaf.  Part of the pyframes module
 * (pyframes.h, pyframes_impl.h); 3.11 on is pyframes_walk.c and
 * pyframes_leaf.c.
 *
 * A frame's line is PyFrame_GetLineNumber's: the f_lineno a tracer keeps
 * (3.9: while the frame has f_trace; 3.10: when not 0), else the line
 * table at f_lasti (3.9: a byte offset; 3.10: an instruction index).
 */
#include "pyframes_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if PY_VERSION_HEX >= 0x030B0000
#error "pyframes_fo.c reads the frame objects of 3.9 and 3.10"
#endif

#if PY_VERSION_HEX >= 0x030A0000
#define LASTI_BYTES(fr) ((long)(fr).f_lasti * (long)sizeof(_Py_CODEUNIT))
#define TRACER_LINE(fr) ((fr).f_lineno)
#define CODE_LINETABLE(co) ((uintptr_t)(co).co_linetable)
#else
#define LASTI_BYTES(fr) ((long)(fr).f_lasti)
#define TRACER_LINE(fr) ((fr).f_trace ? (fr).f_lineno : 0)
#define CODE_LINETABLE(co) ((uintptr_t)(co).co_lnotab)
#endif
#define LASTI_MAX ((long)CODE_SIZE_MAX * 2) /* bytes; more is garbage */

/*
 * Kernel thread ids.  3.9 and 3.10 record none in the thread state; glibc
 * keeps one in each thread's descriptor (struct pthread, where pthread_t,
 * the thread state's thread_id, points), at an offset of its own version.
 * It is found once (at start-up, cpython.read.self_check, from an agent
 * thread): an offset where the calling thread's descriptor holds its id
 * and the main thread's holds the process id.
 */
#define DESCRIPTOR_SCAN 2048 /* bytes of a descriptor looked at */
#define TID_UNKNOWN (-1)     /* not looked for yet */
#define TID_NONE (-2)	     /* looked for, not found */

static atomic_long tid_offset = TID_UNKNOWN;

static long find_tid_offset(void)
{
	unsigned char mine[DESCRIPTOR_SCAN], main_d[DESCRIPTOR_SCAN];
	pid_t me = (pid_t)syscall(SYS_gettid), pid = getpid();
	unsigned long main_ident = 0;
	long found = TID_NONE;

	/* From the main thread the two cannot be told apart: later. */
	if (me == pid)
		return TID_UNKNOWN;
	if (READ_FIELD(main_ident, &_PyRuntime, _PyRuntimeState, main_thread) ||
	    !main_ident)
		return TID_UNKNOWN;
	if (pyframes_mem_read(mine, (uintptr_t)pthread_self(), sizeof(mine)) ||
	    pyframes_mem_read(main_d, main_ident, sizeof(main_d)))
		return TID_UNKNOWN;
	for (size_t off = 0; off + sizeof(pid_t) <= DESCRIPTOR_SCAN;
	     off += sizeof(pid_t)) {
		pid_t a, b;

		memcpy(&a, mine + off, sizeof(a));
		memcpy(&b, main_d + off, sizeof(b));
		if (a == me && b == pid) {
			found = (long)off;
			break;
		}
	}
	/* Racing callers find the same. */
	atomic_store_explicit(&tid_offset, found, memory_order_relaxed);
	return found;
}

int pyframes_native_calibrate(void)
{
	long off = atomic_load_explicit(&tid_offset, memory_order_relaxed);

	if (off == TID_UNKNOWN)
		off = find_tid_offset();
	return off >= 0 ? 0 : -ENOENT;
}

long pyframes_native_id(unsigned long ident)
{
	long off = atomic_load_explicit(&tid_offset, memory_order_relaxed);
	pid_t tid = 0;

	if (off == TID_UNKNOWN)
		off = find_tid_offset();
	if (off < 0 || !ident ||
	    pyframes_mem_read(&tid, (uintptr_t)ident + (uintptr_t)off,
			      sizeof(tid)))
		return 0;
	return tid > 0 ? (long)tid : 0;
}

/* Is the copy co a code object?  (Its type is the only field that
 * tells; the rest is checked where it is used.) */
static int is_code(const PyCodeObject *co)
{
	return co->ob_base.ob_type == &PyCode_Type;
}

/* The line of frame fr (a copy) of code object co (a copy). */
static int frame_line(const PyFrameObject *fr, const PyCodeObject *co)
{
	PyBytesObject lt;
	int line;

	if (TRACER_LINE(*fr) > 0)
		return TRACER_LINE(*fr);
	if (pyframes_mem_read(&lt, CODE_LINETABLE(*co),
			      offsetof(PyBytesObject, ob_sval)) ||
	    lt.ob_base.ob_base.ob_type != &PyBytes_Type ||
	    lt.ob_base.ob_size < 0 || lt.ob_base.ob_size > LINETABLE_MAX)
		return -1;
	struct lt_reader rd = {
		.base = CODE_LINETABLE(*co) + offsetof(PyBytesObject, ob_sval),
		.len = (size_t)lt.ob_base.ob_size,
	};
	line = pyframes_code_line(
		&rd, co->co_firstlineno,
		LASTI_BYTES(*fr) > LASTI_MAX ? -1 : LASTI_BYTES(*fr));
	return line < -1 ? -1 : line;
}

int pyframes_walk(const struct cpython_thread *t, struct cpython_frame *out,
		  size_t max, size_t *n, int *truncated, char *err,
		  size_t errlen)
{
	PyThreadState ts;
	frame_anchor cf;
	uintptr_t f;
	size_t steps = 0;

	*n = 0;
	*truncated = 0;
	if (pyframes_mem_read(&ts, t->tstate, sizeof(ts)) ||
	    ts.thread_id != t->thread_id) {
		errbuf_set(err, errlen, "thread %llu is gone",
			   (unsigned long long)t->thread_id);
		return -ESRCH;
	}
	if (pyframes_mem_read(&cf, ANCHOR_OF(t->tstate, &ts), sizeof(cf)))
		goto fault;
	f = (uintptr_t)cf.current_frame;
	while (f) {
		PyFrameObject fr;
		PyCodeObject co;
		struct cpython_frame *o;

		if (steps++ >= max || *n == max) {
			*truncated = 1;
			break;
		}
		if (pyframes_mem_read(&fr, f, FRAME_HEAD) ||
		    fr.ob_base.ob_base.ob_type != &PyFrame_Type ||
		    pyframes_mem_read(&co, (uintptr_t)fr.f_code, CODE_HEAD) ||
		    !is_code(&co))
			goto fault;
		o = &out[*n];
		if (pyframes_code_str((uintptr_t)co.co_name, o->func,
				      sizeof(o->func)) ||
		    pyframes_code_str((uintptr_t)co.co_filename, o->file,
				      sizeof(o->file)))
			goto fault;
		o->code = (uintptr_t)fr.f_code;
		o->lineno = frame_line(&fr, &co);
		(*n)++;
		f = (uintptr_t)fr.f_back;
	}
	return 0;
fault:
	errbuf_set(err, errlen, "frames of thread %llu changed while read",
		   (unsigned long long)t->thread_id);
	return -EFAULT;
}

/*
 * The sampler's fast path: the frames one read each, the code objects the
 * caller does not vouch for in one gathered read.  s->prev_instr holds
 * each frame's f_lasti in bytes (as an intptr_t; negative before the
 * first instruction).
 */

/* See pyframes_impl.h: s->frameaddr..prev_instr[0..nf) to out. */
int pyframes_walk_resolve(struct cpython_scratch *s, size_t nf,
			  const struct cpython_trust *trust, int *truncated,
			  struct cpython_raw *out, size_t max, size_t *n)
{
	int rc = 0;

	pyframes_read_untrusted(s, nf, trust, *truncated);
	for (size_t i = 0, g = 0; i < nf; i++) {
		const PyCodeObject *co = s->trusted[i] ? NULL : &s->code[g++];
		intptr_t lasti = (intptr_t)s->prev_instr[i];
		struct cpython_raw *r;

		if (co && !is_code(co)) {
			rc = -EFAULT;
			break;
		}
		if (*n == max) {
			*truncated = 1;
			break;
		}
		r = &out[(*n)++];
		memset(r, 0, sizeof(*r));
		r->frame = s->frameaddr[i];
		r->code = s->codeaddr[i];
		r->eval_entry = 1;
		r->trusted = !co;
		if (co) {
			r->qualname = (uintptr_t)co->co_name;
			r->filename = (uintptr_t)co->co_filename;
			r->linetable = CODE_LINETABLE(*co);
			r->firstlineno = co->co_firstlineno;
		}
		r->lasti = lasti < 0 || lasti > LASTI_MAX ? -1 : (int)lasti;
	}
	return rc;
}

int pyframes_walk_raw(const struct cpython_thread *t, struct cpython_scratch *s,
		      const struct cpython_trust *trust,
		      struct cpython_raw *out, size_t max, size_t *n,
		      int *truncated)
{
	frame_anchor cf;
	uintptr_t f;
	size_t nf = 0;
	int rc = 0;

	*n = 0;
	*truncated = 0;
	if (max > CPYTHON_RAW_MAX)
		max = CPYTHON_RAW_MAX;
	if (!t->at[AT_CFRAME])
		return 0;
	if (pyframes_mem_read(&cf, t->at[AT_CFRAME], sizeof(cf)))
		return -EFAULT;
	f = (uintptr_t)cf.current_frame;
	while (f) {
		PyFrameObject fr;

		if (nf == max) {
			*truncated = 1;
			break;
		}
		if (pyframes_mem_read(&fr, f, FRAME_HEAD) ||
		    fr.ob_base.ob_base.ob_type != &PyFrame_Type) {
			rc = -EFAULT;
			break;
		}
		s->frameaddr[nf] = f;
		s->codeaddr[nf] = (uintptr_t)fr.f_code;
		s->prev_instr[nf] = (uintptr_t)(intptr_t)LASTI_BYTES(fr);
		nf++;
		f = (uintptr_t)fr.f_back;
	}
	return pyframes_walk_resolve(s, nf, trust, truncated, out, max, n)
		       ? -EFAULT
		       : rc;
}

/*
 * The leaf, from a signal handler on the thread itself.
 * ASYNC-SIGNAL-SAFE: pyframes_mem_read_raw, copies onto the stack and into
 * the caller's buffer, pthread_self(); nothing else may be added.
 */
size_t pyframes_leaf_capture(long tid, uintptr_t tstate, void *buf, size_t cap)
{
	struct cpython_leaf *l = buf;
	unsigned char
		ts[offsetof(PyThreadState, thread_id) + sizeof(unsigned long)];
	unsigned long ident;
	frame_anchor cf;
	uintptr_t f;
	pid_t pid;

	(void)tid;
	if (cap < sizeof(*l))
		return 0;
	pid = pyframes_leaf_start(l, tstate, ts, sizeof(ts));
	if (!pid)
		return sizeof(*l);
	memcpy(&ident, ts + offsetof(PyThreadState, thread_id), sizeof(ident));
	/* The thread state must be this thread's (no kernel id in it:
	 * its pthread_t). */
	if (ident != (unsigned long)pthread_self() ||
	    pyframes_mem_read_raw(pid, &cf, ANCHOR_OF(tstate, NULL),
				  sizeof(cf)))
		return sizeof(*l);
	f = (uintptr_t)cf.current_frame;
	while (f && l->n < CPYTHON_LEAF_MAX) {
		PyFrameObject fr;

		if (pyframes_mem_read_raw(pid, &fr, f, FRAME_HEAD))
			return sizeof(*l);
		l->f[l->n].frame = f;
		l->f[l->n].code = (uintptr_t)fr.f_code;
		l->f[l->n].instr = (uintptr_t)(intptr_t)LASTI_BYTES(fr);
		l->f[l->n].entry = 1;
		l->f[l->n].owner = 0;
		l->n++;
		f = (uintptr_t)fr.f_back;
	}
	l->outer = f;
	l->complete = 1;
	return sizeof(*l);
}

uintptr_t pyframes_gen_frame_addr(struct _object *gen, struct _object *code)
{
	/* The GIL is held: gen and its frame object stay as they are. */
	PyFrameObject *f = ((PyGenObject *)gen)->gi_frame;

	return f && (PyObject *)f->f_code == code ? (uintptr_t)f : 0;
}
