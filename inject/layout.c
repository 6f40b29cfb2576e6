/*
 * layout: survey of a target's address space; see layout.h.
 */
#include "layout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpython/runtime_offsets.h"
#include "elfsym.h"
#include "maps.h"

static const char *const libc_names[] = {"libc.so", "libc-2.", "libc.musl",
					 "ld-musl", NULL};
static const char *const libdl_names[] = {"libdl.so", "libdl-", NULL};
static const char *const loader_names[] = {"ld-linux", "ld64.so", "ld-musl",
					   "ld-2.", NULL};
static const char *const runtime_names[] = {
	"libc.so", "libc-2.",	 "libc.musl", "ld-linux", "ld64.so",  "ld-musl",
	"ld-2.",   "libpthread", "libdl.so",  "libdl-",	  "libgcc_s", NULL};
static const char *const python_names[] = {"libpython3", NULL};

int inject_layout_in(const struct inject_range *r, size_t n, uint64_t pc)
{
	for (size_t i = 0; i < n; i++)
		if (pc >= r[i].lo && pc < r[i].hi)
			return 1;
	return 0;
}

static const char *basename_of(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* A file of the target, opened through its root so that a container's
 * files are found. */
static int open_elf(pid_t pid, const char *path, struct inject_elf **e,
		    char *err, size_t errlen)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, path);
	return inject_elf_open(p, e, err, errlen);
}

/* Where symbol name of the file at path is in the target, or 0. */
static uint64_t symbol_at(const struct inject_maps *m, const char *path,
			  const struct inject_elf *e, const char *name)
{
	uint64_t base = inject_maps_base(m, path), v;

	if (!base || inject_elf_symbol(e, name, &v))
		return 0;
	return base + v - inject_elf_bias(e);
}

static int read_mem(int fd, uint64_t addr, void *buf, size_t len)
{
	return pread(fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

/* The first mapping of a file named like one of names, or NULL. */
static const struct inject_mapping *find_file(const struct inject_maps *m,
					      const char *const *names)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].path[0] == '/' &&
		    inject_maps_named(m->v[i].path, names))
			return &m->v[i];
	return NULL;
}

/* "3.9, 3.10, 3.11": the versions this install has an agent for. */
static void supported_text(char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < cpython_runtimes_n && used < outlen; i++) {
		unsigned v = cpython_runtimes[i]->version;
		int k = snprintf(out + used, outlen - used, "%s%u.%u",
				 i ? ", " : "", v >> 8, v & 0xff);
		if (k < 0)
			break;
		used += (size_t)k;
	}
}

/*
 * The target's CPython version (major << 8 | minor) into *version: from
 * Py_Version (3.11 on), or before it from the functions each version
 * added to the API (Py_NewRef 3.10, PyFrame_GetCode 3.9).  0, or -ENOEXEC
 * with a message for an older one.
 */
static int python_version(pid_t pid, int memfd, const struct inject_maps *m,
			  const char *path, const struct inject_elf *e,
			  unsigned *version, char *err, size_t errlen)
{
	uint64_t at = symbol_at(m, path, e, "Py_Version");
	uint32_t v = 0;

	if (at) {
		if (read_mem(memfd, at, &v, sizeof(v))) {
			snprintf(err, errlen,
				 "cannot read Py_Version in process %d",
				 (int)pid);
			return -EIO;
		}
		*version = v >> 16;
		return 0;
	}
	if (symbol_at(m, path, e, "Py_NewRef"))
		*version = 0x030a;
	else if (symbol_at(m, path, e, "PyFrame_GetCode"))
		*version = 0x0309;
	else {
		char have[128];

		supported_text(have, sizeof(have));
		snprintf(err, errlen,
			 "process %d runs a CPython older than 3.9 (%s); "
			 "this install of Probing supports %s",
			 (int)pid, path, have);
		return -ENOEXEC;
	}
	return 0;
}

