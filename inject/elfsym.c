/*
 * elfsym: ELF symbols and segments, bounds-checked; see elfsym.h.
 */
#include "elfsym.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct symtab {
	const Elf64_Sym *sym;
	size_t n;
	const char *str;
	size_t strsz;
	const uint16_t *versym; /* .dynsym only, may be NULL */
};

struct inject_elf {
	const uint8_t *base;
	size_t size;
	const Elf64_Ehdr *eh;
	const Elf64_Phdr *ph;
	size_t phnum;
	struct symtab dyn, all; /* .dynsym, .symtab */
};

/* Whether [off, off + len) lies in the file. */
static int in_file(const struct inject_elf *e, uint64_t off, uint64_t len)
{
	return off <= e->size && len <= e->size - off;
}

static const Elf64_Shdr *section(const struct inject_elf *e, size_t i)
{
	const Elf64_Ehdr *eh = e->eh;

	if (i >= eh->e_shnum)
		return NULL;
	return (const Elf64_Shdr *)(e->base + eh->e_shoff +
				    i * sizeof(Elf64_Shdr));
}

/* Fills t from the symbol section s (and its string table). */
static void load_symtab(const struct inject_elf *e, const Elf64_Shdr *s,
			struct symtab *t)
{
	const Elf64_Shdr *str = section(e, s->sh_link);

	if (!str || s->sh_entsize != sizeof(Elf64_Sym) ||
	    !in_file(e, s->sh_offset, s->sh_size) ||
	    !in_file(e, str->sh_offset, str->sh_size) || str->sh_size == 0)
		return;
	t->sym = (const Elf64_Sym *)(e->base + s->sh_offset);
	t->n = s->sh_size / sizeof(Elf64_Sym);
	t->str = (const char *)e->base + str->sh_offset;
	t->strsz = str->sh_size;
}

static int parse(struct inject_elf *e, char *err, size_t errlen)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->base;

	if (e->size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB) {
		snprintf(err, errlen, "not a 64-bit little-endian ELF file");
		return -ENOEXEC;
	}
	e->eh = eh;
	if (eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    !in_file(e, eh->e_phoff,
		     (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr))) {
		snprintf(err, errlen, "bad program headers");
		return -ENOEXEC;
	}
	e->ph = (const Elf64_Phdr *)(e->base + eh->e_phoff);
	e->phnum = eh->e_phnum;
	if (eh->e_shnum == 0)
		return 0; /* no sections: no symbols, segments still fine */
	if (eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(e, eh->e_shoff,
		     (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))) {
		snprintf(err, errlen, "bad section headers");
		return -ENOEXEC;
	}
	for (size_t i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *s = section(e, i);

		if (s->sh_type == SHT_DYNSYM)
			load_symtab(e, s, &e->dyn);
		else if (s->sh_type == SHT_SYMTAB)
			load_symtab(e, s, &e->all);
	}
	for (size_t i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *s = section(e, i);

		if (s->sh_type == SHT_GNU_versym && e->dyn.sym &&
		    in_file(e, s->sh_offset, s->sh_size) &&
		    s->sh_size >= e->dyn.n * sizeof(uint16_t))
			e->dyn.versym =
				(const uint16_t *)(e->base + s->sh_offset);
	}
	return 0;
}

int inject_elf_open(const char *path, struct inject_elf **out, char *err,
		    size_t errlen)
{
	struct inject_elf *e;
	struct stat st;
	void *p;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot open %s: %s", path,
			 strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > INJECT_ELF_MAX || st.st_size == 0) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file of a usable size",
			 path);
		return -ENOEXEC;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "cannot map %s: %s", path, strerror(-rc));
		return rc;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		munmap(p, (size_t)st.st_size);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	e->base = p;
	e->size = (size_t)st.st_size;
	rc = parse(e, err, errlen);
	if (rc) {
		char why[128];
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "%s: %s", path, why);
		inject_elf_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

void inject_elf_free(struct inject_elf *e)
{
	if (!e)
		return;
	munmap((void *)e->base, e->size);
	free(e);
}

uint16_t inject_elf_machine(const struct inject_elf *e)
{
	return e->eh->e_machine;
}

/* Looks name up in t: 1 found (the default version preferred), 0 not. */
static int lookup(const struct symtab *t, const char *name, uint64_t *value)
{
	size_t len = strlen(name);
	int found = 0;

	for (size_t i = 1; i < t->n; i++) {
		const Elf64_Sym *s = &t->sym[i];
		int type = ELF64_ST_TYPE(s->st_info);

		if (s->st_shndx == SHN_UNDEF || s->st_name >= t->strsz ||
		    t->strsz - s->st_name <= len ||
		    memcmp(t->str + s->st_name, name, len + 1) ||
		    (type != STT_FUNC && type != STT_OBJECT &&
		     type != STT_NOTYPE))
			continue;
		if (!t->versym || !(t->versym[i] & 0x8000)) {
			*value = s->st_value; /* the default version */
			return 1;
		}
		if (!found) {
			*value =
				s->st_value; /* a hidden one, if nothing else */
			found = 1;
		}
	}
	return found;
}

int inject_elf_symbol(const struct inject_elf *e, const char *name,
		      uint64_t *value)
{
	if (lookup(&e->dyn, name, value) || lookup(&e->all, name, value))
		return 0;
	return -ENOENT;
}

size_t inject_elf_segments(const struct inject_elf *e,
			   struct inject_elf_seg *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < e->phnum && n < max; i++) {
		const Elf64_Phdr *p = &e->ph[i];

		if (p->p_type != PT_LOAD)
			continue;
		out[n].vaddr = p->p_vaddr;
		out[n].memsz = p->p_memsz;
		out[n].filesz = p->p_filesz;
		out[n].offset = p->p_offset;
		out[n].flags = p->p_flags;
		n++;
	}
	return n;
}

const uint8_t *inject_elf_bytes(const struct inject_elf *e, uint64_t offset,
				size_t len)
{
	return in_file(e, offset, len) ? e->base + offset : NULL;
}

uint64_t inject_elf_bias(const struct inject_elf *e)
{
	/* The loader maps each segment from its page: the offset-0 mapping
	 * starts at the load bias + this. */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < e->phnum; i++)
		if (e->ph[i].p_type == PT_LOAD)
			return e->ph[i].p_vaddr & ~(page - 1);
	return 0;
}
