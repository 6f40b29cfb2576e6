/*
 * crash: fatal-signal handler, alternate stack, uncaught exceptions.  See
 * crash.h.
 *
 * Everything from "the handler" to on_fatal is async-signal-safe: static
 * buffers, system calls, cpython.read (reads through process_vm_readv, no
 * allocation when given no error buffer), libunwind's local unwinder
 * (native.c explains why it is safe there), crash_report/crash_sym.
 */
#define UNW_LOCAL_ONLY
#include "cpython/pycompat.h"

#include "crash.h"
#include "profiler/native_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/record.h"
#include "cpython/cpython.h"
#include "crash_report.h"
#include "python/pygil.h"

static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NFATAL (sizeof(fatal) / sizeof(fatal[0]))

static struct sigaction prev[NFATAL];
static _Atomic int installed;
/* The thread writing a report (its kernel id), 0 when none. */
static _Atomic long owner;
static _Atomic int pending_queued, audit_added;
/* crash.path, copied at every change (the handler reads it as it is). */
static char report_dir[PATH_MAX];

/* Static so that the handler's own stack use stays small. */
static struct cpython_thread threads[CRASH_THREADS_MAX];
static struct cpython_frame frames[CRASH_FRAMES_MAX];
static uintptr_t ips[CRASH_NATIVE_MAX];
static struct crash_sym_cache sym_cache;
static struct crash_out out;

/* ---- small signal-safe strings ----------------------------------------- */

struct sbuf {
	char *p;
	size_t cap, len;
};

static void sb_str(struct sbuf *b, const char *s)
{
	while (*s && b->len + 1 < b->cap)
		b->p[b->len++] = *s++;
	b->p[b->len] = '\0';
}

static void sb_num(struct sbuf *b, unsigned long long v, int base, int width)
{
	char d[24];
	int i = sizeof(d) - 1;

	d[i] = '\0';
	do
		d[--i] = "0123456789abcdef"[v % (unsigned)base];
	while (((v /= (unsigned)base) || (int)sizeof(d) - 1 - i < width) &&
	       i > 0);
	sb_str(b, d + i);
}

static long gettid_(void)
{
	return syscall(SYS_gettid);
}

/* ---- report files ------------------------------------------------------- */

int crash_report_open(const char *kind, char *path, size_t pathlen)
{
	char when[32], stamp[20];
	struct sbuf b = {path, pathlen, 0};
	struct timespec ts;
	size_t base, k = 0;

	if (pathlen < 64)
		return -ENAMETOOLONG;
	path[0] = '\0';
	if (report_dir[0] != '/') {
		/* The raw system call: glibc's getcwd() may allocate. */
		if (syscall(SYS_getcwd, path, pathlen - 64) < 0)
			return -errno;
		b.len = strlen(path);
		if (report_dir[0])
			sb_str(&b, "/");
	}
	sb_str(&b, report_dir);
	if (b.len && path[b.len - 1] != '/')
		sb_str(&b, "/");
	clock_gettime(CLOCK_REALTIME, &ts);
	crash_time_format((int64_t)ts.tv_sec, 0, when);
	/* 2025-01-02T03:04:05.000Z -> 20250102T030405Z */
	for (const char *p = when; *p && *p != '.' && k + 2 < sizeof(stamp);
	     p++)
		if (*p != '-' && *p != ':')
			stamp[k++] = *p;
	stamp[k++] = 'Z';
	stamp[k] = '\0';
	sb_str(&b, "probing-");
	sb_str(&b, kind);
	sb_str(&b, "-");
	sb_num(&b, (unsigned long long)getpid(), 10, 1);
	sb_str(&b, "-");
	sb_str(&b, stamp);
	base = b.len;
	for (int i = 1; i <= 20; i++) {
		int fd;

		b.len = base;
		if (i > 1) {
			sb_str(&b, "-");
			sb_num(&b, (unsigned long long)i, 10, 1);
		}
		sb_str(&b, ".txt");
		if (b.len + 1 >= pathlen)
			return -ENAMETOOLONG;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			return fd >= 0 ? fd : -errno;
	}
	return -EEXIST;
}

