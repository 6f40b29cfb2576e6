/*
 * pyframes: CPython 3.11 internals, read safely.  See pyframes.h.
 *
 * Every read of interpreter memory copies it into a local with
 * safe_read(); structures are then used only from those copies.
 * Pointers found in a copy are checked (type pointers compared with
 * &PyCode_Type / &PyUnicode_Type) before what they point to is trusted.
 */
#define Py_BUILD_CORE 1
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "pyframes.c reads CPython 3.11 internals; port it for this version"
#endif

#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_gil.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_pystate.h"
#include "internal/pycore_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pyframes.h"

#define CODE_SIZE_MAX (1 << 24) /* code units; larger is garbage */
#define LINETABLE_MAX (1 << 24) /* bytes */
#define STR_CHARS_MAX PYFRAMES_FILE_MAX
#define PYFRAMES_THREADS_SCAN 65536 /* thread states looked at, in all */

/* 0: process_vm_readv; 1: forced pipe (tests); 2: pipe, learned. */
static atomic_int pipe_mode;

/* Our pid, without a system call per read; a forked child learns its
 * own (process_vm_readv on the parent's pid would read the parent). */
static atomic_int my_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

static void pid_forget(void)
{
	atomic_store(&my_pid, 0);
}

static void pid_hook(void)
{
	pthread_atfork(NULL, NULL, pid_forget);
}