static int check_python(pid_t pid, int memfd, const struct inject_maps *m,
			const char *exe, struct inject_layout *l, char *err,
			size_t errlen)
{
	const struct inject_mapping *lib = find_file(m, python_names);
	const struct cpython_runtime_offsets *off;
	struct inject_elf *e = NULL;
	uint64_t runtime;
	int32_t initialized = 0;
	uint64_t finalizing = 0;
	char have[128];
	int rc;

	l->python_shared = lib != NULL;
	snprintf(l->python, sizeof(l->python), "%s", lib ? lib->path : exe);
	rc = open_elf(pid, l->python, &e, err, errlen);
	if (rc)
		return rc == -ENOENT ? -ENOEXEC : rc;
	runtime = symbol_at(m, l->python, e, "_PyRuntime");
	if (!runtime) {
		int old = symbol_at(m, l->python, e, "Py_GetVersion") != 0;

		inject_elf_free(e);
		supported_text(have, sizeof(have));
		if (old)
			snprintf(err, errlen,
				 "process %d runs a CPython older than 3.7 "
				 "(%s has no _PyRuntime); this install of "
				 "Probing supports %s",
				 (int)pid, l->python, have);
		else
			snprintf(err, errlen,
				 "process %d is not CPython: no libpython is "
				 "mapped and %s does not export _PyRuntime",
				 (int)pid, exe);
		return -ENOEXEC;
	}
	rc = python_version(pid, memfd, m, l->python, e, &l->python_version,
			    err, errlen);
	/* A free-threaded build (3.13t on: only it has the shared
	 * reference counts' slow path): its objects are laid out otherwise,
	 * and an agent for the GIL build loaded there kills it. */
	if (!rc && symbol_at(m, l->python, e, "_Py_DecRefShared")) {
		snprintf(err, errlen,
			 "process %d runs a free-threaded CPython %u.%ut (%s): "
			 "injecting is refused there (an agent for the GIL "
			 "build would crash it, and one built for it turns its "
			 "GIL back on); start the agent from inside instead, "
			 "knowing that: PROBING_FREE_THREADED=gil PROBING=1 "
			 "(docs/python-versions.md)",
			 (int)pid, l->python_version >> 8,
			 l->python_version & 0xff, l->python);
		rc = -ENOEXEC;
	}
	inject_elf_free(e);
	if (rc)
		return rc;
	off = cpython_runtime_for(l->python_version);
	if (!off) {
		supported_text(have, sizeof(have));
		snprintf(err, errlen,
			 "process %d runs CPython %u.%u; this install of "
			 "Probing has agents for %s",
			 (int)pid, l->python_version >> 8,
			 l->python_version & 0xff, have);
		return -ENOEXEC;
	}
	if (read_mem(memfd, runtime + off->initialized, &initialized,
		     sizeof(initialized)) ||
	    read_mem(memfd, runtime + off->finalizing, &finalizing,
		     sizeof(finalizing))) {
		snprintf(err, errlen, "cannot read _PyRuntime in process %d",
			 (int)pid);
		return -EIO;
	}
	if (!initialized) {
		snprintf(err, errlen,
			 "Python in process %d is not initialized yet (still "
			 "starting up); try again in a moment",
			 (int)pid);
		return -EAGAIN;
	}
	if (finalizing) {
		snprintf(err, errlen,
			 "Python in process %d is shutting down (finalizing)",
			 (int)pid);
		return -EAGAIN;
	}
	return 0;
}

static int find_dlopen(pid_t pid, const struct inject_maps *m,
		       struct inject_layout *l, char *err, size_t errlen)
{
	const struct inject_mapping *libc = find_file(m, libc_names);
	const struct inject_mapping *libdl = find_file(m, libdl_names);
	struct inject_elf *e = NULL;
	int rc;

	if (!libc) {
		snprintf(err, errlen,
			 "process %d has no C library mapped (a static "
			 "binary?): nothing to call dlopen with",
			 (int)pid);
		return -ENOEXEC;
	}
	snprintf(l->libc, sizeof(l->libc), "%s", libc->path);
	rc = open_elf(pid, l->libc, &e, err, errlen);
	if (rc)
		return rc;
	l->mode = INJECT_RTLD_NOW;
	l->dlopen_name = "dlopen";
	l->dlopen = symbol_at(m, l->libc, e, "dlopen");
	l->dlerror = symbol_at(m, l->libc, e, "dlerror");
	l->errno_fn = symbol_at(m, l->libc, e, "__errno_location");
	if (!l->dlopen && libdl) {
		/* glibc before 2.34: dlopen is in libdl, when mapped. */
		struct inject_elf *d = NULL;
		char why[256];
		if (open_elf(pid, libdl->path, &d, why, sizeof(why)) == 0) {
			l->dlopen = symbol_at(m, libdl->path, d, "dlopen");
			l->dlerror = symbol_at(m, libdl->path, d, "dlerror");
			inject_elf_free(d);
		}
	}
	if (!l->dlopen) {
		/* Without libdl: glibc's own, which wants __RTLD_DLOPEN. */
		l->dlopen = symbol_at(m, l->libc, e, "__libc_dlopen_mode");
		l->mode |= INJECT_RTLD_DLOPEN;
		l->dlopen_name = "__libc_dlopen_mode";
		l->dlerror = 0;
	}
	inject_elf_free(e);
	if (!l->dlopen || !l->errno_fn) {
		snprintf(err, errlen, "%s in process %d has no %s", l->libc,
			 (int)pid, l->dlopen ? "__errno_location" : "dlopen");
		return -ENOEXEC;
	}
	return 0;
}