/* "probing: <what> report written to PATH" (or why not) on the agent's
 * stderr (log_fd: the descriptor 2 the agent started with, checked), never
 * on a file of the program's that took descriptor 2 since; nowhere when
 * there is none. */
static void tell(const char *what, int fd, const char *path)
{
	char msg[PATH_MAX + 128];
	struct sbuf b = {msg, sizeof(msg), 0};
	int out = log_fd();

	sb_str(&b, "probing: ");
	sb_str(&b, what);
	if (fd >= 0) {
		sb_str(&b, " report written to ");
		sb_str(&b, path);
	} else {
		sb_str(&b, " report not written to a file: error ");
		sb_num(&b, (unsigned long long)-fd, 10, 1);
		sb_str(&b, " (");
		sb_str(&b, path);
		sb_str(&b, ")");
	}
	sb_str(&b, "\n");
	if (out >= 0 && write(out, msg, b.len) < 0) {
		/* nowhere left to say it */
	}
}

/* ---- Python threads (signal-safe) --------------------------------------- */

/* Writes the Python frames of t (retrying a stack that changed under us). */
static void python_frames(struct crash_out *o, const struct cpython_thread *t)
{
	size_t n = 0;
	int trunc = 0, rc = -EFAULT;

	crash_report_python(o, NULL);
	for (int tries = 0; tries < 3 && rc == -EFAULT; tries++)
		rc = cpython.read.walk(t, frames, CRASH_FRAMES_MAX, &n, &trunc,
				       NULL, 0);
	for (size_t i = 0; i < n; i++)
		crash_report_frame(o, frames[i].func, frames[i].file,
				   frames[i].lineno);
	if (rc == -ESRCH)
		crash_report_note(o, "the thread ended while read");
	else if (rc)
		crash_report_note(o, "frames changed while read; "
				     "the list may be incomplete");
	else if (!n)
		crash_report_note(o, "no Python frames");
	if (trunc)
		crash_report_note(o, "more frames not shown");
	crash_out_flush(o);
}

/*
 * The thread blocks: first the thread tid (flags first_flags; its Python
 * frames unless skip_first_python, then native(arg) for its native part),
 * then every other Python thread but the agent's own.
 */
static void write_threads(struct crash_out *o, long tid,
			  const char *first_flags, int skip_first_python,
			  void (*first_extra)(struct crash_out *o, void *arg),
			  void *arg)
{
	size_t n = 0, shown = 0;
	uint64_t main_ident = cpython.read.main_thread();
	const struct cpython_thread *me = NULL;
	char flags[64];
	struct sbuf b = {flags, sizeof(flags), 0};
	int rc = cpython.read.threads(threads, CRASH_THREADS_MAX, &n, NULL, 0);

	for (size_t i = 0; i < n; i++)
		if (threads[i].native_id == tid)
			me = &threads[i];
	sb_str(&b, first_flags);
	if (me && me->thread_id == main_ident)
		sb_str(&b, " main");
	crash_report_thread(o, tid, me ? me->thread_id : 0, NULL, flags);
	if (skip_first_python) {
		/* the caller writes them (first_extra) */
	} else if (me) {
		python_frames(o, me);
	} else {
		crash_report_python(o, NULL);
		crash_report_note(
			o, rc == -ENOENT    ? "Python is not running "
					      "(finalizing or not started)"
			   : rc == -ENOTSUP ? cpython.read.off_reason()
					    : "a thread without a Python "
					      "thread state");
	}
	if (first_extra)
		first_extra(o, arg);
	crash_report_thread_end(o);
	for (size_t i = 0; i < n; i++) {
		const struct cpython_thread *t = &threads[i];

		if (t == me || pygil_is_own_thread(t->native_id))
			continue;
		crash_report_thread(o, t->native_id, t->thread_id, NULL,
				    t->thread_id == main_ident ? "main" : "");
		python_frames(o, t);
		crash_report_thread_end(o);
		shown++;
	}
	if (n == CRASH_THREADS_MAX)
		crash_report_key(o, "note", "more threads not shown");
	(void)shown;
}

/* ---- the handler --------------------------------------------------------- */

/* Takes the report for thread tid, waiting at most wait_ms for another
 * thread's report to be done.  1 when taken. */