static pid_t self_pid(void)
{
	int pid = atomic_load_explicit(&my_pid, memory_order_relaxed);

	if (!pid) {
		pthread_once(&pid_once, pid_hook);
		pid = getpid();
		atomic_store_explicit(&my_pid, pid, memory_order_relaxed);
	}
	return pid;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Copies len bytes at src through a pipe: write() fails with EFAULT on
 * memory we may not read instead of faulting. */
static int pipe_read(void *dst, uintptr_t src, size_t len)
{
	int p[2], rc = 0;
	size_t done = 0;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -EFAULT;
	while (done < len) {
		size_t chunk = len - done < 4096 ? len - done : 4096;
		/* The raw system call: a sanitizer's write() interceptor
		 * would check (and report) the very memory we probe. */
		ssize_t w = syscall(SYS_write, p[1], (const char *)src + done,
				    chunk);
		ssize_t r;

		if (w != (ssize_t)chunk) {
			rc = -EFAULT;
			break;
		}
		r = read(p[0], (char *)dst + done, chunk);
		if (r != (ssize_t)chunk) {
			rc = -EFAULT;
			break;
		}
		done += chunk;
	}
	close(p[0]);
	close(p[1]);
	return rc;
}

/* Copies len bytes of our own memory at src into dst; 0 or -EFAULT.
 * Never faults, whatever src is. */
static int safe_read(void *dst, uintptr_t src, size_t len)
{
	struct iovec local, remote;
	ssize_t n;

	if (!src || src + len < src)
		return -EFAULT;
	if (!len)
		return 0;
	if (atomic_load_explicit(&pipe_mode, memory_order_relaxed))
		return pipe_read(dst, src, len);
	local.iov_base = dst;
	local.iov_len = len;
	remote.iov_base = (void *)src;
	remote.iov_len = len;
	n = process_vm_readv(self_pid(), &local, 1, &remote, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
		atomic_store(&pipe_mode, 2);
		return pipe_read(dst, src, len);
	}
	return -EFAULT;
}

/* Reads n regions in one system call where it can: 0 when all were read,
 * else -EFAULT (what was read is in place; the caller decides).  Falls
 * back to region by region through safe_read. */
static int gather_read(struct iovec *local, struct iovec *remote, size_t n)
{
	size_t total = 0;
	ssize_t r = -1;

	for (size_t i = 0; i < n; i++)
		total += local[i].iov_len;
	if (!atomic_load_explicit(&pipe_mode, memory_order_relaxed))
		r = process_vm_readv(self_pid(), local, n, remote, n, 0);
	if (r == (ssize_t)total)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (safe_read(local[i].iov_base, (uintptr_t)remote[i].iov_base,
			      local[i].iov_len))
			return -EFAULT;
	return 0;
}

void pyframes_force_pipe(int on)
{
	atomic_store(&pipe_mode, on ? 1 : 0);
}

#define READ_FIELD(dst, base, type, field)                                     \
	safe_read(&(dst), (uintptr_t)(base) + offsetof(type, field),           \
		  sizeof(dst))

int pyframes_ready(void)
{
	int init = 0;
	uintptr_t fin = 1;

	if (READ_FIELD(init, &_PyRuntime, _PyRuntimeState, initialized) ||
	    READ_FIELD(fin, &_PyRuntime, _PyRuntimeState, _finalizing))
		return -ENOENT;
	return init && !fin ? 0 : -ENOENT;
}

uint64_t pyframes_main_thread(void)
{
	unsigned long id = 0;

	if (READ_FIELD(id, &_PyRuntime, _PyRuntimeState, main_thread))
		return 0;
	return id;
}

/* The start of _PyRuntime that says whether Python runs and where its
 * interpreters are, read in one go. */
#define RUNTIME_HEAD                                                           \
	(offsetof(_PyRuntimeState, interpreters.head) + sizeof(void *))
#define INTERP_HEAD                                                            \
	(offsetof(PyInterpreterState, threads.head) + sizeof(void *))

/* Fills out from a thread state's copy. */
static void thread_from(struct pyframes_thread *o, uintptr_t at,
			const PyThreadState *t)
{
	o->thread_id = t->thread_id;
	o->native_id = (long)t->native_thread_id;
	o->tstate = at;
	o->cframe = (uintptr_t)t->cframe;
	o->stack_chunk = (uintptr_t)t->datastack_chunk;
	o->stack_top = (uintptr_t)t->datastack_top;
}

/* The walk of pyframes_threads(); *ninterps counts the interpreters,
 * *first is the first one. */
static int list_threads(struct pyframes_thread *out, size_t max, size_t *n,
			size_t *ninterps, uintptr_t *first, char *err,
			size_t errlen)
{
	unsigned char rt[RUNTIME_HEAD];
	uintptr_t interp = 0, fin = 0;
	size_t ni = 0;
	int init = 0;

	*n = 0;
	*ninterps = 0;
	*first = 0;
#define FIELD(dst, buf, type, field)                                           \
	memcpy(&(dst), (buf) + offsetof(type, field), sizeof(dst))
	if (safe_read(rt, (uintptr_t)&_PyRuntime, sizeof(rt)) == 0) {
		FIELD(init, rt, _PyRuntimeState, initialized);
		FIELD(fin, rt, _PyRuntimeState, _finalizing);
		FIELD(interp, rt, _PyRuntimeState, interpreters.head);
	}
	if (!init || fin) {
		set_err(err, errlen, "Python is not initialised");
		return -ENOENT;
	}
	*first = interp;
	while (interp && ni++ < PYFRAMES_INTERPS_MAX) {
		unsigned char ib[INTERP_HEAD];
		uintptr_t ts, prev = 0;

		(*ninterps)++;
		if (safe_read(ib, interp, sizeof(ib)))
			goto fault;
		FIELD(ts, ib, PyInterpreterState, threads.head);
		while (ts && *n < max) {
			PyThreadState t;

			/* A list rewritten under us shows as broken links. */
			if (safe_read(&t, ts, sizeof(t)) ||
			    (uintptr_t)t.interp != interp ||
			    (uintptr_t)t.prev != prev)
				goto fault;
			prev = ts;
			thread_from(&out[*n], ts, &t);
			(*n)++;
			ts = (uintptr_t)t.next;
		}
		FIELD(interp, ib, PyInterpreterState, next);
	}
#undef FIELD
	return 0;
fault:
	set_err(err, errlen, "interpreter or thread list unreadable");
	return -EFAULT;
}

int pyframes_threads(struct pyframes_thread *out, size_t max, size_t *n,
		     char *err, size_t errlen)
{
	size_t ni;
	uintptr_t first;

	return list_threads(out, max, n, &ni, &first, err, errlen);
}

/* Is ts one of the thread states of some interpreter now? */
static int tstate_listed(uintptr_t ts)
{
	uintptr_t interp = 0, cur;
	size_t ni = 0, nt = 0;

	if (READ_FIELD(interp, &_PyRuntime, _PyRuntimeState, interpreters.head))
		return 0;
	while (interp && ni++ < PYFRAMES_INTERPS_MAX) {
		if (READ_FIELD(cur, interp, PyInterpreterState, threads.head))
			return 0;
		while (cur && nt++ < PYFRAMES_THREADS_SCAN) {
			if (cur == ts)
				return 1;
			if (READ_FIELD(cur, cur, PyThreadState, next))
				return 0;
		}
		if (READ_FIELD(interp, interp, PyInterpreterState, next))
			return 0;
	}
	return 0;
}

int pyframes_gil_holder(uint64_t *thread_id, long *native_id)
{
	struct _gil_runtime_state gil;
	PyThreadState t;
	uintptr_t holder;

	*thread_id = 0;
	*native_id = 0;
	if (pyframes_ready() < 0 ||
	    safe_read(&gil, (uintptr_t)&_PyRuntime.ceval.gil, sizeof(gil)))
		return -ENOENT;
	holder = (uintptr_t)gil.last_holder._value;
	if (gil.locked._value != 1 || !holder)
		return -ENOENT;
	/* A thread state is freed just before its thread drops the GIL:
	 * trust last_holder only while it is still listed. */
	if (!tstate_listed(holder) || safe_read(&t, holder, sizeof(t)))
		return -ENOENT;
	*thread_id = t.thread_id;
	*native_id = (long)t.native_thread_id;
	return 0;
}

/*
 * Strings.  A code object's names are exact, ready str objects, almost
 * always compact; the legacy (non-compact) form is read too.
 */

/* Appends code point c as UTF-8 at out+*len if it fits in cap bytes
 * (keeping room for the NUL).  Lone surrogates become "\udXXX" as the
 * backslashreplace error handler writes them.  0, or -1 when full. */
static int put_utf8(char *out, size_t cap, size_t *len, uint32_t c)
{
	char b[10];
	size_t k;

	if (c < 0x80) {
		b[0] = (char)c;
		k = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xC0 | (c >> 6));
		b[1] = (char)(0x80 | (c & 0x3F));
		k = 2;
	} else if (c >= 0xD800 && c <= 0xDFFF) {
		k = (size_t)snprintf(b, sizeof(b), "\\u%04x", (unsigned)c);
	} else if (c < 0x10000) {
		b[0] = (char)(0xE0 | (c >> 12));
		b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[2] = (char)(0x80 | (c & 0x3F));
		k = 3;
	} else if (c <= 0x10FFFF) {
		b[0] = (char)(0xF0 | (c >> 18));
		b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[3] = (char)(0x80 | (c & 0x3F));
		k = 4;
	} else {
		b[0] = '?';
		k = 1;
	}
	if (*len + k + 1 > cap)
		return -1;
	memcpy(out + *len, b, k);
	*len += k;
	return 0;
}

