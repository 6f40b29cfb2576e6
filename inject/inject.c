/*
 * inject: the injection sequence; see inject.h.
 */
#include "inject.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "arch/arch.h"
#include "layout.h"
#include "maps.h"
#include "proc.h"
#include "tracee.h"

#define POLL_FIRST_US 50
#define POLL_MAX_US 2000
#define SHELL_MAX 8192		  /* shellcode + path, at most */
#define INJECT_STOP_WAIT_MS 1000  /* for one thread's stops, at most */
#define INJECT_LOST_MAX 16	  /* threads that did not stop, kept */
#define INJECT_LOST_GRACE_MS 2000 /* waiting for them at the end */

struct run {
	pid_t pid;
	const struct inject_opts *opts;
	struct inject_result *res;
	struct inject_layout layout;
	const struct inject_arch *arch;
	struct inject_tracee t;
	struct inject_regs regs, resume; /* R at the stop, R' */
	struct inject_where where;
	struct inject_shell shell; /* what the shellcode was built from */
	char copied[PATH_MAX + 64];
	int64_t start;
	int64_t stopped_at;  /* the interrupt of the stop that was used */
	int64_t released_at; /* its detach */
	/* Threads seized that did not stop in time: detached as soon as
	 * they stop (inject_tracee_reap), so none stays stopped. */
	pid_t lost[INJECT_LOST_MAX];
	int nlost;
};

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static double ms_since(int64_t from, int64_t to)
{
	return (double)(to - from) / 1e6;
}

static void step(struct run *r, const char *name)
{
	if (r->opts->step)
		r->opts->step(r->opts->step_arg, name);
	if (r->opts->step_delay_us > 0)
		sleep_us(r->opts->step_delay_us);
}

/* ---- choosing a safe stop -------------------------------------------- */

static int is_locked_syscall(const struct inject_arch *a, int64_t nr)
{
	for (const int *p = a->locked_syscalls; *p >= 0; p++)
		if (*p == nr)
			return 1;
	return 0;
}

/*
 * Whether a thread stopped at w may call dlopen.  A dlopen takes the
 * loader lock and mallocs: a thread stopped while holding either would
 * deadlock (or corrupt the heap).  Those locks are held only by code in
 * libc and the loader, so: not in their code, except in a system call
 * that they make without those locks (the sleeping calls).  Not trusted:
 * any call made from the loader's own code (it reads and maps files with
 * its lock held), and the calls libc makes with a lock held (malloc's
 * mmap, munmap, mprotect, brk, madvise, mremap; fork's clone, with every
 * arena locked).
 */
static int safe_point(const struct run *r, const struct inject_where *w,
		      const char **why)
{
	const struct inject_layout *l = &r->layout;

	if (w->nr >= 0) {
		if (inject_layout_in(l->loader, l->nloader, w->pc)) {
			*why = "in a system call of the dynamic loader";
			return 0;
		}
		if (inject_layout_in(l->runtime, l->nruntime, w->pc) &&
		    is_locked_syscall(r->arch, w->nr)) {
			*why = "in a system call libc makes with a lock held";
			return 0;
		}
		return 1;
	}
	if (inject_layout_in(l->runtime, l->nruntime, w->pc)) {
		*why = "running C library or loader code";
		return 0;
	}
	return 1;
}

/* Lets a stopped thread run on (a signal it stopped for delivered). */
static int run_on(struct run *r, char *err, size_t errlen)
{
	return inject_tracee_cont(
		&r->t, r->t.stop == INJECT_STOP_SIGNAL ? r->t.sig : 0, err,
		errlen);
}

/* Tries one thread: stops it until it is at a safe point or the tries run
 * out.  Returns 0 stopped safely with r->regs, r->resume, r->where; 1 not
 * safe; < 0 an error.  Unless 0, the thread is let go. */
