/*
 * layout: a survey of the target's address space, taken before any thread
 * is stopped — is it CPython 3.11 and initialised, where are dlopen,
 * dlerror and __errno_location, which code must not be interrupted for a
 * dlopen, and where the caves are.  It also finds an agent library the
 * target has mapped already (a forked child keeps its parent's, with the
 * agent stopped): then the shellcode calls that library's
 * INJECT_RESTART_SYMBOL, which has dlopen's signature, in dlopen's place.
 *
 * A cave is the unused tail of the last page of a loaded segment: mapped,
 * never used by the program (the segment ends before the page does).
 * Code caves come from executable segments (r-x), data caves from
 * writable ones (rw-, past the end of .bss).  Writing there through
 * /proc/PID/mem changes nothing the program can see; a code page becomes
 * a private copy (copy-on-write), a few KiB of memory.
 *
 * A cave is used only while it is pristine: all zero, or byte for byte
 * the file's own content at that place (what the loader mapped and nobody
 * wrote) — or holding our own earlier result area.  Anything else means
 * someone uses that memory after all: the dynamic loader, for one, puts
 * its start-up allocations right after its .bss, so its data tail is
 * never a cave.
 *
 * Reads only: /proc/PID/maps, /proc/PID/mem, the ELF files through
 * /proc/PID/root.
 */
#ifndef INJECT_LAYOUT_H
#define INJECT_LAYOUT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arch/arch.h"

#define INJECT_RANGES_MAX 32 /* text ranges of runtime libraries */
#define INJECT_CAVES_MAX 64  /* caves of each kind kept */
#define INJECT_CAVE_FILES 48 /* ELF files looked at for caves */
#define INJECT_CAVE_MIN 320  /* smaller tails are not kept */

/* void *probing_agent_restart(const char *path, int mode): exported by the
 * agent; starts the agent when it is not running and returns non-NULL, or
 * NULL when it could not.  path and mode are ignored. */
#define INJECT_RESTART_SYMBOL "probing_agent_restart"

struct inject_range {
	uint64_t lo, hi; /* [lo, hi) */
};

struct inject_cave {
	uint64_t addr;
	uint32_t len;
	int pristine;  /* zero or the file's bytes; else it holds ours */
	char file[48]; /* its file's name, for messages */
};

struct inject_layout {
	const struct inject_arch *arch;
	char python[PATH_MAX];	 /* the file with _PyRuntime (exe/libpython) */
	int python_shared;	 /* a libpython is mapped */
	unsigned python_version; /* major << 8 | minor: 0x030b for 3.11 */
	char libc[PATH_MAX];
	uint64_t dlopen, dlerror, errno_fn; /* dlerror may be 0 */
	uint32_t mode;			    /* INJECT_RTLD_* */
	const char *dlopen_name;	    /* "dlopen" or the fallback */
	/* An agent library mapped already: where its restart function is
	 * (0: none) and its path. */
	uint64_t restart;
	char agent[PATH_MAX];
	/* Text of libc, ld.so, libpthread, libdl, libgcc_s (and of an
	 * agent mapped already): a thread stopped there may hold the
	 * malloc, the loader or the agent's lock. */
	struct inject_range runtime[INJECT_RANGES_MAX];
	size_t nruntime;
	/* Text of the dynamic loader alone: any system call made from
	 * there is made with the loader lock held. */
	struct inject_range loader[4];
	size_t nloader;
	struct inject_cave code[INJECT_CAVES_MAX];
	size_t ncode;
	struct inject_cave data[INJECT_CAVES_MAX];
	size_t ndata;
};

/*
 * Surveys pid (its memory must be readable: ptrace access).  Returns 0,
 * or: -ESRCH gone; -EACCES/-EPERM not allowed; -ENOEXEC not CPython, a
 * version this install has no agent for (cpython_runtimes), another
 * architecture, no dlopen; -EAGAIN Python not initialised yet or
 * finalising; each with a message.
 */
int inject_layout_read(pid_t pid, struct inject_layout *l, char *err,
		       size_t errlen);

/* inject_layout_read() up to its Python checks (the architecture, the
 * Python, its version and state: arch, python*), without the search for
 * dlopen and caves; the same errors. */
int inject_layout_python(pid_t pid, struct inject_layout *l, char *err,
			 size_t errlen);

/* Whether pc lies in one of the n ranges. */
int inject_layout_in(const struct inject_range *r, size_t n, uint64_t pc);

#endif