/* Reads the str at addr into out (cap bytes, cap >= 4) as UTF-8; a
 * string that does not fit is cut and ends in "...".  0 or -EFAULT. */
static int read_str(uintptr_t addr, char *out, size_t cap)
{
	unsigned char data[STR_CHARS_MAX * 4];
	PyCompactUnicodeObject c;
	uintptr_t at;
	size_t len = 0, nchars, kind, i;
	int cut;

	out[0] = '\0';
	if (safe_read(&c, addr, sizeof(c)))
		return -EFAULT;
	if (c._base.ob_base.ob_type != &PyUnicode_Type || !c._base.state.ready)
		return -EFAULT;
	kind = c._base.state.kind;
	if ((kind != 1 && kind != 2 && kind != 4) || c._base.length < 0)
		return -EFAULT;
	if (c._base.state.compact)
		at = addr + (c._base.state.ascii
				     ? sizeof(PyASCIIObject)
				     : sizeof(PyCompactUnicodeObject));
	else if (READ_FIELD(at, addr, PyUnicodeObject, data.any))
		return -EFAULT;
	/* More than cap characters never fit in cap bytes. */
	nchars = (size_t)c._base.length;
	cut = nchars > cap;
	if (cut)
		nchars = cap;
	if (safe_read(data, at, nchars * kind))
		return -EFAULT;
	for (i = 0; i < nchars; i++) {
		uint32_t ch;

		if (kind == 1)
			ch = data[i];
		else if (kind == 2)
			ch = ((uint16_t *)(void *)data)[i];
		else
			ch = ((uint32_t *)(void *)data)[i];
		if (put_utf8(out, cap, &len, ch) < 0) {
			cut = 1;
			break;
		}
	}
	if (cut) {
		/* Back off to a character boundary that leaves room for
		 * "...", never splitting a UTF-8 sequence. */
		while (len && len + 4 > cap)
			while (len &&
			       ((unsigned char)out[--len] & 0xC0) == 0x80)
				;
		memcpy(out + len, "...", 3);
		len += 3;
	}
	out[len] = '\0';
	return 0;
}

/*
 * Line numbers: the 3.11 location table (Objects/locations.md).  Each
 * entry starts with a byte whose top bit is set: bits 3-6 the code, bits
 * 0-2 the length in code units minus one; following bytes (top bit clear)
 * hold varints.  The table is read in small chunks as it is scanned.
 */
struct lt_reader {
	uintptr_t base;
	const unsigned char *local; /* a copied table, or NULL */
	size_t len;
	size_t start; /* index of buf[0] */
	size_t have;
	unsigned char buf[256];
};

/* The byte at index i, or -1 (end or unreadable). */
static int lt_byte(struct lt_reader *r, size_t i)
{
	if (i >= r->len)
		return -1;
	if (r->local)
		return r->local[i];
	if (i < r->start || i >= r->start + r->have) {
		size_t k = r->len - i < sizeof(r->buf) ? r->len - i
						       : sizeof(r->buf);

		if (safe_read(r->buf, r->base + i, k))
			return -1;
		r->start = i;
		r->have = k;
	}
	return r->buf[i - r->start];
}

static int lt_svarint(struct lt_reader *r, size_t i)
{
	int b = lt_byte(r, i);
	unsigned val, shift = 0;

	if (b < 0)
		return 0;
	val = (unsigned)b & 63;
	while ((b & 64) && shift < 24) {
		b = lt_byte(r, ++i);
		if (b < 0)
			return 0;
		shift += 6;
		val |= ((unsigned)b & 63) << shift;
	}
	return (val & 1) ? -(int)(val >> 1) : (int)(val >> 1);
}

/* The line of the instruction at byte offset addr, as PyCode_Addr2Line;
 * -1 when it has none. */