static int try_thread(struct run *r, pid_t tid, int tries, char *err,
		      size_t errlen)
{
	const char *why = "not stopped in time";
	char last[256] = "";
	int rc, stops = 0;

	r->stopped_at = inject_now_ns();
	rc = inject_tracee_seize(&r->t, tid, err, errlen);
	if (rc)
		goto fail;
	for (int i = 0; i < tries && inject_now_ns() < r->t.deadline; i++) {
		r->res->attempts++;
		if (i > 0) {
			if ((rc = run_on(r, err, errlen)))
				goto fail;
			sleep_us(INJECT_TRY_GAP_US);
			r->stopped_at = inject_now_ns();
			if ((rc = inject_tracee_interrupt(&r->t, err, errlen)))
				goto fail;
		}
		stops++;
		if ((rc = r->arch->regs_get(&r->t, &r->regs, err, errlen)) ||
		    (rc = r->arch->where(&r->t, &r->regs, &r->where, err,
					 errlen)))
			goto fail;
		if (!safe_point(r, &r->where, &why))
			continue;
		rc = r->arch->resume(&r->t, &r->regs, &r->resume, err, errlen);
		if (rc != -EAGAIN) {
			if (rc)
				goto fail;
			return 0;
		}
		snprintf(last, sizeof(last), "%s", err);
		why = last;
	}
	snprintf(err, errlen, "thread %d was %s (%d stops)", (int)tid, why,
		 stops);
	rc = 1;
fail:
	inject_tracee_release(&r->t);
	if (r->t.tid) {
		/* Still running with our interrupt pending: it will stop
		 * later; remember it so that it is let go then. */
		if (r->nlost < INJECT_LOST_MAX)
			r->lost[r->nlost++] = r->t.tid;
		r->t.tid = 0;
		r->t.stop = INJECT_STOP_RUNNING;
	}
	return rc;
}

/* Detaches the lost threads that have stopped; with wait, waits up to
 * INJECT_LOST_GRACE_MS for the others. */
static void reap_lost(struct run *r, int wait)
{
	int64_t until = inject_now_ns() + INJECT_LOST_GRACE_MS * 1000000LL;

	for (;;) {
		int left = 0;

		for (int i = 0; i < r->nlost; i++) {
			if (r->lost[i] && inject_tracee_reap(r->lost[i]))
				r->lost[i] = 0;
			left += r->lost[i] != 0;
		}
		if (!left || !wait || inject_now_ns() >= until)
			return;
		sleep_us(1000);
	}
}

static int explain(struct run *r, int rc, const char *what, char *err,
		   size_t errlen)
{
	if (rc == -EPERM || rc == -EACCES) {
		inject_proc_explain_denied(r->pid, what, -rc, err, errlen);
		return -EPERM;
	}
	return rc;
}

static int stop_safely(struct run *r, char *err, size_t errlen)
{
	pid_t tids[INJECT_THREADS_MAX];
	int64_t deadline = r->t.deadline;
	char why[512] = "";
	int n, rc;

	n = inject_proc_threads(r->pid, tids, INJECT_THREADS_MAX);
	if (n <= 0) {
		snprintf(err, errlen, "process %d has no threads to use",
			 (int)r->pid);
		return -ESRCH;
	}
	for (int i = 0; i < n && inject_now_ns() < deadline; i++) {
		char st = inject_proc_thread_state(r->pid, tids[i]);

		/* T/t: stopped, Z/X: gone.  D is fine: the interrupt waits
		 * for it to leave (a vfork parent does, as soon as its child
		 * execs), but only INJECT_STOP_WAIT_MS per thread while
		 * another thread is left to try; the last one gets all the
		 * time there is. */
		if (st == 'T' || st == 't' || st == 'Z' || st == 'X' ||
		    st == '?')
			continue;
		r->t.deadline =
			inject_now_ns() + INJECT_STOP_WAIT_MS * 1000000LL;
		if (r->t.deadline > deadline || i == n - 1)
			r->t.deadline = deadline;
		rc = try_thread(r, tids[i],
				i == 0 ? INJECT_TRIES_MAIN : INJECT_TRIES_OTHER,
				err, errlen);
		r->t.deadline = deadline;
		if (rc == 0) {
			r->res->tid = tids[i];
			return 0;
		}
		if (rc == -EPERM || rc == -EACCES)
			return explain(r, rc, "PTRACE_SEIZE", err, errlen);
		if (rc == -EAGAIN)
			return rc;
		if (rc == -ESRCH && kill(r->pid, 0) < 0) {
			snprintf(err, errlen, "process %d exited", (int)r->pid);
			return -ESRCH;
		}
		/* Not safe, too slow to stop, or gone: the next thread. */
		if (rc < 0 && rc != -ESRCH && rc != -ETIMEDOUT)
			return rc;
		if (rc != -ESRCH && !why[0])
			snprintf(why, sizeof(why), "%s", err);
	}
	snprintf(err, errlen,
		 "no thread of process %d stopped at a safe point in time "
		 "(%s); nothing was changed, try again",
		 (int)r->pid, why[0] ? why : "none could be stopped");
	return -EBUSY;
}

