/*
 * remote_exec: PEP 768's way in; see remote_exec.h.
 */
#include "remote_exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "elfsym.h"
#include "inject.h"
#include "layout.h"
#include "maps.h"
#include "proc.h"
#include "cpython/remote_layout.h"

#define ADDR_END (UINT64_C(1) << 63) /* no address read is at or above */
#define STRUCT_MAX (1u << 20)	     /* a structure's size, at most */
#define PATH_SIZE_MIN 64	     /* debugger_script_path's, at least */
#define PATH_SIZE_MAX 4096	     /* and at most */
#define LOADER_MAX 8192		     /* the loader's text */
#define SWEEP_MAX 65536		     /* entries of its /tmp looked at */
#define SWEEP_YOUNG_S 5		     /* files younger are left alone */
#define POLL_FIRST_US 100
#define POLL_MAX_US 2000

/* The offsets the target publishes, once checked (remote_layout.h). */
struct offsets {
	uint64_t v[INJECT_RF_COUNT];
	uint64_t hex;
	uint32_t stop_bit;
};

struct rx {
	pid_t pid;
	int memfd;
	struct offsets o;
	uint64_t runtime, interp, tstate; /* the main thread's */
	uid_t euid;			  /* the target's */
	char loader[64], report[64];	  /* in its /tmp, as it sees them */
	const char *loader_name, *report_name; /* in them, past "/tmp/" */
	int tmp_fd;	   /* its /tmp, held: the names go even if it exits */
	int loader_made;   /* the loader is there, to unlink */
	int report_fd;	   /* ours, to read it; -1 */
	int can_report; /* the target can write the report */
	char copied[PATH_MAX + 64];
	int64_t start, deadline;
	const volatile sig_atomic_t *stop; /* the caller's; NULL */
	struct inject_remote_result *res;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static double ms_between(int64_t from, int64_t to)
{
	return (double)(to - from) / 1e6;
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ---- the target's memory ---------------------------------------------- */

/* -ESRCH when the process is gone, else e. */
static int gone_or(const struct rx *r, int e)
{
	return kill(r->pid, 0) < 0 && errno == ESRCH ? -ESRCH : e;
}

/* Reads len bytes at addr, all of them or an error: -EFAULT for an
 * address no user space has, -EIO for one not mapped. */
static int mem_read(const struct rx *r, uint64_t addr, void *buf, size_t len)
{
	ssize_t n;

	if (!addr || addr >= ADDR_END || len > ADDR_END - addr)
		return -EFAULT;
	n = pread(r->memfd, buf, len, (off_t)addr);
	return n == (ssize_t)len ? 0 : gone_or(r, -EIO);
}

static int mem_write(const struct rx *r, uint64_t addr, const void *buf,
		     size_t len)
{
	ssize_t n;

	if (!addr || addr >= ADDR_END || len > ADDR_END - addr)
		return -EFAULT;
	n = pwrite(r->memfd, buf, len, (off_t)addr);
	return n == (ssize_t)len ? 0 : gone_or(r, n < 0 ? -errno : -EIO);
}

/* A pointer read from the target, as one: non-null, 8-aligned, below
 * ADDR_END.  0 when it is NULL; -EFAULT when it is no pointer. */
static int read_pointer(const struct rx *r, uint64_t addr, uint64_t *p)
{
	uint8_t b[8];
	int rc = mem_read(r, addr, b, sizeof(b));

	if (rc)
		return rc;
	*p = le64(b);
	return *p && (*p >= ADDR_END || (*p & 7)) ? -EFAULT : 0;
}

static int read_i32(const struct rx *r, uint64_t addr, int32_t *v)
{
	return mem_read(r, addr, v, sizeof(*v));
}

/* ---- finding the structures -------------------------------------------- */

/* Where _PyRuntime is in the target (python: the file that has it). */
static int find_runtime(pid_t pid, const char *python, uint64_t *runtime,
			char *err, size_t errlen)
{
	struct inject_maps m;
	struct inject_elf *e = NULL;
	char path[PATH_MAX + 64];
	uint64_t base, v;
	int rc;

	rc = inject_maps_read(pid, &m, err, errlen);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, python);
	rc = inject_elf_open(path, &e, err, errlen);
	base = inject_maps_base(&m, python);
	if (!rc && (!base || inject_elf_symbol(e, "_PyRuntime", &v))) {
		snprintf(err, errlen, "no _PyRuntime in %s", python);
		rc = -ENOEXEC;
	}
	if (!rc)
		*runtime = base + v - inject_elf_bias(e);
	inject_elf_free(e);
	inject_maps_release(&m);
	return rc;
}

/* Whether [off, off + len) lies inside a structure of size bytes. */
static int inside(uint64_t off, uint64_t len, uint64_t size)
{
	return size <= STRUCT_MAX && off <= size && len <= size - off;
}

/*
 * Reads and checks _Py_DebugOffsets at r->runtime: the cookie, the version
 * (version: major << 8 | minor, from Py_Version), a layout for it, and
 * that every offset used lies inside its structure.
 */
static int read_offsets(struct rx *r, unsigned version, char *err,
			size_t errlen)
{
	const struct inject_remote_layout *lay;
	uint8_t raw[INJECT_REMOTE_SIZE_MAX];
	const uint64_t *v = r->o.v;
	uint64_t path;
	int rc;

	rc = mem_read(r, r->runtime, raw, INJECT_REMOTE_AT_FREE_THREADED);
	if (rc) {
		snprintf(err, errlen, "cannot read _PyRuntime in process %d",
			 (int)r->pid);
		return rc;
	}
	r->o.hex = le64(raw + INJECT_REMOTE_AT_VERSION);
	if (memcmp(raw, INJECT_REMOTE_COOKIE, 8) ||
	    (r->o.hex >> 16) != version) {
		snprintf(err, errlen,
			 "process %d's _PyRuntime does not start with the "
			 "debug offsets of CPython %u.%u (cookie or version "
			 "differ)",
			 (int)r->pid, version >> 8, version & 0xff);
		return -ENOSYS;
	}
	lay = inject_remote_layout_for(r->o.hex);
	if (!lay) {
		snprintf(err, errlen,
			 "CPython %u.%u (version 0x%08llx) in process %d: this "
			 "build of Probing knows no PEP 768 layout for it",
			 version >> 8, version & 0xff,
			 (unsigned long long)r->o.hex, (int)r->pid);
		return -ENOSYS;
	}
	if (lay->size > sizeof(raw) ||
	    (rc = mem_read(r, r->runtime, raw, lay->size))) {
		snprintf(err, errlen,
			 "cannot read the debug offsets in process %d",
			 (int)r->pid);
		return rc ? rc : -EIO;
	}
	for (int i = 0; i < INJECT_RF_COUNT; i++) {
		if (lay->at[i] > lay->size - 8)
			return -EINVAL; /* our build is wrong */
		r->o.v[i] = le64(raw + lay->at[i]);
	}
	r->o.stop_bit = lay->stop_bit;
	path = v[INJECT_RF_SUPPORT] + v[INJECT_RF_SCRIPT_PATH];
	if (!inside(v[INJECT_RF_INTERPRETERS_HEAD], 8,
		    v[INJECT_RF_RUNTIME_SIZE]) ||
	    !inside(v[INJECT_RF_INTERP_ID], 8, v[INJECT_RF_INTERP_SIZE]) ||
	    !inside(v[INJECT_RF_INTERP_NEXT], 8, v[INJECT_RF_INTERP_SIZE]) ||
	    !inside(v[INJECT_RF_THREADS_MAIN], 8, v[INJECT_RF_INTERP_SIZE]) ||
	    !inside(v[INJECT_RF_ENABLED], 4, v[INJECT_RF_INTERP_SIZE]) ||
	    !inside(v[INJECT_RF_TSTATE_NATIVE_ID], 8,
		    v[INJECT_RF_TSTATE_SIZE]) ||
	    !inside(v[INJECT_RF_EVAL_BREAKER], 8, v[INJECT_RF_TSTATE_SIZE]) ||
	    (v[INJECT_RF_EVAL_BREAKER] & 7) ||
	    v[INJECT_RF_SUPPORT] > STRUCT_MAX ||
	    v[INJECT_RF_PENDING_CALL] > STRUCT_MAX ||
	    !inside(v[INJECT_RF_SUPPORT] + v[INJECT_RF_PENDING_CALL], 4,
		    v[INJECT_RF_TSTATE_SIZE]) ||
	    ((v[INJECT_RF_SUPPORT] + v[INJECT_RF_PENDING_CALL]) & 3) ||
	    v[INJECT_RF_SCRIPT_PATH] > STRUCT_MAX ||
	    v[INJECT_RF_SCRIPT_PATH_SIZE] < PATH_SIZE_MIN ||
	    v[INJECT_RF_SCRIPT_PATH_SIZE] > PATH_SIZE_MAX ||
	    !inside(path, v[INJECT_RF_SCRIPT_PATH_SIZE],
		    v[INJECT_RF_TSTATE_SIZE])) {
		snprintf(err, errlen,
			 "process %d publishes debug offsets that do not "
			 "hold together (an offset outside its structure): "
			 "not trusted",
			 (int)r->pid);
		return -ENOSYS;
	}
	return 0;
}

/* What /proc says turned remote debugging off, into why. */
static void why_off(pid_t pid, char *why, size_t len)
{
	static const char env[] = "PYTHON_DISABLE_REMOTE_DEBUG=";
	static const char opt[] = "disable-remote-debug";
	char path[64], *buf = malloc(65536);
	int fd, env_set = 0, opt_set = 0;
	ssize_t n;

	snprintf(why, len,
		 "a build --without-remote-debug, or an embedder's "
		 "PyConfig.remote_debug = 0");
	if (!buf)
		return;
	for (int which = 0; which < 2; which++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid,
			 which ? "cmdline" : "environ");
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : read(fd, buf, 65535);
		if (fd >= 0)
			close(fd);
		for (ssize_t i = 0; i < n;) {
			const char *s = buf + i;
			size_t l = strnlen(s, (size_t)(n - i));

			if (!which && l > sizeof(env) - 1 &&
			    !strncmp(s, env, sizeof(env) - 1))
				env_set = 1;
			/* "-X disable-remote-debug", "-Xdisable-remote-debug"
			 */
			if (which && l >= sizeof(opt) - 1 &&
			    !strcmp(s + l - (sizeof(opt) - 1), opt))
				opt_set = 1;
			i += (ssize_t)l + 1;
		}
	}
	free(buf);
	if (env_set || opt_set)
		snprintf(why, len, "%s%s%s",
			 env_set ? "PYTHON_DISABLE_REMOTE_DEBUG is set in "
				   "its environment"
				 : "",
			 env_set && opt_set ? ", and " : "",
			 opt_set ? "it runs with -X disable-remote-debug" : "");
}