static int decode_line(struct lt_reader *rd, int firstlineno, long addr)
{
	struct lt_reader *r = rd;
	size_t i = 0, len = r->len;
	long start = 0;
	int line = firstlineno;

	if (addr < 0)
		return firstlineno;
	while (i < len) {
		int b = lt_byte(r, i);
		int code;

		if (b < 0 || !(b & 0x80))
			return -1;
		code = (b >> 3) & 15;
		if (code == 13 || code == 14) /* no columns, long form */
			line += lt_svarint(r, i + 1);
		else if (code >= 10 && code <= 12) /* one line forms */
			line += code - 10;
		start += ((b & 7) + 1) * (long)sizeof(_Py_CODEUNIT);
		if (addr < start)
			return code == 15 ? -1 : line;
		do
			b = lt_byte(r, ++i);
		while (b >= 0 && !(b & 0x80));
	}
	return -1;
}

/* Fills f from the copies fr (of the frame at address at) and co (of its
 * code object).  0 or -EFAULT. */
static int frame_fill(struct pyframes_frame *f, uintptr_t at,
		      const _PyInterpreterFrame *fr, const PyCodeObject *co)
{
	uintptr_t code = (uintptr_t)fr->f_code;
	uintptr_t first = code + offsetof(PyCodeObject, co_code_adaptive);
	PyBytesObject lt;
	long addr;

	if (read_str((uintptr_t)co->co_qualname, f->func, sizeof(f->func)) ||
	    read_str((uintptr_t)co->co_filename, f->file, sizeof(f->file)))
		return -EFAULT;
	f->code = code;
	f->lineno = 0;
	if (fr->frame_obj) {
		PyFrameObject fo;

		/* A tracer's line, when the frame object is this frame's
		 * (not a freed one whose memory was reused). */
		if (safe_read(&fo, (uintptr_t)fr->frame_obj, sizeof(fo)))
			return -EFAULT;
		if (fo.ob_base.ob_type == &PyFrame_Type &&
		    (uintptr_t)fo.f_frame == at && fo.f_lineno > 0)
			f->lineno = fo.f_lineno;
	}
	if (f->lineno)
		return 0;
	if (safe_read(&lt, (uintptr_t)co->co_linetable,
		      offsetof(PyBytesObject, ob_sval)))
		return -EFAULT;
	if (lt.ob_base.ob_base.ob_type != &PyBytes_Type ||
	    lt.ob_base.ob_size < 0 || lt.ob_base.ob_size > LINETABLE_MAX)
		return -EFAULT;
	addr = ((intptr_t)((uintptr_t)fr->prev_instr - first)) /
	       (long)sizeof(_Py_CODEUNIT) * (long)sizeof(_Py_CODEUNIT);
	struct lt_reader rd = {
		.base = (uintptr_t)co->co_linetable +
			offsetof(PyBytesObject, ob_sval),
		.len = (size_t)lt.ob_base.ob_size,
	};
	f->lineno = decode_line(&rd, co->co_firstlineno, addr);
	if (f->lineno < -1) /* a table read while it was replaced */
		f->lineno = -1;
	return 0;
}

int pyframes_walk(const struct pyframes_thread *t, struct pyframes_frame *out,
		  size_t max, size_t *n, int *truncated, char *err,
		  size_t errlen)
{
	PyThreadState ts;
	_PyCFrame cf;
	uintptr_t f;
	size_t steps = 0, limit = max + PYFRAMES_SKIP_MAX;

	*n = 0;
	*truncated = 0;
	if (safe_read(&ts, t->tstate, sizeof(ts)) ||
	    ts.thread_id != t->thread_id) {
		set_err(err, errlen, "thread %llu is gone",
			(unsigned long long)t->thread_id);
		return -ESRCH;
	}
	if (!ts.cframe)
		return 0;
	if (safe_read(&cf, (uintptr_t)ts.cframe, sizeof(cf)))
		goto fault;
	f = (uintptr_t)cf.current_frame;
	while (f) {
		_PyInterpreterFrame fr;
		PyCodeObject co;
		uintptr_t first, at = f;

		if (steps++ >= limit) {
			*truncated = 1;
			break;
		}
		if (safe_read(&fr, f,
			      offsetof(_PyInterpreterFrame, localsplus)))
			goto fault;
		if (safe_read(&co, (uintptr_t)fr.f_code,
			      offsetof(PyCodeObject, co_code_adaptive)))
			goto fault;
		if (co.ob_base.ob_base.ob_type != &PyCode_Type ||
		    co.ob_base.ob_size <= 0 ||
		    co.ob_base.ob_size > CODE_SIZE_MAX ||
		    co._co_firsttraceable < 0)
			goto fault;
		f = (uintptr_t)fr.previous;
		/* _PyFrame_IsIncomplete: set up but not yet RESUMEd. */
		first = (uintptr_t)fr.f_code +
			offsetof(PyCodeObject, co_code_adaptive);
		if (fr.owner != FRAME_OWNED_BY_GENERATOR &&
		    (uintptr_t)fr.prev_instr <
			    first + (uintptr_t)co._co_firsttraceable *
					    sizeof(_Py_CODEUNIT))
			continue;
		if (*n == max) {
			*truncated = 1;
			break;
		}
		if (frame_fill(&out[*n], at, &fr, &co))
			goto fault;
		(*n)++;
	}
	return 0;
fault:
	set_err(err, errlen, "frames of thread %llu changed while read",
		(unsigned long long)t->thread_id);
	return -EFAULT;
}