/* ---- caves ------------------------------------------------------------ */

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/*
 * A data cave to use: a pristine one, or one holding our result area from
 * an injection that is over — done, or written by an injector that died
 * before it sent a thread in (state still WRITTEN, injector gone).  Never
 * one whose shellcode may be running (STARTED, or WRITTEN by a live
 * injector).  *reuse = the code cave that area names (0 for none).
 */
static const struct inject_cave *pick_data(struct run *r, uint64_t *reuse)
{
	uint8_t area[INJECT_RESULT_SIZE];
	char err[128];

	*reuse = 0;
	for (size_t i = 0; i < r->layout.ndata; i++) {
		const struct inject_cave *c = &r->layout.data[i];
		uint32_t state, injector;

		if (c->len < INJECT_RESULT_SIZE)
			continue;
		if (c->pristine)
			return c;
		if (inject_tracee_read(&r->t, c->addr, area, sizeof(area), err,
				       sizeof(err)) ||
		    get64(area + INJECT_RESULT_MAGIC) != INJECT_MAGIC)
			continue;
		state = get32(area + INJECT_RESULT_STATE);
		injector = get32(area + INJECT_RESULT_INJECTOR);
		if (state == INJECT_STATE_DONE ||
		    (state == INJECT_STATE_WRITTEN && injector > 0 &&
		     kill((pid_t)injector, 0) < 0 && errno == ESRCH)) {
			*reuse = get64(area + INJECT_RESULT_CODE);
			return c;
		}
	}
	return NULL;
}

/* Builds the shellcode for the first code cave that can take it: a
 * pristine one, or reuse (ours, from an injection that is over). */
static const struct inject_cave *pick_code(struct run *r,
					   struct inject_shell *s, uint8_t *buf,
					   ssize_t *len, uint64_t reuse,
					   char *err, size_t errlen)
{
	size_t need = r->arch->shell_size(strlen(s->path));

	for (size_t i = 0; i < r->layout.ncode; i++) {
		const struct inject_cave *c = &r->layout.code[i];
		char e2[256];

		if (c->len < need || (!c->pristine && c->addr != reuse))
			continue;
		s->code = c->addr;
		*len = r->arch->shell_build(s, buf, SHELL_MAX, e2, sizeof(e2));
		if (*len > 0)
			return c;
		snprintf(err, errlen, "%s", e2);
	}
	if (!err[0])
		snprintf(err, errlen,
			 "no free code cave of %zu bytes in process %d", need,
			 (int)r->pid);
	return NULL;
}

/* ---- the steps -------------------------------------------------------- */

static void describe(struct run *r)
{
	const struct inject_where *w = &r->where;
	const char *name = w->nr >= 0 ? r->arch->syscall_name(w->nr) : NULL;
	struct inject_maps m;
	char err[128], file[64] = "?", sys[32];

	if (inject_maps_read(r->pid, &m, err, sizeof(err)) == 0) {
		const struct inject_mapping *e = inject_maps_at(&m, w->pc);
		if (e && e->path[0]) {
			const char *b = strrchr(e->path, '/');
			snprintf(file, sizeof(file), "%s", b ? b + 1 : e->path);
		}
	}
	inject_maps_release(&m);
	if (name)
		snprintf(sys, sizeof(sys), "%s", name);
	else
		snprintf(sys, sizeof(sys), "#%lld", (long long)w->nr);
	if (w->nr >= 0 && w->restart != INJECT_RESUME)
		snprintf(r->res->where, sizeof(r->res->where),
			 "in system call %s (%s), restarted after", sys, file);
	else if (w->nr >= 0)
		snprintf(r->res->where, sizeof(r->res->where),
			 "leaving system call %s (%s)", sys, file);
	else
		snprintf(r->res->where, sizeof(r->res->where),
			 "running code in %s", file);
}

static int library_loaded(pid_t pid, const char *path)
{
	struct inject_maps m;
	char err[128];
	int found = 0;

	if (inject_maps_read(pid, &m, err, sizeof(err)))
		return 0;
	for (size_t i = 0; i < m.n && !found; i++)
		found = !strcmp(m.v[i].path, path);
	inject_maps_release(&m);
	return found;
}