static int acquire(long tid, int wait_ms)
{
	struct timespec ten = {0, 10 * 1000000L};

	for (int waited = 0;; waited += 10) {
		long cur = 0;

		if (atomic_compare_exchange_strong(&owner, &cur, tid))
			return 1;
		if (cur == tid || waited >= wait_ms)
			return 0;
		nanosleep(&ten, NULL);
	}
}

static void release(void)
{
	atomic_store(&owner, 0);
}

static void native_part(struct crash_out *o, void *uc)
{
	unw_cursor_t cur;
	unw_word_t ip;
	size_t n = 0;
	int more = 0;

	if (unw_init_local2(&cur, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) ==
	    0) {
		do {
			if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !ip)
				break;
			ips[n++] = (uintptr_t)ip;
		} while (n < CRASH_NATIVE_MAX && (more = unw_step(&cur) > 0));
	}
	crash_sym_begin(&sym_cache);
	crash_report_native(o, &sym_cache, ips, n, 1,
			    n == CRASH_NATIVE_MAX && more);
	crash_sym_end(&sym_cache);
}

static void dump(int sig, siginfo_t *si, void *uc, long tid)
{
	char reason[128], path[PATH_MAX];
	struct sbuf b = {reason, sizeof(reason), 0};
	const char *name = crash_signal_name(sig);
	const char *code = si ? crash_code_name(sig, si->si_code) : NULL;
	int fd = crash_report_open("crash", path, sizeof(path));

	if (fd < 0)
		memcpy(path, report_dir[0] ? report_dir : ".",
		       strlen(report_dir[0] ? report_dir : ".") + 1);
	if (name) {
		sb_str(&b, name);
	} else {
		sb_str(&b, "signal ");
		sb_num(&b, (unsigned long long)sig, 10, 1);
	}
	if (code) {
		sb_str(&b, " (");
		sb_str(&b, code);
		sb_str(&b, ")");
	}
	if (si && si->si_code > 0 && sig != SIGABRT) {
		sb_str(&b, " at address 0x");
		sb_num(&b, (uintptr_t)si->si_addr, 16, 1);
	} else if (si && si->si_code <= 0 && si->si_pid == getpid()) {
		sb_str(&b, " raised by the process itself");
	} else if (si && si->si_code <= 0) {
		sb_str(&b, " sent by pid ");
		sb_num(&b, (unsigned long long)si->si_pid, 10, 1);
	}
	crash_out_init(&out);
	crash_out_fd(&out, fd);
	crash_out_fd(&out, 2);
	crash_out_str(&out, "\n");
	crash_report_head(&out, "crash", reason);
	if (record_dir()[0])
		crash_report_key(&out, "recording", record_dir());
	crash_report_key_int(&out, "signal", sig);
	crash_report_key_int(&out, "thread", tid);
	crash_report_body(&out);
	crash_out_flush(&out);
	write_threads(&out, tid, "crashed", 0, native_part, uc);
	crash_report_end(&out);
	if (fd >= 0)
		close(fd);
	tell("crash", fd, path);
	record_end_signal(sig, fd >= 0 ? path : NULL);
}

static int fatal_index(int sig)
{
	for (size_t i = 0; i < NFATAL; i++)
		if (fatal[i] == sig)
			return (int)i;
	return -1;
}

/* Puts the previous disposition back and hands the signal to it. */
static void pass_on(int sig, siginfo_t *si, void *uc)
{
	int i = fatal_index(sig);
	struct sigaction p;

	if (i < 0)
		return;
	p = prev[i];
	sigaction(sig, &p, NULL);
	if (p.sa_flags & SA_SIGINFO) {
		if (p.sa_sigaction)
			p.sa_sigaction(sig, si, uc);
		return;
	}
	if (p.sa_handler == SIG_IGN)
		return;
	if (p.sa_handler == SIG_DFL) {
		/* Blocked while we run: delivered with the default action
		 * (and its core dump) as soon as we return. */
		raise(sig);
		return;
	}
	p.sa_handler(sig);
}