/*
 * The sampler's fast path.
 */

#define BULK_MAX (64u << 10) /* bytes of the current data-stack chunk */
#define CODE_HEAD offsetof(PyCodeObject, co_code_adaptive)
#define FRAME_HEAD offsetof(_PyInterpreterFrame, localsplus)
#define GATHER_MAX 512 /* iovecs per process_vm_readv (IOV_MAX 1024) */
#define LIST_CACHE_MAX 48 /* thread states checked in one read */

struct pyframes_scratch {
	unsigned char bulk[BULK_MAX];
	PyCodeObject code[PYFRAMES_RAW_MAX]; /* headers only are read */
	uintptr_t codeaddr[PYFRAMES_RAW_MAX];
	uintptr_t frameaddr[PYFRAMES_RAW_MAX];
	uintptr_t prev_instr[PYFRAMES_RAW_MAX];
	uintptr_t gather[PYFRAMES_RAW_MAX]; /* code objects to read */
	unsigned char trusted[PYFRAMES_RAW_MAX];
	unsigned char entry[PYFRAMES_RAW_MAX], owner[PYFRAMES_RAW_MAX];
	struct iovec local[GATHER_MAX], remote[GATHER_MAX];
	/* pyframes_threads_fast's list of the previous call (one
	 * interpreter only), checked again in one read. */
	uintptr_t interp, ts[LIST_CACHE_MAX];
	size_t nts;
	PyThreadState tcopy[LIST_CACHE_MAX];
	unsigned char rt[RUNTIME_HEAD], ib[INTERP_HEAD];
	struct _gil_runtime_state gil;
};

struct pyframes_scratch *pyframes_scratch_new(void)
{
	return malloc(sizeof(struct pyframes_scratch));
}

void pyframes_scratch_free(struct pyframes_scratch *s)
{
	free(s);
}

/* Reads the headers of code objects s->gather[0..n) into s->code with
 * as few system calls as the kernel allows; a header that cannot be read
 * is zeroed (its type check then fails). */
static void read_code_heads(struct pyframes_scratch *s, size_t n)
{
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < GATHER_MAX ? n - done : GATHER_MAX, got;
		ssize_t r = -1;

		for (size_t i = 0; i < k; i++) {
			s->local[i].iov_base = &s->code[done + i];
			s->local[i].iov_len = CODE_HEAD;
			s->remote[i].iov_base = (void *)s->gather[done + i];
			s->remote[i].iov_len = CODE_HEAD;
		}
		if (!atomic_load_explicit(&pipe_mode, memory_order_relaxed))
			r = process_vm_readv(self_pid(), s->local, k, s->remote,
					     k, 0);
		/* Whole headers read; the one that failed is read alone
		 * (and zeroed when it cannot be), then on with the rest. */
		got = r > 0 ? (size_t)r / CODE_HEAD : 0;
		if (got < k && safe_read(&s->code[done + got],
					 s->gather[done + got], CODE_HEAD))
			memset(&s->code[done + got], 0, CODE_HEAD);
		done += got < k ? got + 1 : k;
	}
}

/* s->frameaddr..owner[0..nf) (innermost first) to out: the code objects
 * the caller does not vouch for are read in one gathered call and checked,
 * incomplete frames skipped.  0, or -EFAULT when a code object is not
 * one (out[0..*n) is still valid).  *truncated as pyframes_walk_raw. */
static int resolve(struct pyframes_scratch *s, size_t nf,
		   const struct pyframes_trust *trust, int *truncated,
		   struct pyframes_raw *out, size_t max, size_t *n)
{
	size_t ng = 0;
	int rc = 0;

