/*
 * crash_sym: an instruction address to "function+offset (object+offset)",
 * safe inside a signal handler.
 *
 * native_sym.h does this better (demangled names, tables cached for the
 * life of the process) but allocates, takes the loader's lock and may not
 * run in a signal handler.  This one is for the crash handler:
 *   - the object comes from /proc/self/maps, read with open()/read() into
 *     a fixed buffer (never dl_iterate_phdr or dladdr: the loader's lock
 *     may be held by the thread that crashed, or another one);
 *   - the function from the object file's own ELF symbol table (.symtab,
 *     else .dynsym), the file mapped read-only with mmap() and scanned
 *     linearly, every offset checked against the file's size; a file that
 *     is not the one mapped (another device or inode: upgraded since) is
 *     not trusted for names;
 *   - no malloc, no locks, no thread-local storage, no stdio: only system
 *     calls that are async-signal-safe, and bounded loops.
 *
 * Names are raw (C++ names stay mangled: demangling allocates).  The
 * offset in the object is the address as the object's ELF file counts it
 * (what `addr2line -e OBJECT` and `probing report` take), not the offset
 * in the file.
 *
 * A cache (caller-owned, one per thread that symbolizes) keeps the last
 * few object files mapped during one dump, since most frames fall in the
 * same few objects: crash_sym_begin() before, crash_sym_end() after.
 *
 * Threads: any, one cache per thread.  Async-signal-safe.
 */
#ifndef CRASH_SYM_H
#define CRASH_SYM_H

#include <stddef.h>
#include <stdint.h>

#define CRASH_SYM_FUNC_MAX 256 /* bytes of a function name, NUL included */
#define CRASH_SYM_PATH_MAX 512 /* bytes of an object's path */
#define CRASH_SYM_IMAGES 4     /* object files kept mapped per dump */
#define CRASH_SYM_SYMBOLS_MAX (1u << 23) /* symbols scanned per table */

struct crash_sym {
	char func[CRASH_SYM_FUNC_MAX];	 /* "" when unknown */
	uintptr_t func_off;		 /* ip - the function's start */
	char object[CRASH_SYM_PATH_MAX]; /* "" when no mapping holds ip;
					    "[vdso]", "[anon]"... for
					    mappings without a file */
	uintptr_t obj_off;		 /* the address in the object's
					    terms (see above) */
};

struct crash_sym_image {
	char path[CRASH_SYM_PATH_MAX];
	const unsigned char *map; /* the whole file, read-only; NULL: none */
	size_t len;
	uint64_t dev, ino;
	int trusted; /* the file on disk is the one mapped */
};

struct crash_sym_cache {
	struct crash_sym_image img[CRASH_SYM_IMAGES];
	unsigned next;			      /* the slot to reuse */
	char line[4096 + CRASH_SYM_PATH_MAX]; /* a line of maps */
	char buf[4096];			      /* read() buffer */
};

/* Resets c (no object mapped). */
void crash_sym_begin(struct crash_sym_cache *c);

/*
 * Symbolizes ip, a return address when is_return (the call site ip - 1 is
 * looked up, so a call that is the last instruction of its function is
 * named right), else the interrupted instruction itself.  Fills out; 0,
 * or -ENOENT when no mapping holds ip (out->object "").
 */
int crash_sym_lookup(struct crash_sym_cache *c, uintptr_t ip, int is_return,
		     struct crash_sym *out);

/* Unmaps what c mapped. */
void crash_sym_end(struct crash_sym_cache *c);

#endif
