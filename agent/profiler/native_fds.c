/*
 * native_fds: libunwind's descriptors, kept out of the program's way.  See
 * native_fds.h.
 */
#define UNW_LOCAL_ONLY
#include "native_fds.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdown.h"

#if defined(__x86_64__)
#define REL_SLOT R_X86_64_JUMP_SLOT
#define REL_DATA R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define REL_SLOT R_AARCH64_JUMP_SLOT
#define REL_DATA R_AARCH64_GLOB_DAT
#else
#error "native_fds: the relocation types of this architecture"
#endif

/* ---- the pipe ends libunwind holds -------------------------------------- */

/* 1.6 and 1.8 keep one pipe; newer ones one per thread that checks.  A
 * pipe made when the table is full is moved up but not remembered: its
 * numbers are then used unchecked. */
#define HELD_MAX 64

/* fd1: the number + 1; 0 free, -1 being filled.  dev and ino are written
 * before fd1 is published and read after it is loaded; partner is the
 * slot of the pipe's other end (-1: none). */
static struct held {
	_Atomic int fd1;
	_Atomic int partner;
	dev_t dev;
	ino_t ino;
} held[HELD_MAX];

/* Does fd still hold the end remembered in entry i? */
static int held_same(int i, int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && st.st_dev == held[i].dev &&
	       st.st_ino == held[i].ino;
}

/* Entries whose number is closed, or is one of the new pipe's (rd, wr),
 * are freed.  One whose number the program reopened stays, failing
 * every check: libunwind may still hold that number. */
static void held_sweep(int rd, int wr)
{
	for (int i = 0; i < HELD_MAX; i++) {
		int fd1 = atomic_load(&held[i].fd1);
		struct stat st;

		if (fd1 > 0 && (fd1 - 1 == rd || fd1 - 1 == wr ||
				fstat(fd1 - 1, &st) < 0))
			atomic_compare_exchange_strong(&held[i].fd1, &fd1, 0);
	}
}

/* The slot o went into, or -1 when the table is full. */
static int held_add(const struct fdown *o)
{
	for (int i = 0; i < HELD_MAX; i++) {
		int free_ = 0;

		if (!atomic_compare_exchange_strong(&held[i].fd1, &free_, -1))
			continue;
		held[i].dev = o->dev;
		held[i].ino = o->ino;
		atomic_store(&held[i].partner, -1);
		atomic_store(&held[i].fd1, o->fd + 1);
		return i;
	}
	return -1;
}

static int held_find(int fd)
{
	for (int i = 0; i < HELD_MAX; i++)
		if (atomic_load(&held[i].fd1) == fd + 1)
			return i;
	return -1;
}

/* 0 when fd may be used: not one of libunwind's, or its pipe is still
 * all its own (both ends).  -1 with EBADF when the program took either
 * number over: libunwind makes a new pipe when its read fails, so a lost
 * write end must fail the read too. */
static int held_check(int fd)
{
	int i = held_find(fd), j, fd1;

	if (i < 0)
		return 0;
	if (!held_same(i, fd))
		goto lost;
	j = atomic_load(&held[i].partner);
	if (j >= 0 && (fd1 = atomic_load(&held[j].fd1)) > 0 &&
	    !held_same(j, fd1 - 1))
		goto lost;
	return 0;
lost:
	errno = EBADF;
	return -1;
}

/* ---- what libunwind calls instead --------------------------------------- */

static int unw_pipe2(int p[2], int flags)
{
	struct fdown rd, wr;
	int lo[2], rc, a, b;

	/* On every failure libunwind must hold no number: it ignores the
	 * result and would keep the old ones, closed and maybe reused. */
	p[0] = p[1] = -1;
	if (pipe2(lo, flags) < 0)
		return -1;
	/* Up where the program's numbers are not, or not at all: the agent
	 * can do without native stacks, the program not without its
	 * descriptors (a limit below FDOWN_MIN + FDOWN_SPARE: libunwind's
	 * checks then fail, and its stacks end there). */
	rc = fdown_take_high(&rd, lo[0]);
	if (fdown_take_high(&wr, lo[1]) || rc) {
		fdown_close(&rd);
		fdown_close(&wr);
		errno = EMFILE;
		return -1;
	}
	held_sweep(rd.fd, wr.fd);
	a = held_add(&rd);
	b = held_add(&wr);
	if (a >= 0 && b >= 0) {
		atomic_store(&held[a].partner, b);
		atomic_store(&held[b].partner, a);
	}
	p[0] = rd.fd;
	p[1] = wr.fd;
	return 0;
}

/* libunwind built without pipe2 makes its pipe with pipe() and sets the
 * flags itself. */
static int unw_pipe(int p[2])
{
	return unw_pipe2(p, 0);
}

static ssize_t unw_read(int fd, void *buf, size_t len)
{
	if (held_check(fd))
		return -1;
	return read(fd, buf, len);
}

/* libunwind before 1.8 on some architectures (aarch64) writes its byte
 * with write(). */
static ssize_t unw_write(int fd, const void *buf, size_t len)
{
	if (held_check(fd))
		return -1;
	return write(fd, buf, len);
}

static int unw_close(int fd)
{
	int i = held_find(fd);

	if (i >= 0) {
		int same = held_same(i, fd);

		atomic_store(&held[i].fd1, 0);
		if (!same) {
			errno = EBADF;
			return -1;
		}
	}
	return close(fd);
}

/* libunwind writes the byte it checks with syscall(SYS_write, ...), past a
 * sanitizer's write() interceptor.  x86_64 and aarch64 pass up to six
 * integer arguments in registers: all six are passed on. */