	/* Which frames the caller vouches for (same place from the root,
	 * same frame, same code); the others' code objects are read in one
	 * gathered call. */
	for (size_t i = 0; i < nf; i++) {
		size_t pos = nf - 1 - i;

		s->trusted[i] = !*truncated && trust && pos < trust->n &&
				trust->frames[pos] == s->frameaddr[i] &&
				trust->codes[pos] == s->codeaddr[i];
		if (!s->trusted[i])
			s->gather[ng++] = s->codeaddr[i];
	}
	read_code_heads(s, ng);
	for (size_t i = 0, g = 0; i < nf; i++) {
		const PyCodeObject *co = s->trusted[i] ? NULL : &s->code[g++];
		uintptr_t first = s->codeaddr[i] + CODE_HEAD;
		struct pyframes_raw *r;
		intptr_t off;

		if (co && (co->ob_base.ob_base.ob_type != &PyCode_Type ||
			   co->ob_base.ob_size <= 0 ||
			   co->ob_base.ob_size > CODE_SIZE_MAX ||
			   co->_co_firsttraceable < 0)) {
			rc = -EFAULT;
			break;
		}
		/* _PyFrame_IsIncomplete, as in pyframes_walk (a trusted
		 * frame was complete when the caller saw it, and stays so). */
		if (co && s->owner[i] != FRAME_OWNED_BY_GENERATOR &&
		    s->prev_instr[i] <
			    first + (uintptr_t)co->_co_firsttraceable *
					    sizeof(_Py_CODEUNIT))
			continue;
		if (*n == max) {
			*truncated = 1;
			break;
		}
		r = &out[(*n)++];
		memset(r, 0, sizeof(*r));
		r->frame = s->frameaddr[i];
		r->code = s->codeaddr[i];
		r->is_entry = s->entry[i];
		r->trusted = !co;
		off = (intptr_t)(s->prev_instr[i] - first);
		if (co) {
			r->qualname = (uintptr_t)co->co_qualname;
			r->filename = (uintptr_t)co->co_filename;
			r->linetable = (uintptr_t)co->co_linetable;
			r->firstlineno = co->co_firstlineno;
			if (off > (intptr_t)co->ob_base.ob_size *
					  (intptr_t)sizeof(_Py_CODEUNIT))
				off = -1;
		} else if (off > (intptr_t)CODE_SIZE_MAX *
					 (intptr_t)sizeof(_Py_CODEUNIT)) {
			off = -1;
		}
		r->lasti = off < 0 ? -1
				   : (int)(off / (intptr_t)sizeof(_Py_CODEUNIT) *
					   (intptr_t)sizeof(_Py_CODEUNIT));
	}
	return rc;
}

int pyframes_walk_raw(const struct pyframes_thread *t,
		      struct pyframes_scratch *s,
		      const struct pyframes_trust *trust,
		      struct pyframes_raw *out, size_t max, size_t *n,
		      int *truncated)
{
	_PyCFrame cf;
	uintptr_t f, lo = 0, hi = 0;
	size_t nf = 0, limit, steps = 0;
	int rc = 0;

	*n = 0;
	*truncated = 0;
	if (max > PYFRAMES_RAW_MAX)
		max = PYFRAMES_RAW_MAX;
	limit = max + PYFRAMES_SKIP_MAX;
	if (limit > PYFRAMES_RAW_MAX)
		limit = PYFRAMES_RAW_MAX;
	/* The thread state as the listing read it a moment ago. */
	if (!t->cframe)
		return 0;
	/* Its _PyCFrame and the frames of its current data-stack chunk
	 * (innermost at the top) in one system call; frames elsewhere (older
	 * chunks, generators) are read one by one.  The top may have moved
	 * since the listing: what lies outside the copy is read on its own. */
	if (t->stack_chunk && t->stack_top) {
		uintptr_t base = t->stack_chunk + offsetof(_PyStackChunk, data);

		hi = t->stack_top;
		lo = hi > base + BULK_MAX ? hi - BULK_MAX : base;
		if (hi <= lo)
			lo = hi = 0;
	}
	s->local[0].iov_base = &cf;
	s->local[0].iov_len = sizeof(cf);
	s->remote[0].iov_base = (void *)t->cframe;
	s->remote[0].iov_len = sizeof(cf);
	s->local[1].iov_base = s->bulk;
	s->local[1].iov_len = hi - lo;
	s->remote[1].iov_base = (void *)lo;
	s->remote[1].iov_len = hi - lo;
	if (gather_read(s->local, s->remote, hi > lo ? 2 : 1)) {
		if (safe_read(&cf, t->cframe, sizeof(cf)))
			return -EFAULT;
		lo = hi = 0;
	}
	f = (uintptr_t)cf.current_frame;
	while (f) {
		_PyInterpreterFrame fr;

		if (steps++ >= limit) {
			*truncated = 1;
			break;
		}
		if (f >= lo && f + FRAME_HEAD <= hi)
			memcpy(&fr, s->bulk + (f - lo), FRAME_HEAD);
		else if (safe_read(&fr, f, FRAME_HEAD)) {
			rc = -EFAULT;
			break;
		}
		s->frameaddr[nf] = f;
		s->codeaddr[nf] = (uintptr_t)fr.f_code;
		s->prev_instr[nf] = (uintptr_t)fr.prev_instr;
		/* A bool in memory that may be changing under us: read as a
		 * byte (a torn copy must not be a bool that is neither). */
		memcpy(&s->entry[nf],
		       (const char *)&fr + offsetof(_PyInterpreterFrame, is_entry),
		       1);
		s->entry[nf] = s->entry[nf] == 1;
		s->owner[nf] = (unsigned char)fr.owner;
		nf++;
		f = (uintptr_t)fr.previous;
	}
	return resolve(s, nf, trust, truncated, out, max, n) ? -EFAULT : rc;
}

/* ---- the innermost frames, from a signal handler ---------------------- */