/*
 * The report's own stack.  The handler may run on a stack it did not
 * allocate and cannot measure: faulthandler's (SIGSTKSZ * 2 from the heap)
 * when faulthandler, enabled after us, raises the signal again for us from
 * its handler, with two signal frames already on it (3 KiB each with
 * AVX-512), or a thread's own stack near its end.  So the report is
 * written on CRASH_STACK bytes of ours (mmap'd with a guard page at
 * install), switched to with a few instructions: swapcontext would do,
 * but ASan reports every use of it.
 */
static char *report_stack; /* its top, 16-byte aligned; NULL: none */
static struct {
	int sig;
	siginfo_t *si;
	void *uc;
	long tid;
} report_call;

static void report_on_own_stack(void)
{
	dump(report_call.sig, report_call.si, report_call.uc, report_call.tid);
}

/* Calls fn on the stack whose top is top, then comes back. */
static void call_on_stack(void (*fn)(void), char *top)
{
#if defined(__x86_64__)
	__asm__ volatile("mov %%rsp, %%r12\n\t"
			 "mov %0, %%rsp\n\t"
			 "call *%1\n\t"
			 "mov %%r12, %%rsp\n\t"
			 :
			 : "r"(top), "r"(fn)
			 : "r12", "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9",
			   "r10", "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
			   "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
			   "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
			   "memory", "cc");
#elif defined(__aarch64__)
	__asm__ volatile("mov x19, sp\n\t"
			 "mov sp, %0\n\t"
			 "blr %1\n\t"
			 "mov sp, x19\n\t"
			 :
			 : "r"(top), "r"(fn)
			 : "x19", "x0", "x1", "x2", "x3", "x4", "x5", "x6",
			   "x7", "x8", "x9", "x10", "x11", "x12", "x13", "x14",
			   "x15", "x16", "x17", "x18", "x30", "v0", "v1", "v2",
			   "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18",
			   "v19", "v20", "v21", "v22", "v23", "v24", "v25",
			   "v26", "v27", "v28", "v29", "v30", "v31", "memory",
			   "cc");
#else
	(void)top;
	fn();
#endif
}

/* size bytes of stack with a guard page below (an overflow faults): its
 * lowest usable address, or NULL.  Freed with guarded_stack_free. */
static char *guarded_stack_new(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return NULL;
	mprotect(m, page, PROT_NONE);
	return m + page;
}

static void guarded_stack_free(char *low, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	munmap(low - page, size + page);
}

static void report_stack_make(void)
{
	char *low;

	if (report_stack || !(low = guarded_stack_new(CRASH_STACK)))
		return;
	report_stack = low + CRASH_STACK;
}

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;
	long tid = gettid_();

	if (acquire(tid, CRASH_WAIT_MS)) {
		if (atomic_load(&installed) && report_stack) {
			report_call.sig = sig;
			report_call.si = si;
			report_call.uc = uc;
			report_call.tid = tid;
			call_on_stack(report_on_own_stack, report_stack);
		} else if (atomic_load(&installed)) {
			dump(sig, si, uc, tid);
		}
		/* One report per process: later crashes just pass on. */
	}
	pass_on(sig, si, uc);
	errno = saved;
}

/* ---- installing ---------------------------------------------------------- */

static void install(void)
{
	struct sigaction sa, old;
	unw_context_t ctx;
	unw_cursor_t cur;

	if (atomic_load(&installed))
		return;
	/* libunwind's own set-up, here rather than in the handler, once
	 * its pipe is kept out of the program's numbers (native_fds.h; a
	 * process that is dying may take them); the same for cpython.read
	 * (it learns our pid once). */
	if (native_fds_guard(NULL, 0) == 0 && unw_getcontext(&ctx) == 0 &&
	    unw_init_local(&cur, &ctx) == 0)
		while (unw_step(&cur) > 0)
			;
	(void)cpython.read.ready();
	report_stack_make();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	for (size_t i = 0; i < NFATAL; i++) {
		if (sigaction(fatal[i], &sa, &old) < 0)
			continue;
		if (old.sa_flags & SA_SIGINFO && old.sa_sigaction == on_fatal)
			continue; /* ours already (never our own previous) */
		prev[i] = old;
	}
	atomic_store(&installed, 1);
}

