/*
 * elfsym: symbols and segments of an ELF file, to find where a function or
 * variable of a library is in another process.
 *
 * A file is mapped read-only whole (files up to INJECT_ELF_MAX bytes) and
 * every offset read from it is checked against its size: a truncated or
 * hostile file gives an error, never a read out of bounds.  64-bit
 * little-endian ELF only (x86_64, aarch64).
 *
 * Runtime address of a symbol = load base (where the file's offset-0
 * mapping starts, maps.h) + st_value - the p_vaddr of the first PT_LOAD
 * aligned down to the page size (0 for shared objects, 0x400000 for a
 * non-PIE x86_64 executable): inject_elf_bias().
 */
#ifndef INJECT_ELFSYM_H
#define INJECT_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

#define INJECT_ELF_MAX (2ull << 30)
#define INJECT_ELF_SEGS 16 /* PT_LOAD segments looked at, at most */

struct inject_elf;

struct inject_elf_seg {
	uint64_t vaddr, memsz, filesz, offset;
	uint32_t flags; /* PF_X 1, PF_W 2, PF_R 4 */
};

/*
 * Opens path (typically /proc/PID/root/<file>).  Returns 0 with a new
 * handle in *out (free with inject_elf_free), or -errno / -ENOEXEC (not a
 * 64-bit little-endian ELF) with a message.
 */
int inject_elf_open(const char *path, struct inject_elf **out, char *err,
		    size_t errlen);

void inject_elf_free(struct inject_elf *e);

uint16_t inject_elf_machine(const struct inject_elf *e);

/*
 * The value of the defined symbol name, from .dynsym, else .symtab.  When
 * several versions are defined (dlopen@GLIBC_2.2.5, dlopen@@GLIBC_2.34),
 * the default one wins.  Returns 0, or -ENOENT.
 */
int inject_elf_symbol(const struct inject_elf *e, const char *name,
		      uint64_t *value);

/* The PT_LOAD segments, in file order; returns how many (<= max). */
size_t inject_elf_segments(const struct inject_elf *e,
			   struct inject_elf_seg *out, size_t max);

/* The file's bytes [offset, offset + len), or NULL when out of the file. */
const uint8_t *inject_elf_bytes(const struct inject_elf *e, uint64_t offset,
				size_t len);

/* What to subtract from a link-time address before adding the load base:
 * the first PT_LOAD's p_vaddr, aligned down to the page size. */
uint64_t inject_elf_bias(const struct inject_elf *e);

#endif