/* process_vm_readv itself, never the pipe (a pipe per read is too slow for
 * a handler) nor a sanitizer's interceptor: 0 or -1.  Async-signal-safe. */
static int leaf_read(pid_t pid, void *dst, uintptr_t src, size_t len)
{
	struct iovec local = {dst, len}, remote = {(void *)src, len};

	if (!src)
		return -1;
	return syscall(SYS_process_vm_readv, pid, &local, 1UL, &remote, 1UL,
		       0UL) == (long)len
		       ? 0
		       : -1;
}

size_t pyframes_leaf_capture(long tid, uintptr_t tstate, void *buf,
			     size_t cap)
{
	struct pyframes_leaf *l = buf;
	/* Only the head of the thread state, up to its native id. */
	unsigned char ts[offsetof(PyThreadState, native_thread_id) +
			 sizeof(unsigned long)];
	pid_t pid = atomic_load_explicit(&my_pid, memory_order_relaxed);
	uintptr_t cframe, f;
	unsigned long native;
	_PyCFrame cf;

	if (cap < sizeof(*l))
		return 0;
	l->n = 0;
	l->complete = 0;
	l->outer = 0;
	/* pid 0: no walk on this side yet (its pthread_once is not for a
	 * handler); the pipe: too slow here. */
	if (!pid || atomic_load_explicit(&pipe_mode, memory_order_relaxed) ||
	    leaf_read(pid, ts, tstate, sizeof(ts)))
		return sizeof(*l);
	memcpy(&native, ts + offsetof(PyThreadState, native_thread_id),
	       sizeof(native));
	memcpy(&cframe, ts + offsetof(PyThreadState, cframe), sizeof(cframe));
	/* The thread state must be this thread's (the sampler's listing is
	 * a moment old: it may have been freed and reused). */
	if ((long)native != tid || leaf_read(pid, &cf, cframe, sizeof(cf)))
		return sizeof(*l);
	f = (uintptr_t)cf.current_frame;
	while (f && l->n < PYFRAMES_LEAF_MAX) {
		_PyInterpreterFrame fr;
		unsigned char entry;

		if (leaf_read(pid, &fr, f, FRAME_HEAD))
			return sizeof(*l);
		memcpy(&entry,
		       (const char *)&fr + offsetof(_PyInterpreterFrame, is_entry),
		       1);
		l->f[l->n].frame = f;
		l->f[l->n].code = (uintptr_t)fr.f_code;
		l->f[l->n].prev_instr = (uintptr_t)fr.prev_instr;
		l->f[l->n].entry = entry == 1;
		l->f[l->n].owner = (unsigned char)fr.owner;
		l->n++;
		f = (uintptr_t)fr.previous;
	}
	l->outer = f;
	l->complete = 1;
	return sizeof(*l);
}

int pyframes_leaf_resolve(struct pyframes_scratch *s,
			  const struct pyframes_leaf *l,
			  struct pyframes_raw *out, size_t max, size_t *n)
{
	size_t nf = l->n < PYFRAMES_LEAF_MAX ? l->n : PYFRAMES_LEAF_MAX;
	int truncated = 0;

	*n = 0;
	if (max > PYFRAMES_RAW_MAX)
		max = PYFRAMES_RAW_MAX;
	for (size_t i = 0; i < nf; i++) {
		s->frameaddr[i] = l->f[i].frame;
		s->codeaddr[i] = l->f[i].code;
		s->prev_instr[i] = l->f[i].prev_instr;
		s->entry[i] = l->f[i].entry == 1;
		s->owner[i] = l->f[i].owner;
	}
	return resolve(s, nf, NULL, &truncated, out, max, n);
}

int pyframes_code_names(const struct pyframes_raw *r, char *func,
			size_t funclen, char *file, size_t filelen)
{
	if (funclen < 4 || filelen < 4 ||
	    read_str(r->qualname, func, funclen) ||
	    read_str(r->filename, file, filelen))
		return -EFAULT;
	return 0;
}

/* The length of r's line table (a bytes object), or -EFAULT. */
static long linetable_len(const struct pyframes_raw *r)
{
	PyBytesObject lt;

	if (safe_read(&lt, r->linetable, offsetof(PyBytesObject, ob_sval)) ||
	    lt.ob_base.ob_base.ob_type != &PyBytes_Type ||
	    lt.ob_base.ob_size < 0 || lt.ob_base.ob_size > LINETABLE_MAX)
		return -EFAULT;
	return (long)lt.ob_base.ob_size;
}

int pyframes_linetable_copy(const struct pyframes_raw *r, unsigned char *buf,
			    size_t cap, size_t *len)
{
	long n = linetable_len(r);

	*len = 0;
	if (n < 0)
		return -EFAULT;
	if ((size_t)n > cap)
		return -E2BIG;
	if (safe_read(buf, r->linetable + offsetof(PyBytesObject, ob_sval),
		      (size_t)n))
		return -EFAULT;
	*len = (size_t)n;
	return 0;
}

