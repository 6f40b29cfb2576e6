/*
 * native_sym: return addresses to function names, for native frames.
 *
 * The object holding an address comes from the dynamic loader (dladdr1
 * with its link map, so the load bias is exact); the function from the
 * object file's own ELF symbol table, .symtab when the file has one
 * (static functions too), else .dynsym.  An address past the end of the
 * nearest symbol before it is not given that symbol's name: it is named
 * "[object]" instead of a wrong name (the address stays in offset).  C++ names are demangled
 * with the process's own __cxa_demangle when one is loaded (never linked
 * in).
 *
 * Symbol tables are read once per object (the file mapped read-only,
 * only (address, size, name offset) kept in memory) and cached: at most
 * NATIVE_SYM_OBJECTS_MAX objects, NATIVE_SYM_SYMBOLS_MAX symbols each.
 *
 * Threads: one thread at a time (the recorder).  Not for signal
 * handlers.
 */
#ifndef NATIVE_SYM_H
#define NATIVE_SYM_H

#include <stddef.h>
#include <stdint.h>

#define NATIVE_SYM_OBJECTS_MAX 2048
#define NATIVE_SYM_SYMBOLS_MAX (1u << 22)

struct native_symbol {
	char func[512];	  /* "[libfoo.so]" when unknown */
	char object[512]; /* path of the shared object or executable; ""
			     when no object holds the address */
	uintptr_t offset; /* of the call site in its function, or from the
			     object's start when the function is unknown */
};

/* Symbolizes a return address (the call site is ip - 1).  Returns 0, or
 * -ENOENT when no loaded object holds it (func then reads "0x..."). */
int native_sym_lookup(uintptr_t ip, struct native_symbol *out);

/* A raw symbol name as shown: C++ names demangled (with the process's
 * own __cxa_demangle, when loaded) and their parameter lists dropped.
 * Any thread. */
void native_sym_demangle(const char *name, char *out, size_t len);

/* Frees the cached tables (tests, shutdown). */
void native_sym_release(void);

#endif