static void uninstall(void)
{
	struct sigaction cur;

	if (!atomic_load(&installed))
		return;
	atomic_store(&installed, 0);
	for (size_t i = 0; i < NFATAL; i++)
		if (sigaction(fatal[i], NULL, &cur) == 0 &&
		    cur.sa_flags & SA_SIGINFO && cur.sa_sigaction == on_fatal)
			sigaction(fatal[i], &prev[i], NULL);
	/* someone else's handler stays where it replaced ours */
}

int crash_enabled(void)
{
	return atomic_load(&installed);
}

/* ---- the main thread: alternate stack and the exception hook ------------ */

static void altstack_here(void)
{
	stack_t cur, ss;

	if (sigaltstack(NULL, &cur) < 0 || cur.ss_flags & SS_ONSTACK)
		return;
	if (!(cur.ss_flags & SS_DISABLE) && cur.ss_size >= CRASH_ALTSTACK)
		return;
	ss.ss_sp = guarded_stack_new(CRASH_ALTSTACK);
	if (!ss.ss_sp)
		return;
	ss.ss_size = CRASH_ALTSTACK;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL) < 0)
		guarded_stack_free(ss.ss_sp, CRASH_ALTSTACK);
}

static void exception_report(PyObject *type, PyObject *value, PyObject *tb);

/* The audit hook: an uncaught exception at the main thread's top level. */
static int on_audit(const char *event, PyObject *args, void *data)
{
	PyObject *ps1;

	(void)data;
	if (event[0] != 's' || strcmp(event, "sys.excepthook") ||
	    !atomic_load(&installed) || !PyTuple_Check(args) ||
	    PyTuple_GET_SIZE(args) != 4)
		return 0;
	/* Only the end of the program: the main thread, no Python frame
	 * running (not a PyErr_Print() from inside code), not the REPL. */
	if (PyThread_get_thread_ident() != cpython.read.main_thread() ||
	    PyEval_GetFrame())
		return 0;
	ps1 = PySys_GetObject("ps1");
	if (ps1)
		return 0;
	exception_report(PyTuple_GET_ITEM(args, 1), PyTuple_GET_ITEM(args, 2),
			 PyTuple_GET_ITEM(args, 3));
	return 0;
}

/* Runs on the main thread with the GIL (Py_AddPendingCall). */
static int on_main_thread(void *arg)
{
	(void)arg;
	atomic_store(&pending_queued, 0);
	if (atomic_load(&installed))
		altstack_here();
	if (!atomic_load(&audit_added) &&
	    PySys_AddAuditHook(on_audit, NULL) == 0)
		atomic_store(&audit_added, 1);
	PyErr_Clear(); /* an existing hook may refuse ours */
	return 0;
}

/* ---- the exception report (main thread, GIL held) ----------------------- */

#define TB_MAX CRASH_FRAMES_MAX

struct tb_frame {
	PyObject *code; /* borrowed from the traceback */
	int lineno;
};

static void tb_part(struct crash_out *o, void *arg)
{
	PyObject *tb = arg;
	static struct tb_frame tf[TB_MAX];
	size_t n = 0, total = 0;

	/* Outermost first in the chain; keep the innermost TB_MAX. */
	for (int steps = 0; tb && PyTraceBack_Check(tb) && steps < 100000;
	     steps++) {
		PyTracebackObject *t = (PyTracebackObject *)tb;
		PyCodeObject *co =
			t->tb_frame ? PyFrame_GetCode(t->tb_frame) : NULL;

		if (co) {
			/* Through the attribute: 3.11.7 computes tb_lineno
			 * lazily (the field reads -1 until then). */
			PyObject *ln = PyObject_GetAttrString(tb, "tb_lineno");

			tf[total % TB_MAX].code = (PyObject *)co;
			tf[total % TB_MAX].lineno =
				ln && PyLong_Check(ln) ? (int)PyLong_AsLong(ln)
						       : t->tb_lineno;
			Py_XDECREF(ln);
			PyErr_Clear();
			Py_DECREF(co); /* the frame keeps it alive */
			total++;
		}
		tb = (PyObject *)t->tb_next;
	}
	n = total < TB_MAX ? total : TB_MAX;
	crash_report_python(o, "traceback, most recent call first");
	for (size_t i = 0; i < n; i++) {
		struct tb_frame *f = &tf[(total - 1 - i) % TB_MAX];
		PyCodeObject *co = (PyCodeObject *)f->code;
		const char *func = PyUnicode_AsUTF8(cpython.frame.qualname(co));
		const char *file = PyUnicode_AsUTF8(co->co_filename);

		PyErr_Clear();
		crash_report_frame(o, func ? func : "?", file ? file : "?",
				   f->lineno);
	}
	if (!n)
		crash_report_note(o, "no traceback");
	if (total > n)
		crash_report_note(o, "more frames not shown");
	crash_out_flush(o);
}