/* The main interpreter (id 0), whether remote debugging is on there, and
 * its main thread's state. */
static int find_main(struct rx *r, char *err, size_t errlen)
{
	const uint64_t *v = r->o.v;
	uint64_t p = 0, next, tid = 0;
	int64_t id = -1;
	int32_t on = 0;
	char path[96], why[160];
	int rc, i;

	rc = read_pointer(r, r->runtime + v[INJECT_RF_INTERPRETERS_HEAD], &p);
	for (i = 0; !rc && p && i < INJECT_REMOTE_INTERPS_MAX; i++) {
		rc = mem_read(r, p + v[INJECT_RF_INTERP_ID], &id, sizeof(id));
		if (rc || id == 0)
			break;
		rc = read_pointer(r, p + v[INJECT_RF_INTERP_NEXT], &next);
		p = next;
	}
	if (rc || !p || id != 0) {
		snprintf(err, errlen,
			 "no main interpreter found in process %d (%s)",
			 (int)r->pid,
			 rc ? strerror(-rc) : "finalizing, or not CPython's");
		return rc == -ESRCH ? rc : -EAGAIN;
	}
	r->interp = p;
	rc = read_i32(r, p + v[INJECT_RF_ENABLED], &on);
	if (rc)
		return rc;
	if (on != 1) {
		why_off(r->pid, why, sizeof(why));
		snprintf(err, errlen,
			 "remote debugging is off in process %d: %s",
			 (int)r->pid, why);
		return -ENOTSUP;
	}
	rc = read_pointer(r, p + v[INJECT_RF_THREADS_MAIN], &r->tstate);
	if (!rc && r->tstate)
		rc = mem_read(r, r->tstate + v[INJECT_RF_TSTATE_NATIVE_ID],
			      &tid, sizeof(tid));
	snprintf(path, sizeof(path), "/proc/%d/task/%llu", (int)r->pid,
		 (unsigned long long)tid);
	if (rc || !r->tstate || !tid || tid > INT32_MAX || access(path, F_OK)) {
		snprintf(err, errlen,
			 "process %d's main thread state names no thread of "
			 "it",
			 (int)r->pid);
		return rc == -ESRCH ? rc : -EAGAIN;
	}
	r->res->tid = (pid_t)tid;
	return 0;
}