static int check(struct run *r, const char *path, char *abs, char *err,
		 size_t errlen)
{
	struct inject_proc p;
	struct stat st;
	int rc;

	if (!realpath(path, abs) || stat(abs, &st) < 0 ||
	    !S_ISREG(st.st_mode) || access(abs, R_OK) < 0) {
		snprintf(err, errlen, "library not found or not readable: %s",
			 path);
		return -ENOENT;
	}
	rc = inject_proc_read(r->pid, &p, err, errlen);
	if (rc)
		return rc;
	if (p.state == 'T') {
		snprintf(err, errlen,
			 "process %d is stopped (job control); continue it "
			 "first (kill -CONT %d)",
			 (int)r->pid, (int)r->pid);
		return -EAGAIN;
	}
	if (p.tracer) {
		inject_proc_explain_denied(r->pid, "checking its status", EBUSY,
					   err, errlen);
		return -EPERM;
	}
	rc = inject_layout_read(r->pid, &r->layout, err, errlen);
	if (rc)
		return explain(r, rc, "reading its memory", err, errlen);
	r->arch = r->layout.arch;
	if (!r->arch->regs_get) {
		snprintf(err, errlen, "this build cannot inject into %s",
			 r->arch->name);
		return -ENOEXEC;
	}
	if (r->layout.restart) {
		/* The agent is there (a forked child of a process that had
		 * it): started again, never loaded twice. */
		r->res->restarted = 1;
		snprintf(r->res->target_path, sizeof(r->res->target_path),
			 "%s", r->layout.agent);
		return 0;
	}
	rc = inject_proc_library(r->pid, abs, r->res->target_path,
				 sizeof(r->res->target_path), r->copied,
				 sizeof(r->copied), r->res->note,
				 sizeof(r->res->note), err, errlen);
	if (rc)
		return -ENOENT; /* not visible in the target: err says why */
	if (library_loaded(r->pid, r->res->target_path)) {
		snprintf(err, errlen, "%s is loaded in process %d already",
			 r->res->target_path, (int)r->pid);
		return -EALREADY;
	}
	if (r->arch->shell_size(strlen(r->res->target_path)) > SHELL_MAX) {
		snprintf(err, errlen, "library path too long");
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Writes the result area and the shellcode, and reads the code back. */
static int write_caves(struct run *r, char *err, size_t errlen)
{
	uint8_t area[INJECT_RESULT_SIZE] = {0}, *buf = NULL, *back = NULL;
	const struct inject_cave *data, *code;
	struct inject_shell *s = &r->shell;
	uint64_t reuse;
	ssize_t len = 0;
	int rc = -ENOMEM;

	err[0] = '\0';
	*s = (struct inject_shell){
		.dlopen = r->res->restarted ? r->layout.restart
					    : r->layout.dlopen,
		.dlerror = r->res->restarted ? 0 : r->layout.dlerror,
		.errno_fn = r->layout.errno_fn,
		.mode = r->layout.mode,
		.path = r->res->target_path,
		.xsave_size = r->arch->xsave_size ? r->arch->xsave_size() : 0,
		.resume = &r->resume,
	};
	data = pick_data(r, &reuse);
	if (!data) {
		snprintf(err, errlen,
			 "no free data cave in process %d (an injection may "
			 "still be running in it)",
			 (int)r->pid);
		return -ENOSPC;
	}
	s->result = data->addr;
	buf = malloc(SHELL_MAX);
	back = malloc(SHELL_MAX);
	if (!buf || !back)
		goto out;
	code = pick_code(r, s, buf, &len, reuse, err, errlen);
	if (!code) {
		rc = -ENOSPC;
		goto out;
	}
	put_le(area + INJECT_RESULT_MAGIC, INJECT_MAGIC, 8);
	put_le(area + INJECT_RESULT_CODE, code->addr, 8);
	put_le(area + INJECT_RESULT_INJECTOR, (uint64_t)getpid(), 4);
	if ((rc = inject_tracee_write(&r->t, data->addr, area, sizeof(area),
				      err, errlen)) ||
	    (rc = inject_tracee_write(&r->t, code->addr, buf, (size_t)len, err,
				      errlen)) ||
	    (rc = inject_tracee_read(&r->t, code->addr, back, (size_t)len, err,
				     errlen)))
		goto out;
	if (memcmp(buf, back, (size_t)len)) {
		snprintf(err, errlen,
			 "the code written at 0x%llx reads back different",
			 (unsigned long long)code->addr);
		rc = -EIO;
		goto out;
	}
	r->res->code = code->addr;
	r->res->data = data->addr;
	snprintf(r->res->code_file, sizeof(r->res->code_file), "%s",
		 code->file);
	snprintf(r->res->data_file, sizeof(r->res->data_file), "%s",
		 data->file);
out:
	free(buf);
	free(back);
	return rc;
}

/* Polls the result area until done; reads the outcome. */
static int wait_done(struct run *r, char *err, size_t errlen)
{
	uint8_t area[INJECT_RESULT_SIZE];
	long pause = POLL_FIRST_US;
	char e2[256];

	for (;;) {
		if (inject_tracee_read(&r->t, r->res->data, area, sizeof(area),
				       e2, sizeof(e2))) {
			snprintf(err, errlen,
				 "process %d exited during the injection",
				 (int)r->pid);
			return -ESRCH;
		}
		if (get32(area + INJECT_RESULT_STATE) == INJECT_STATE_DONE)
			break;
		if (inject_now_ns() >= r->t.deadline) {
			snprintf(err, errlen,
				 "thread %d has not finished loading %s in "
				 "time (another thread may hold the loader "
				 "lock); it will go on by itself when it does, "
				 "the process is otherwise unaffected",
				 (int)r->res->tid, r->res->target_path);
			return -ETIMEDOUT;
		}
		sleep_us(pause);
		if (pause < POLL_MAX_US)
			pause *= 2;
	}
	r->res->handle = get64(area + INJECT_RESULT_HANDLE);
	if (!r->res->handle && r->res->restarted) {
		snprintf(err, errlen,
			 "the agent loaded in process %d already (%s) did not "
			 "start again (see the process's stderr)",
			 (int)r->pid, r->res->target_path);
		return -ELIBBAD;
	}
	if (!r->res->handle) {
		area[sizeof(area) - 1] = '\0';
		snprintf(err, errlen, "dlopen(\"%s\") failed in process %d: %s",
			 r->res->target_path, (int)r->pid,
			 area[INJECT_RESULT_ERROR]
				 ? (const char *)area + INJECT_RESULT_ERROR
				 : "(no dlerror() text)");
		return -ELIBBAD;
	}
	return 0;
}

int inject_python_version(pid_t pid, unsigned *version, char *err,
			  size_t errlen)
{
	struct inject_layout *l = malloc(sizeof(*l));
	int rc;

	*version = 0;
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = inject_layout_python(pid, l, err, errlen);
	if (rc == -EPERM || rc == -EACCES) {
		inject_proc_explain_denied(pid, "reading its memory", -rc, err,
					   errlen);
		rc = -EPERM;
	}
	if (!rc)
		*version = l->python_version;
	free(l);
	return rc;
}

int inject_library(pid_t pid, const char *path, const struct inject_opts *opts,
		   struct inject_result *res, char *err, size_t errlen)
{
	static const struct inject_opts no_opts;
	struct run *r = calloc(1, sizeof(*r));
	char abs[PATH_MAX];
	int entered = 0, rc;

	memset(res, 0, sizeof(*res));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->pid = pid;
	r->opts = opts ? opts : &no_opts;
	r->res = res;
	r->t.memfd = -1;
	r->start = inject_now_ns();
	step(r, "check");
	rc = check(r, path, abs, err, errlen);
	if (rc)
		goto out;
	rc = inject_tracee_open(
		&r->t, pid,
		r->start + (int64_t)(r->opts->timeout_ms > 0
					     ? r->opts->timeout_ms
					     : INJECT_TIMEOUT_DEFAULT) *
				   1000000,
		err, errlen);
	if (rc) {
		rc = explain(r, rc, "opening its memory", err, errlen);
		goto out;
	}
	rc = stop_safely(r, err, errlen);
	reap_lost(r, 0);
	if (rc)
		goto out;
	step(r, "attach");
	rc = write_caves(r, err, errlen);
	if (rc)
		goto out;
	step(r, "write");
	rc = r->arch->enter(&r->t, &r->shell, err, errlen);
	if (rc)
		goto out;
	entered = 1;
	step(r, "enter");
	rc = inject_tracee_detach(&r->t, 0);
	r->released_at = inject_now_ns();
	res->stopped_ms = ms_since(r->stopped_at, r->released_at);
	describe(r);
	if (rc) {
		snprintf(err, errlen, "PTRACE_DETACH: %s", strerror(-rc));
		goto out;
	}
	step(r, "detach");
	rc = wait_done(r, err, errlen);
	res->dlopen_ms = ms_since(r->released_at, inject_now_ns());
out:
	/* A thread still stopped here has not been sent into the shellcode
	 * (or has, and then it runs it): close() detaches either way. */
	inject_tracee_close(&r->t);
	reap_lost(r, 1);
	if (r->copied[0] && (!entered || rc != -ETIMEDOUT))
		unlink(r->copied);
	res->total_ms = ms_since(r->start, inject_now_ns());
	free(r);
	return rc;
}