static long unw_syscall(long nr, ...)
{
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_write && held_check((int)a[0]))
		return -1;
	return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static const struct {
	const char *name;
	void *fn;
} redirect[] = {
	{"pipe2", (void *)unw_pipe2},
	{"pipe", (void *)unw_pipe},
	{"read", (void *)unw_read},
	{"write", (void *)unw_write},
	{"close", (void *)unw_close},
	{"syscall", (void *)unw_syscall},
};

/* ---- libunwind's global offset table ------------------------------------ */

struct object {
	uintptr_t addr; /* an address in libunwind's code, to find it by */
	int found;
	int rc;
	char *err;
	size_t errlen;
};

/* A pointer of the dynamic section: the loader has added the load address
 * to most of them in place, not on every architecture. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, ElfW(Addr) v)
{
	return v < info->dlpi_addr ? info->dlpi_addr + v : v;
}

/* Stores fn into the slot at addr, made writable for the instant when it
 * lies in the read-only-after-relocation part (full RELRO). */
static int set_slot(uintptr_t addr, void *fn, uintptr_t ro_lo, uintptr_t ro_hi)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = addr & ~((uintptr_t)page - 1);

	if (addr < ro_lo || addr >= ro_hi) {
		__atomic_store_n((void **)addr, fn, __ATOMIC_RELEASE);
		return 0;
	}
	if (mprotect((void *)start, (size_t)page, PROT_READ | PROT_WRITE) < 0)
		return -errno;
	__atomic_store_n((void **)addr, fn, __ATOMIC_RELEASE);
	mprotect((void *)start, (size_t)page, PROT_READ);
	return 0;
}

static int patch_relocs(struct object *o, const struct dl_phdr_info *info,
			const ElfW(Rela) *rel, size_t size,
			const ElfW(Sym) *sym, const char *str,
			uintptr_t ro_lo, uintptr_t ro_hi)
{
	for (size_t i = 0; rel && i < size / sizeof(*rel); i++) {
		unsigned long type = ELF64_R_TYPE(rel[i].r_info);
		const char *name;

		if (type != REL_SLOT && type != REL_DATA)
			continue;
		name = str + sym[ELF64_R_SYM(rel[i].r_info)].st_name;
		for (size_t k = 0; k < sizeof(redirect) / sizeof(*redirect);
		     k++) {
			int rc;

			if (strcmp(name, redirect[k].name))
				continue;
			rc = set_slot(info->dlpi_addr + rel[i].r_offset,
				      redirect[k].fn, ro_lo, ro_hi);
			if (rc) {
				snprintf(o->err, o->errlen,
					 "cannot change libunwind's call of "
					 "%s: %s", name, strerror(-rc));
				return rc;
			}
		}
	}
	return 0;
}

static int patch_object(struct object *o, const struct dl_phdr_info *info)
{
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	const ElfW(Rela) *jmprel = NULL, *rela = NULL;
	size_t jmpsz = 0, relasz = 0;
	uintptr_t ro_lo = 0, ro_hi = 0;
	int rc;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_DYNAMIC)
			dyn = (const void *)(info->dlpi_addr + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			/* As the loader protects it: whole pages only, the
			 * last one, shared with what follows, left
			 * writable. */
			uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

			ro_lo = info->dlpi_addr + ph->p_vaddr;
			ro_hi = (ro_lo + ph->p_memsz) & ~(page - 1);
		}
	}
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB:
			sym = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_STRTAB:
			str = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_JMPREL:
			jmprel = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			jmpsz = dyn->d_un.d_val;
			break;
		case DT_RELA:
			rela = (const void *)dyn_ptr(info, dyn->d_un.d_ptr);
			break;
		case DT_RELASZ:
			relasz = dyn->d_un.d_val;
			break;
		case DT_PLTREL:
			if (dyn->d_un.d_val != DT_RELA) {
				snprintf(o->err, o->errlen,
					 "libunwind's calls are not in the "
					 "form this agent knows (DT_REL)");
				return -ENOTSUP;
			}
			break;
		}
	}
	if (!sym || !str) {
		snprintf(o->err, o->errlen, "libunwind has no dynamic symbols");
		return -ENOTSUP;
	}
	rc = patch_relocs(o, info, jmprel, jmpsz, sym, str, ro_lo, ro_hi);
	if (!rc)
		rc = patch_relocs(o, info, rela, relasz, sym, str, ro_lo, ro_hi);
	return rc;
}

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
	struct object *o = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && o->addr >= lo &&
		    o->addr - lo < ph->p_memsz)
			o->found = 1;
	}
	if (!o->found)
		return 0;
	o->rc = patch_object(o, info);
	return 1;
}

/* ---- once --------------------------------------------------------------- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int guard_rc;
static char guard_err[160];

static void guard(void)
{
	struct object o = {.addr = (uintptr_t)unw_step,
			   .err = guard_err,
			   .errlen = sizeof(guard_err)};

	Dl_info self, them;

	/* libunwind linked into this library: its calls would be ours, and
	 * our wrappers would call themselves. */
	if (dladdr((void *)native_fds_guard, &self) &&
	    dladdr((void *)unw_step, &them) &&
	    self.dli_fbase == them.dli_fbase) {
		snprintf(guard_err, sizeof(guard_err),
			 "libunwind is linked into the agent itself");
		guard_rc = -ENOTSUP;
		return;
	}
	dl_iterate_phdr(visit, &o);
	if (!o.found) {
		snprintf(guard_err, sizeof(guard_err),
			 "libunwind is not found among the loaded objects");
		guard_rc = -ENOENT;
	} else {
		guard_rc = o.rc;
	}
}

int native_fds_guard(char *err, size_t errlen)
{
	pthread_once(&once, guard);
	if (guard_rc && err && errlen)
		snprintf(err, errlen, "native stacks are off: %s", guard_err);
	return guard_rc;
}