/* The agent library the target has mapped already (a forked child keeps
 * its parent's), as it names it, into path; "" when none. */
static void mapped_agent(pid_t pid, char *path, size_t len)
{
	struct inject_maps m;
	char err[256];

	path[0] = '\0';
	if (inject_maps_read(pid, &m, err, sizeof(err)))
		return;
	for (size_t i = 0; i < m.n && !path[0]; i++) {
		const char *p = m.v[i].path, *base = strrchr(p, '/');

		if (p[0] == '/' && base &&
		    !strncmp(base + 1, "libprobing", 10) &&
		    strstr(base, ".so") && !strstr(p, " (deleted)"))
			snprintf(path, len, "%s", p);
	}
	inject_maps_release(&m);
}

/* ---- the loader --------------------------------------------------------- */

/* Appends to out[len] at *at, as snprintf; once full, *at stays at len. */
static void append(char *out, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void append(char *out, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*at >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(out + *at, len - *at, fmt, ap);
	va_end(ap);
	*at = n < 0 || (size_t)n >= len - *at ? len : *at + (size_t)n;
}

/* Appends text as a Python bytes literal, every byte but a few escaped. */
static void put_bytes(char *out, size_t len, size_t *at, const char *text)
{
	static const char plain[] =
		"abcdefghijklmnopqrstuvwxyz"
		"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+ ";

	append(out, len, at, "b'");
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		if (strchr(plain, *p))
			append(out, len, at, "%c", *p);
		else
			append(out, len, at, "\\x%02x", *p);
	append(out, len, at, "'");
}

/*
 * The loader's text.  It runs in the target, in the main thread at a safe
 * point, with the GIL: as one statement that binds no name where it runs
 * (some 3.14 releases run the file in __main__'s namespace), it executes
 * its body in a dictionary of its own.  The body loads lib as the
 * extension module it also is (probing._probing, as `import probing`
 * does: dlopen with sys.getdlopenflags()) through _imp and
 * _frozen_importlib, which every interpreter has loaded: no file is read,
 * so the GIL is never let go meanwhile (each time it is, a busy thread
 * keeps it up to the switch interval: importing ctypes took 50 ms so).
 * Restarting a mapped agent (a forked child's) needs a call into it, and
 * _imp takes no path that is not UTF-8: then ctypes.  It writes "STATUS TID
 * MS\nTEXT\nend\n" into the report, in one write, then unlinks itself and
 * the report (the injector reads the report through the descriptor it
 * holds): an injector killed while it waited leaves no file behind.
 */
static int loader_text(const char *lib, const char *script,
		       const char *report, int restart, char *out, size_t len)
{
	static const char body[] =
		"import os, time, _thread\n"
		"t0 = time.perf_counter()\n"
		"def report(status, text=''):\n"
		"    ms = (time.perf_counter() - t0) * 1000\n"
		"    line = '%s %d %.3f\\n%s\\nend\\n' % (status, "
		"_thread.get_native_id(), ms, text[:2000])\n"
		"    try:\n"
		"        fd = os.open(os.fsdecode(OUT), os.O_WRONLY | "
		"os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)\n"
		"        try:\n"
		"            os.write(fd, line.encode('utf-8', "
		"'backslashreplace'))\n"
		"        finally:\n"
		"            os.close(fd)\n"
		"    except Exception:\n"
		"        pass\n"
		"def by_ctypes():\n"
		"    try:\n"
		"        import ctypes\n"
		"    except Exception as e:\n"
		"        return report('noctypes', '%s: %s' % "
		"(type(e).__name__, e))\n"
		"    try:\n"
		"        h = ctypes.CDLL(os.fsdecode(LIB))\n"
		"        if not RESTART:\n"
		"            return report('loaded')\n"
		"        f = h.probing_agent_restart\n"
		"        f.restype = ctypes.c_void_p\n"
		"        f.argtypes = (ctypes.c_char_p, ctypes.c_int)\n"
		"        report('restarted' if f(None, 0) else 'stopped')\n"
		"    except AttributeError:\n"
		"        report('norestart')\n"
		"    except Exception as e:\n"
		"        report('error', '%s: %s' % (type(e).__name__, e))\n"
		"def by_imp():\n"
		"    try:\n"
		"        import _imp, _frozen_importlib\n"
		"        _imp.create_dynamic(_frozen_importlib.ModuleSpec(\n"
		"            'probing._probing', None, "
		"origin=os.fsdecode(LIB)))\n"
		"        report('loaded')\n"
		"    except Exception as e:\n"
		"        report('error', '%s: %s' % (type(e).__name__, e))\n"
		"try:\n"
		"    try:\n"
		"        os.fsdecode(LIB).encode('utf-8')\n"
		"        by_imp() if not RESTART else by_ctypes()\n"
		"    except UnicodeEncodeError:\n"
		"        by_ctypes()\n"
		"finally:\n"
		"    for p in (SCRIPT, OUT):\n"
		"        try:\n"
		"            os.unlink(os.fsdecode(p))\n"
		"        except Exception:\n"
		"            pass\n";
	char *src = malloc(LOADER_MAX);
	size_t at = 0;

	if (!src)
		return -ENOMEM;
	append(src, LOADER_MAX, &at, "LIB = ");
	put_bytes(src, LOADER_MAX, &at, lib);
	append(src, LOADER_MAX, &at, "\nSCRIPT = ");
	put_bytes(src, LOADER_MAX, &at, script);
	append(src, LOADER_MAX, &at, "\nOUT = ");
	put_bytes(src, LOADER_MAX, &at, report);
	append(src, LOADER_MAX, &at, "\nRESTART = %d\n%s", restart ? 1 : 0,
	       body);
	if (at >= LOADER_MAX) {
		free(src);
		return -ENAMETOOLONG;
	}
	/* That source as a bytes literal: no quoting to get wrong. */
	at = 0;
	append(out, len, &at,
	       "# Probing's loader (probing inject, PEP 768): loads the "
	       "agent.\n__import__('builtins').exec(");
	put_bytes(out, len, &at, src);
	free(src);
	append(out, len, &at,
	       ".decode(), {'__name__': '__probing_loader__'})\n");
	return at < len ? 0 : -ENAMETOOLONG;
}

/* A new file of ours in the target's /tmp: O_EXCL, never a link. */
static int create(int dir, const char *name, mode_t mode)
{
	return openat(dir, name,
		      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Whether name is "probing-PID-" then 16 hex digits then ext. */
static int our_name(const char *name, const char *prefix, size_t plen,
		    const char *ext)
{
	if (strncmp(name, prefix, plen) ||
	    strlen(name) != plen + 16 + strlen(ext) ||
	    strcmp(name + plen + 16, ext))
		return 0;
	for (size_t i = plen; i < plen + 16; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return 0;
	return 1;
}

/* Whether the report of the loader called name (".py") exists. */
static int has_report(int dir, const char *name)
{
	char out[64];
	struct stat st;

	snprintf(out, sizeof(out), "%.*s.out", (int)(strlen(name) - 3), name);
	return fstatat(dir, out, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/*
 * Removes the files of earlier injections into this pid whose injector
 * died before their loader could remove them (killed between writing them
 * and asking, or while a withdrawn request was cleaned up), and those a
 * process that had this pid before left.  An injector holds a lock on its
 * report while it lives (from SWEEP_YOUNG_S after creating it at the
 * latest: a younger report may be a live one not locked yet); a loader
 * without a report is an orphan too (its report gone with the loader's
 * run, its own unlink refused).  The loader the main thread's request
 * names is left alone (taken just now, it is about to be read).  Looks at
 * SWEEP_MAX entries of the target's /tmp at most.
 */
static void sweep_orphans(struct rx *r)
{
	uint64_t at = r->tstate + r->o.v[INJECT_RF_SUPPORT] +
		      r->o.v[INJECT_RF_SCRIPT_PATH];
	char named[80] = "", prefix[32], script[80];
	size_t plen, seen = 0;
	struct dirent *e;
	DIR *d;
	int fd;

	if (mem_read(r, at, named, sizeof(named) - 1))
		named[0] = '\0';
	named[sizeof(named) - 1] = '\0';
	plen = (size_t)snprintf(prefix, sizeof(prefix), "probing-%d-",
				(int)r->pid);
	fd = openat(r->tmp_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while (seen++ < SWEEP_MAX && (e = readdir(d))) {
		struct stat st;
		int rfd;

		snprintf(script, sizeof(script), "/tmp/%.*s.py",
			 (int)(plen + 16), e->d_name);
		if (our_name(e->d_name, prefix, plen, ".py")) {
			if (strcmp(script, named) &&
			    !has_report(dirfd(d), e->d_name) &&
			    fstatat(dirfd(d), e->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) == 0 &&
			    st.st_mtime < time(NULL) - SWEEP_YOUNG_S)
				unlinkat(dirfd(d), e->d_name, 0);
			continue;
		}
		if (!our_name(e->d_name, prefix, plen, ".out") ||
		    !strcmp(script, named))
			continue;
		rfd = openat(dirfd(d), e->d_name,
			     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (rfd < 0)
			continue;
		if (fstat(rfd, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_mtime < time(NULL) - SWEEP_YOUNG_S &&
		    flock(rfd, LOCK_EX | LOCK_NB) == 0) {
			unlinkat(dirfd(d), script + strlen("/tmp/"), 0);
			unlinkat(dirfd(d), e->d_name, 0);
		}
		close(rfd);
	}
	closedir(d);
}

/* Writes the loader and creates the report, in the target's /tmp. */
static int write_files(struct rx *r, const char *lib, int restart, char *err,
		       size_t errlen)
{
	uint64_t rnd = 0;
	char *text = malloc(LOADER_MAX * 5);
	size_t limit = (size_t)r->o.v[INJECT_RF_SCRIPT_PATH_SIZE];
	char here[64];
	int fd = -1, rc;

	if (!text)
		return -ENOMEM;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	snprintf(r->loader, sizeof(r->loader), "/tmp/probing-%d-%016llx.py",
		 (int)r->pid, (unsigned long long)rnd);
	snprintf(r->report, sizeof(r->report), "/tmp/probing-%d-%016llx.out",
		 (int)r->pid, (unsigned long long)rnd);
	r->loader_name = r->loader + strlen("/tmp/");
	r->report_name = r->report + strlen("/tmp/");
	if (strlen(r->loader) >= limit) {
		rc = -ENAMETOOLONG;
		snprintf(err, errlen, "the loader's path is too long");
		goto out;
	}
	rc = loader_text(lib, r->loader, r->report, restart, text,
			 LOADER_MAX * 5);
	if (rc) {
		snprintf(err, errlen, "the library's path is too long");
		goto out;
	}
	/* Its /tmp, held open: should it exit before we are done, the
	 * files are still ours to unlink (a later process may get its pid). */
	snprintf(here, sizeof(here), "/proc/%d/root/tmp", (int)r->pid);
	r->tmp_fd = open(here, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r->tmp_fd < 0) {
		rc = errno == ENOENT ? -ESRCH : -errno;
		snprintf(err, errlen, "cannot open %s: %s", here,
			 strerror(-rc));
		goto out;
	}
	sweep_orphans(r);
	/* The report first: the loader must never run without it.  Locked
	 * while we live: sweep_orphans's sign that it is still ours. */
	r->report_fd = create(r->tmp_fd, r->report_name, 0600);
	if (r->report_fd >= 0)
		flock(r->report_fd, LOCK_EX | LOCK_NB);
	if (r->report_fd < 0) {
		rc = -errno;
		snprintf(err, errlen,
			 "cannot create %s (process %d's /tmp): %s",
			 r->report, (int)r->pid, strerror(-rc));
		goto out;
	}
	/* The target writes it: its owner (we may be root). */
	r->can_report = r->euid == geteuid() ||
			fchown(r->report_fd, r->euid, (gid_t)-1) == 0;
	fd = create(r->tmp_fd, r->loader_name, 0644);
	r->loader_made = fd >= 0;
	/* Also the target's, so that the loader may remove itself (when
	 * that fails, the injector removes it, as before). */
	if (fd >= 0 && r->euid != geteuid())
		(void)!fchown(fd, r->euid, (gid_t)-1);
	if (fd < 0 || (rc = write_all(fd, text, strlen(text))) ||
	    fchmod(fd, 0644) < 0) {
		rc = fd < 0 || !rc ? -errno : rc;
		snprintf(err, errlen, "cannot write %s in process %d: %s",
			 r->loader, (int)r->pid, strerror(-rc));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0 && close(fd) < 0 && !rc) {
		rc = -errno;
		snprintf(err, errlen, "cannot write %s in process %d: %s",
			 r->loader, (int)r->pid, strerror(-rc));
	}
	free(text);
	return rc;
}

/* ---- the request -------------------------------------------------------- */

static uint64_t pending_at(const struct rx *r)
{
	return r->tstate + r->o.v[INJECT_RF_SUPPORT] +
	       r->o.v[INJECT_RF_PENDING_CALL];
}

/* Asks the main thread to run the loader. */
static int ask(struct rx *r, char *err, size_t errlen)
{
	const uint64_t *v = r->o.v;
	uint64_t path =
		r->tstate + v[INJECT_RF_SUPPORT] + v[INJECT_RF_SCRIPT_PATH];
	uint64_t breaker = r->tstate + v[INJECT_RF_EVAL_BREAKER];
	int32_t pending = 0, one = 1;
	uint8_t low;
	int rc;

	rc = read_i32(r, pending_at(r), &pending);
	if (!rc && pending) {
		snprintf(err, errlen,
			 "process %d's main thread has a remote debugger "
			 "request pending already (another debugger's): not "
			 "overwritten",
			 (int)r->pid);
		return -EBUSY;
	}
	/* The path before the flag: the thread copies the path once it
	 * sees the flag.  Then the eval breaker's low byte (its event
	 * bits; the instrumentation version above them stays untouched),
	 * read and written back at once (remote_exec.h: the race). */
	if (!rc)
		rc = mem_write(r, path, r->loader, strlen(r->loader) + 1);
	if (!rc)
		rc = mem_write(r, pending_at(r), &one, sizeof(one));
	if (!rc)
		rc = mem_read(r, breaker, &low, 1);
	if (!rc && !(low & r->o.stop_bit)) {
		low |= (uint8_t)r->o.stop_bit;
		rc = mem_write(r, breaker, &low, 1);
	}
	if (rc)
		snprintf(err, errlen,
			 "cannot write the request into process %d: %s",
			 (int)r->pid, strerror(-rc));
	return rc;
}

/* The report, when the loader has written it whole: 1, else 0. */
static int read_report(struct rx *r, char *buf, size_t len)
{
	ssize_t n;

	if (r->report_fd < 0)
		return 0;
	n = pread(r->report_fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	return n > 4 && !strcmp(buf + n - 4, "end\n");
}

/* Where thread tid waits, in words: "S in do_select". */
static void where_waits(pid_t pid, pid_t tid, char *out, size_t len)
{
	char path[96], wchan[64] = "";
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", (int)pid,
		 (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, wchan, sizeof(wchan) - 1);
	if (fd >= 0)
		close(fd);
	wchan[n > 0 ? n : 0] = '\0';
	for (char *c = wchan; *c; c++)
		if (*c < 0x20 || *c > 0x7e)
			*c = '?';
	snprintf(out, len, "state %c%s%s", inject_proc_thread_state(pid, tid),
		 wchan[0] && strcmp(wchan, "0") ? ", in " : "",
		 wchan[0] && strcmp(wchan, "0") ? wchan : "");
}

/* Whether the target has exited (a zombie has: its memory is gone). */
static int exited(pid_t pid)
{
	char state;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return 1;
	state = inject_proc_thread_state(pid, pid);
	return state == 'Z' || state == 'X';
}

/* Whether a target whose memory could not be read is exiting: its memory
 * goes before it is a zombie (up to 200 ms for it to become one). */
static int exiting(pid_t pid)
{
	for (int i = 0; i < 20; i++) {
		if (exited(pid))
			return 1;
		sleep_us(10000);
	}
	return 0;
}

/*
 * Waits for the main thread to take the request (safe_point_ns from the
 * request), withdraws it when it does not, then waits for the report.
 */
static int await(struct rx *r, int64_t safe_point_ns, char *report,
		 size_t report_len, char *err, size_t errlen)
{
	int64_t asked = now_ns(), taken = 0, grace = 0;
	long pause = POLL_FIRST_US;
	int32_t pending = 1, zero = 0;
	char where[128];
	int rc;

	for (;;) {
		if (read_report(r, report, report_len))
			break;
		if (!taken) {
			rc = read_i32(r, pending_at(r), &pending);
			if (rc && exiting(r->pid)) {
				snprintf(err, errlen, "process %d exited",
					 (int)r->pid);
				return -ESRCH;
			}
			if (rc) {
				snprintf(err, errlen,
					 "process %d: cannot read its main "
					 "thread's state: %s",
					 (int)r->pid, strerror(-rc));
				return rc;
			}
			if (!pending && !grace) {
				taken = now_ns();
				r->res->taken_ms = ms_between(asked, taken);
			}
		}
		if (r->stop && *r->stop) {
			if (!taken && !grace)
				mem_write(r, pending_at(r), &zero,
					  sizeof(zero));
			snprintf(err, errlen,
				 taken ? "interrupted while process %d's "
					 "loader ran"
				       : "interrupted; process %d's request "
					 "was withdrawn",
				 (int)r->pid);
			return -EINTR;
		}
		if (!taken && !grace && now_ns() - asked >= safe_point_ns) {
			/* Withdrawn; should the thread have taken it just
			 * now, its report still comes. */
			mem_write(r, pending_at(r), &zero, sizeof(zero));
			grace = now_ns();
		}
		if (grace &&
		    now_ns() - grace >= INJECT_REMOTE_GRACE_MS * 1000000LL) {
			where_waits(r->pid, r->res->tid, where, sizeof(where));
			snprintf(
				err, errlen,
				"the main thread of process %d (thread %d) "
				"reached no safe point in %.1f s: it runs "
				"no Python code now (%s; blocked in C, or in a "
				"long call into C); the request was withdrawn",
				(int)r->pid, (int)r->res->tid,
				(double)safe_point_ns / 1e9, where);
			return -EBUSY;
		}
		if (taken && !r->can_report)
			return 0; /* the agent's answer will tell */
		if (now_ns() >= r->deadline) {
			snprintf(err, errlen,
				 "the main thread of process %d took the "
				 "request %.1f ms after it was made, but the "
				 "loader reported nothing in time (an audit "
				 "hook may refuse remote_debugger_script; see "
				 "the process's stderr)",
				 (int)r->pid, r->res->taken_ms);
			return -ETIMEDOUT;
		}
		if (exited(r->pid)) {
			snprintf(err, errlen, "process %d exited", (int)r->pid);
			return -ESRCH;
		}
		sleep_us(pause);
		if (pause < POLL_MAX_US)
			pause *= 2;
	}
	if (!taken)
		r->res->taken_ms = ms_between(asked, now_ns());
	return 0;
}

/* What the report says: 0, or an error with err. */
static int outcome(struct rx *r, char *report, char *err, size_t errlen)
{
	char status[16] = "", *text = strchr(report, '\n'), *end;
	unsigned tid = 0;
	double ms = 0;

	if (sscanf(report, "%15s %u %lf", status, &tid, &ms) < 1 || !text) {
		snprintf(err, errlen, "the loader's report is garbled");
		return -EIO;
	}
	text++;
	end = strstr(text, "\nend\n");
	if (end)
		*end = '\0';
	for (char *c = text; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = ' ';
	r->res->run_ms = ms;
	if (tid)
		r->res->tid = (pid_t)tid;
	if (!strcmp(status, "loaded"))
		return 0;
	if (!strcmp(status, "restarted")) {
		r->res->restarted = 1;
		return 0;
	}
	if (!strcmp(status, "noctypes")) {
		snprintf(err, errlen,
			 "the loader could not import ctypes in process %d "
			 "(%s): nothing was loaded",
			 (int)r->pid, text);
		return -ENOPKG;
	}
	if (!strcmp(status, "norestart")) {
		snprintf(err, errlen, "%s is loaded in process %d already",
			 r->res->target_path, (int)r->pid);
		return -EALREADY;
	}
	if (!strcmp(status, "stopped")) {
		snprintf(err, errlen,
			 "the agent loaded in process %d already (%s) did not "
			 "start again (see the process's stderr)",
			 (int)r->pid, r->res->target_path);
		return -ELIBBAD;
	}
	snprintf(err, errlen, "loading %s failed in process %d: %s",
		 r->res->target_path, (int)r->pid, text);
	return -ELIBBAD;
}

/* ---- the whole ---------------------------------------------------------- */

static int check(struct rx *r, const char *abs, int *restart, char *err,
		 size_t errlen)
{
	struct inject_layout *l = malloc(sizeof(*l));
	struct inject_proc p;
	char path[64];
	int rc;

	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = inject_proc_read(r->pid, &p, err, errlen);
	if (!rc && p.state == 'T') {
		snprintf(err, errlen,
			 "process %d is stopped (job control); continue it "
			 "first (kill -CONT %d)",
			 (int)r->pid, (int)r->pid);
		rc = -EAGAIN;
	}
	r->euid = p.euid;
	if (!rc)
		rc = inject_layout_python(r->pid, l, err, errlen);
	if (!rc) {
		r->res->version = l->python_version;
		if (l->python_version < 0x030e) {
			snprintf(err, errlen,
				 "CPython %u.%u has no remote debugging "
				 "interface (PEP 768 is 3.14's)",
				 l->python_version >> 8,
				 l->python_version & 0xff);
			rc = -ENOSYS;
		}
	}
	if (!rc)
		rc = find_runtime(r->pid, l->python, &r->runtime, err, errlen);
	free(l);
	if (rc)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)r->pid);
	r->memfd = open(path, O_RDWR | O_CLOEXEC);
	if (r->memfd < 0) {
		rc = errno == ENOENT ? -ESRCH : -errno;
		goto out;
	}
	rc = read_offsets(r, r->res->version, err, errlen);
	if (!rc)
		rc = find_main(r, err, errlen);
	if (rc)
		goto out;
	mapped_agent(r->pid, r->res->target_path, sizeof(r->res->target_path));
	*restart = r->res->target_path[0] != '\0';
	if (!*restart &&
	    inject_proc_library(r->pid, abs, r->res->target_path,
				sizeof(r->res->target_path), r->copied,
				sizeof(r->copied), r->res->note,
				sizeof(r->res->note), err, errlen))
		return -ENOENT; /* not visible in the target: err says why */
out:
	if (rc == -EPERM || rc == -EACCES) {
		inject_proc_explain_denied(r->pid, "opening its memory", -rc,
					   err, errlen);
		rc = -EPERM;
	}
	return rc;
}

int inject_remote_library(pid_t pid, const char *path,
			  const struct inject_remote_opts *opts,
			  struct inject_remote_result *res, char *err,
			  size_t errlen)
{
	struct rx *r = calloc(1, sizeof(*r));
	char abs[PATH_MAX], *report = malloc(INJECT_REMOTE_REPORT_MAX);
	int64_t timeout, safe_point;
	int restart = 0, rc;
	struct stat st;

	memset(res, 0, sizeof(*res));
	err[0] = '\0';
	if (!r || !report) {
		free(r);
		free(report);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->pid = pid;
	r->res = res;
	r->memfd = r->report_fd = r->tmp_fd = -1;
	r->start = now_ns();
	r->stop = opts ? opts->stop : NULL;
	timeout = opts && opts->timeout_ms > 0 ? opts->timeout_ms
					       : INJECT_TIMEOUT_DEFAULT;
	safe_point = opts && opts->safe_point_ms > 0
			     ? opts->safe_point_ms
			     : INJECT_REMOTE_SAFE_POINT_DEFAULT;
	if (safe_point > timeout)
		safe_point = timeout;
	r->deadline = r->start + timeout * 1000000;
	if (!realpath(path, abs) || stat(abs, &st) < 0 ||
	    !S_ISREG(st.st_mode) || access(abs, R_OK) < 0) {
		snprintf(err, errlen, "library not found or not readable: %s",
			 path);
		rc = -ENOENT;
		goto out;
	}
	rc = check(r, abs, &restart, err, errlen);
	if (rc)
		goto out;
	rc = write_files(r, res->target_path, restart, err, errlen);
	if (rc)
		goto out;
	rc = ask(r, err, errlen);
	if (rc)
		goto out;
	rc = await(r, safe_point * 1000000, report, INJECT_REMOTE_REPORT_MAX,
		   err, errlen);
	if (!rc && r->report_fd >= 0 &&
	    read_report(r, report, INJECT_REMOTE_REPORT_MAX))
		rc = outcome(r, report, err, errlen);
out:
	if (r->loader_made)
		unlinkat(r->tmp_fd, r->loader_name, 0);
	if (r->report_fd >= 0) {
		close(r->report_fd);
		unlinkat(r->tmp_fd, r->report_name, 0);
	}
	if (r->tmp_fd >= 0) {
		/* Again: one the request named before ours is unnamed now. */
		sweep_orphans(r);
		close(r->tmp_fd);
	}
	if (r->copied[0] && rc != -ETIMEDOUT)
		unlink(r->copied);
	if (r->memfd >= 0)
		close(r->memfd);
	res->total_ms = ms_between(r->start, now_ns());
	free(report);
	free(r);
	return rc;
}