/* An agent library mapped already (a forked child keeps its parent's):
 * the first mapped file named like libprobing*.so that exports
 * INJECT_RESTART_SYMBOL.  Not finding one is no error. */
static void find_agent(pid_t pid, const struct inject_maps *m,
		       struct inject_layout *l)
{
	for (size_t i = 0; i < m->n && !l->restart; i++) {
		const char *path = m->v[i].path;
		const char *base = basename_of(path);
		struct inject_elf *e = NULL;
		char why[256];

		if (path[0] != '/' || strncmp(base, "libprobing", 10) ||
		    !strstr(base, ".so") ||
		    (i > 0 && !strcmp(m->v[i - 1].path, path)))
			continue;
		if (open_elf(pid, path, &e, why, sizeof(why)))
			continue;
		l->restart = symbol_at(m, path, e, INJECT_RESTART_SYMBOL);
		if (l->restart)
			snprintf(l->agent, sizeof(l->agent), "%s", path);
		inject_elf_free(e);
	}
}

static void add_range(struct inject_range *r, size_t *n, size_t max,
		      const struct inject_mapping *e)
{
	if (*n < max) {
		r[*n].lo = e->start;
		r[*n].hi = e->end;
		(*n)++;
	}
}

/*
 * Keeps [addr, end) as a cave when it is pristine: all zero, or equal to
 * the file's bytes at file offset off (bytes past the file count as zero).
 * A data cave holding our magic is kept too, not pristine (inject.c reads
 * its state); so is a code cave that is not pristine (it may hold our
 * earlier code, which inject.c knows from the result area).
 */
static void add_cave(int memfd, const struct inject_elf *e, int code,
		     uint64_t addr, uint64_t end, uint64_t off,
		     const char *path, struct inject_layout *l)
{
	struct inject_cave *c = code ? l->code : l->data;
	size_t *n = code ? &l->ncode : &l->ndata;
	uint8_t *mem;
	size_t len;
	int pristine = 1;

	if (*n >= INJECT_CAVES_MAX || end <= addr ||
	    end - addr < INJECT_CAVE_MIN)
		return;
	len = (size_t)(end - addr);
	mem = malloc(len);
	if (!mem || read_mem(memfd, addr, mem, len)) {
		free(mem);
		return;
	}
	for (size_t i = 0; i < len && pristine; i++)
		pristine = mem[i] == 0;
	if (!pristine) {
		/* Not zero (not an anonymous page): the file's bytes? */
		pristine = 1;
		for (size_t i = 0; i < len && pristine; i++) {
			const uint8_t *f = inject_elf_bytes(e, off + i, 1);
			pristine = mem[i] == (f ? *f : 0);
		}
	}
	if (!pristine && !code) {
		uint64_t magic = 0;
		for (int i = 7; i >= 0; i--)
			magic = magic << 8 | mem[INJECT_RESULT_MAGIC + i];
		if (magic != INJECT_MAGIC) {
			free(mem);
			return;
		}
	}
	free(mem);
	c[*n].addr = addr;
	c[*n].len = (uint32_t)len;
	c[*n].pristine = pristine;
	snprintf(c[*n].file, sizeof(c[*n].file), "%s", basename_of(path));
	(*n)++;
}

/* The caves of one mapped file. */
static void file_caves(pid_t pid, int memfd, const struct inject_maps *m,
		       const char *path, struct inject_layout *l)
{
	struct inject_elf_seg seg[INJECT_ELF_SEGS];
	struct inject_elf *e = NULL;
	uint64_t base = inject_maps_base(m, path), page, bias;
	int loader = inject_maps_named(path, loader_names);
	char err[256];
	size_t n;

	if (!base || open_elf(pid, path, &e, err, sizeof(err)))
		return;
	page = (uint64_t)sysconf(_SC_PAGESIZE);
	bias = inject_elf_bias(e);
	n = inject_elf_segments(e, seg, INJECT_ELF_SEGS);
	for (size_t i = 0; i < n; i++) {
		uint64_t start = base - bias + seg[i].vaddr;
		uint64_t end = start + seg[i].memsz;
		uint64_t page_end = (end + page - 1) & ~(page - 1);
		uint64_t code = (end + 15) & ~(uint64_t)15;
		uint64_t data = (end + 7) & ~(uint64_t)7;

		if ((seg[i].flags & 1) && !(seg[i].flags & 2) &&
		    seg[i].filesz == seg[i].memsz &&
		    inject_maps_covers(m, code, page_end - code, "rx"))
			add_cave(memfd, e, 1, code, page_end,
				 seg[i].offset + (code - start), path, l);
		else if ((seg[i].flags & 2) && !(seg[i].flags & 1) && !loader &&
			 inject_maps_covers(m, data, page_end - data, "rw"))
			/* Past .bss, a file-backed page shows the file's
			 * bytes (the loader zeroes only up to the end of
			 * .bss); an anonymous one shows zeros. */
			add_cave(memfd, e, 0, data, page_end,
				 seg[i].offset + (data - start), path, l);
	}
	inject_elf_free(e);
}