static void exception_report(PyObject *type, PyObject *value, PyObject *tb)
{
	PyObject *et, *ev, *etb, *s;
	char reason[1024], path[PATH_MAX];
	const char *tname = PyType_Check(type) ? ((PyTypeObject *)type)->tp_name
					       : "exception";
	const char *msg;
	long tid = gettid_();
	int fd;

	if (!acquire(tid, 0))
		return; /* a crash report is being written */
	PyErr_Fetch(&et, &ev, &etb);
	s = value ? PyObject_Str(value) : NULL;
	msg = s ? PyUnicode_AsUTF8(s) : NULL;
	PyErr_Clear();
	snprintf(reason, sizeof(reason), "uncaught %s%s%s", tname,
		 msg && *msg ? ": " : "", msg ? msg : "");
	fd = crash_report_open("crash", path, sizeof(path));
	if (fd >= 0) {
		crash_out_init(&out);
		crash_out_fd(&out, fd);
		crash_report_head(&out, "exception", reason);
		if (record_dir()[0])
			crash_report_key(&out, "recording", record_dir());
		crash_report_key(&out, "exception", tname);
		crash_report_key_int(&out, "thread", tid);
		crash_report_body(&out);
		write_threads(&out, tid, "exception", 1, tb_part, tb);
		crash_report_end(&out);
		close(fd);
		record_end_report(path);
	} else {
		snprintf(path, sizeof(path), "%s",
			 report_dir[0] ? report_dir : ".");
	}
	tell("exception", fd, path);
	Py_XDECREF(s);
	PyErr_Restore(et, ev, etb);
	release();
}

/* ---- settings ------------------------------------------------------------ */

int crash_path_canon(const char *text, char *canon, size_t canonlen, char *err,
		     size_t errlen)
{
	struct stat st;

	if (strlen(text) + 64 >= PATH_MAX || strlen(text) >= canonlen) {
		snprintf(err, errlen, "crash.path: too long");
		return -EINVAL;
	}
	if (*text && (stat(text, &st) < 0 || !S_ISDIR(st.st_mode) ||
		      access(text, W_OK) < 0)) {
		snprintf(err, errlen,
			 "crash.path: '%s' is not a directory "
			 "this process may write in",
			 text);
		return -EINVAL;
	}
	snprintf(canon, canonlen, "%s", text);
	return 0;
}

static void apply(void)
{
	char dir[CONFIG_VALUE_MAX];
	int on = config_bool("crash.enabled");

	if (config_get("crash.path", dir, sizeof(dir)) == 0)
		snprintf(report_dir, sizeof(report_dir), "%s", dir);
	if (on) {
		install();
		/* The main thread's alternate stack and the audit hook need
		 * the main thread and the GIL: its next pending call. */
		if (!atomic_exchange(&pending_queued, 1) &&
		    Py_AddPendingCall(on_main_thread, NULL) < 0) {
			atomic_store(&pending_queued, 0);
			log_warn("crash: could not schedule the main thread's "
				 "set-up (alternate stack, exception hook)");
		}
	} else {
		uninstall();
	}
}

static void on_change(const char *name)
{
	(void)name;
	apply();
}

int crash_start(char *err, size_t errlen)
{
	static int listening;

	if (!listening && config_on_change("crash.", on_change)) {
		snprintf(err, errlen, "crash: no room for a settings listener");
		return -ENOSPC;
	}
	listening = 1;
	apply();
	return 0;
}