int pyframes_line_decode(const unsigned char *table, size_t len,
			 int firstlineno, int lasti)
{
	struct lt_reader r = {.local = table, .len = len};
	int line = decode_line(&r, firstlineno, lasti);

	return line < -1 ? -1 : line;
}

int pyframes_line_remote(const struct pyframes_raw *r)
{
	long n = linetable_len(r);
	struct lt_reader rd = {
		.base = r->linetable + offsetof(PyBytesObject, ob_sval),
	};
	int line;

	if (n < 0)
		return -1;
	rd.len = (size_t)n;
	line = decode_line(&rd, r->firstlineno, r->lasti);
	return line < -1 ? -1 : line;
}

uintptr_t pyframes_gil_tstate(void)
{
	struct _gil_runtime_state gil;

	if (safe_read(&gil, (uintptr_t)&_PyRuntime.ceval.gil, sizeof(gil)) ||
	    gil.locked._value != 1)
		return 0;
	return (uintptr_t)gil.last_holder._value;
}

void pyframes_gil_range(uintptr_t *lo, uintptr_t *hi)
{
	*lo = (uintptr_t)&_PyRuntime.ceval.gil;
	*hi = *lo + sizeof(_PyRuntime.ceval.gil);
}

/* The cached list still as it was: the same thread states in the same
 * order, linked to each other and to the one interpreter.  out filled. */
static int list_cached(struct pyframes_scratch *s, struct pyframes_thread *out,
		       size_t max, size_t *n, uintptr_t *gil_tstate)
{
	size_t k = 0;
	uintptr_t interp = 0, next = 1, head = 0, fin = 1;
	int init = 0;

	if (!s->interp || !s->nts || s->nts > max)
		return -EAGAIN;
	s->local[k] = (struct iovec){s->rt, sizeof(s->rt)};
	s->remote[k++] = (struct iovec){(void *)&_PyRuntime, sizeof(s->rt)};
	s->local[k] = (struct iovec){&s->gil, sizeof(s->gil)};
	s->remote[k++] = (struct iovec){(void *)&_PyRuntime.ceval.gil,
					sizeof(s->gil)};
	s->local[k] = (struct iovec){s->ib, sizeof(s->ib)};
	s->remote[k++] = (struct iovec){(void *)s->interp, sizeof(s->ib)};
	for (size_t i = 0; i < s->nts; i++) {
		s->local[k] = (struct iovec){&s->tcopy[i], sizeof(s->tcopy[i])};
		s->remote[k++] = (struct iovec){(void *)s->ts[i],
						sizeof(s->tcopy[i])};
	}
	if (gather_read(s->local, s->remote, k))
		return -EAGAIN;
	memcpy(&init, s->rt + offsetof(_PyRuntimeState, initialized),
	       sizeof(init));
	memcpy(&fin, s->rt + offsetof(_PyRuntimeState, _finalizing),
	       sizeof(fin));
	memcpy(&interp, s->rt + offsetof(_PyRuntimeState, interpreters.head),
	       sizeof(interp));
	memcpy(&next, s->ib + offsetof(PyInterpreterState, next),
	       sizeof(next));
	memcpy(&head, s->ib + offsetof(PyInterpreterState, threads.head),
	       sizeof(head));
	if (!init || fin)
		return -ENOENT;
	if (interp != s->interp || next || head != s->ts[0])
		return -EAGAIN;
	for (size_t i = 0; i < s->nts; i++) {
		const PyThreadState *t = &s->tcopy[i];

		if ((uintptr_t)t->interp != interp ||
		    (uintptr_t)t->prev != (i ? s->ts[i - 1] : 0) ||
		    (uintptr_t)t->next != (i + 1 < s->nts ? s->ts[i + 1] : 0))
			return -EAGAIN;
		thread_from(&out[i], s->ts[i], t);
	}
	*n = s->nts;
	*gil_tstate = s->gil.locked._value == 1
			      ? (uintptr_t)s->gil.last_holder._value
			      : 0;
	return 0;
}

int pyframes_threads_fast(struct pyframes_scratch *s,
			  struct pyframes_thread *out, size_t max, size_t *n,
			  uintptr_t *gil_tstate)
{
	size_t ni;
	uintptr_t first;
	int rc;

	*n = 0;
	*gil_tstate = 0;
	rc = list_cached(s, out, max, n, gil_tstate);
	if (rc != -EAGAIN)
		return rc;
	/* Changed (a thread came or went) or never listed: walk, and
	 * remember the list when it is short and of one interpreter. */
	s->nts = 0;
	s->interp = 0;
	rc = list_threads(out, max, n, &ni, &first, NULL, 0);
	if (rc)
		return rc;
	*gil_tstate = pyframes_gil_tstate();
	if (ni == 1 && *n && *n <= LIST_CACHE_MAX) {
		for (size_t i = 0; i < *n; i++)
			s->ts[i] = out[i].tstate;
		s->nts = *n;
		s->interp = first;
	}
	return 0;
}