/* Whether path was looked at already (seen holds n paths). */
static int seen_before(const char *const *seen, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(seen[i], path))
			return 1;
	return 0;
}

static void find_caves(pid_t pid, int memfd, const struct inject_maps *m,
		       struct inject_layout *l, const char *exe)
{
	const char *seen[INJECT_CAVE_FILES];
	size_t n = 0;
	/* The likeliest to be near the pc first; then every other file
	 * with code, in map order. */
	const char *first[] = {l->libc, l->python, exe};

	for (size_t i = 0; i < 3 && n < INJECT_CAVE_FILES; i++)
		if (first[i][0] == '/' && !seen_before(seen, n, first[i])) {
			seen[n++] = first[i];
			file_caves(pid, memfd, m, first[i], l);
		}
	for (size_t i = 0; i < m->n && n < INJECT_CAVE_FILES; i++) {
		const struct inject_mapping *e = &m->v[i];

		if (e->path[0] != '/' || !strchr(e->perms, 'x') ||
		    strstr(e->path, " (deleted)") ||
		    seen_before(seen, n, e->path))
			continue;
		seen[n++] = e->path;
		file_caves(pid, memfd, m, e->path, l);
	}
}

/* The survey; only up to the Python checks when python_only. */
static int layout_read(pid_t pid, struct inject_layout *l, int python_only,
		       char *err, size_t errlen)
{
	struct inject_maps m;
	struct inject_elf *exe_elf = NULL;
	char path[64], exe[PATH_MAX];
	ssize_t n;
	int memfd = -1, rc;

	memset(l, 0, sizeof(*l));
	rc = inject_maps_read(pid, &m, err, errlen);
	if (rc)
		goto out;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	memfd = open(path, O_RDONLY | O_CLOEXEC);
	if (memfd < 0) {
		rc = errno == ENOENT ? -ESRCH : -errno;
		snprintf(err, errlen, "cannot open %s: %s", path,
			 strerror(-rc));
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	rc = inject_elf_open(path, &exe_elf, err, errlen);
	if (rc)
		goto out;
	l->arch = inject_arch_for(inject_elf_machine(exe_elf));
	if (!l->arch) {
		const struct inject_arch *me = inject_arch_native();
		snprintf(err, errlen,
			 "process %d is a program for ELF machine %u; this "
			 "injector handles %s only",
			 (int)pid, inject_elf_machine(exe_elf),
			 me ? me->name : "no architecture");
		rc = -ENOEXEC;
		goto out;
	}
	rc = check_python(pid, memfd, &m, exe, l, err, errlen);
	if (rc || python_only)
		goto out;
	rc = find_dlopen(pid, &m, l, err, errlen);
	if (rc)
		goto out;
	find_agent(pid, &m, l);
	for (size_t i = 0; i < m.n; i++) {
		const struct inject_mapping *e = &m.v[i];

		if (!strchr(e->perms, 'x') || e->path[0] != '/')
			continue;
		/* A thread stopped in the agent's own code may hold the lock
		 * its restart takes. */
		if (inject_maps_named(e->path, runtime_names) ||
		    (l->restart && !strcmp(e->path, l->agent)))
			add_range(l->runtime, &l->nruntime, INJECT_RANGES_MAX,
				  e);
		if (inject_maps_named(e->path, loader_names))
			add_range(l->loader, &l->nloader, 4, e);
	}
	find_caves(pid, memfd, &m, l, exe);
	if (!l->ncode || !l->ndata) {
		snprintf(err, errlen,
			 "no room in process %d for the loader code: none of "
			 "its libraries has %d free bytes at the end of its "
			 "%s segment",
			 (int)pid, INJECT_CAVE_MIN, l->ncode ? "data" : "code");
		rc = -ENOSPC;
	}
out:
	inject_elf_free(exe_elf);
	if (memfd >= 0)
		close(memfd);
	inject_maps_release(&m);
	return rc;
}

int inject_layout_read(pid_t pid, struct inject_layout *l, char *err,
		       size_t errlen)
{
	return layout_read(pid, l, 0, err, errlen);
}

int inject_layout_python(pid_t pid, struct inject_layout *l, char *err,
			 size_t errlen)
{
	return layout_read(pid, l, 1, err, errlen);
}
