/*
 * crash_sym: signal-safe symbolization.  See crash_sym.h.
 *
 * Everything here may run in a signal handler: system calls through libc
 * wrappers that are async-signal-safe (open, read, close, fstat, mmap,
 * munmap), no stdio, no malloc, loops bounded by sizes read from files
 * that are themselves checked against the file's length.
 */
#include "crash_sym.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "profiler/native.h"

#define MAPS_LINES_MAX 1000000 /* lines of /proc/self/maps read */
#define EVAL_LOOP "_PyEval_EvalFrameDefault"

/* The mapping of /proc/self/maps that holds an address. */
struct mapping {
	uintptr_t lo, hi, off;
	uint64_t dev, ino;
	char path[CRASH_SYM_PATH_MAX];
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parses a hex number at *p, moving *p past it. */
static uint64_t hexnum(const char **p)
{
	uint64_t v = 0;
	int d, n = 0;

	while ((d = hexval(**p)) >= 0 && n++ < 16) {
		v = v << 4 | (uint64_t)d;
		(*p)++;
	}
	return v;
}

static uint64_t decnum(const char **p)
{
	uint64_t v = 0;
	int n = 0;

	while (**p >= '0' && **p <= '9' && n++ < 20)
		v = v * 10 + (uint64_t)(*(*p)++ - '0');
	return v;
}

static void skip_spaces(const char **p)
{
	while (**p == ' ' || **p == '\t')
		(*p)++;
}

/* Fills m from one line of maps when it holds ip: 1, else 0. */
static int parse_line(const char *s, uintptr_t ip, struct mapping *m)
{
	const char *p = s;
	uint64_t maj, min;
	size_t n;

	m->lo = (uintptr_t)hexnum(&p);
	if (*p++ != '-')
		return 0;
	m->hi = (uintptr_t)hexnum(&p);
	if (ip < m->lo || ip >= m->hi)
		return 0;
	skip_spaces(&p);
	while (*p && *p != ' ')
		p++; /* permissions */
	skip_spaces(&p);
	m->off = (uintptr_t)hexnum(&p);
	skip_spaces(&p);
	maj = hexnum(&p);
	if (*p == ':')
		p++;
	min = hexnum(&p);
	m->dev = makedev(maj, min);
	skip_spaces(&p);
	m->ino = decnum(&p);
	skip_spaces(&p);
	n = strlen(p);
	if (n >= sizeof(m->path))
		n = sizeof(m->path) - 1;
	memcpy(m->path, p, n);
	m->path[n] = '\0';
	return 1;
}

/* Finds the mapping holding ip in /proc/self/maps.  0 or -ENOENT. */
static int find_mapping(struct crash_sym_cache *c, uintptr_t ip,
			struct mapping *m)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t len = 0, lines = 0;
	int found = 0, skipping = 0;

	if (fd < 0)
		return -ENOENT;
	while (!found && lines < MAPS_LINES_MAX) {
		ssize_t r = read(fd, c->buf, sizeof(c->buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r && !found; i++) {
			char ch = c->buf[i];

			if (ch != '\n') {
				if (len + 1 < sizeof(c->line))
					c->line[len++] = ch;
				else
					skipping = 1; /* too long: ignored */
				continue;
			}
			c->line[len] = '\0';
			if (!skipping)
				found = parse_line(c->line, ip, m);
			len = 0;
			skipping = 0;
			lines++;
		}
	}
	close(fd);
	return found ? 0 : -ENOENT;
}

/* The cached image of m's file, mapping it when needed (NULL when it
 * cannot be read as an ELF file). */
static struct crash_sym_image *image_of(struct crash_sym_cache *c,
					const struct mapping *m)
{
	struct crash_sym_image *im;
	struct stat st;
	void *map;
	int fd;

	for (unsigned i = 0; i < CRASH_SYM_IMAGES; i++)
		if (c->img[i].map && !strcmp(c->img[i].path, m->path))
			return &c->img[i];
	if (m->path[0] != '/')
		return NULL;
	fd = open(m->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
		close(fd);
		return NULL;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return NULL;
	im = &c->img[c->next++ % CRASH_SYM_IMAGES];
	if (im->map)
		munmap((void *)im->map, im->len);
	memcpy(im->path, m->path, sizeof(im->path));
	im->map = map;
	im->len = (size_t)st.st_size;
	im->dev = st.st_dev;
	im->ino = st.st_ino;
	/* A package upgraded since the process started has a new inode:
	 * its names would be wrong. */
	im->trusted = st.st_ino == m->ino;
	return im;
}

/* The ELF header of im, checked; NULL when it is not a usable ELF file. */
static const ElfW(Ehdr) * elf_header(const struct crash_sym_image *im)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)(const void *)im->map;

	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] !=
		    (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phoff > im->len ||
	    (size_t)eh->e_phnum * sizeof(ElfW(Phdr)) > im->len - eh->e_phoff)
		return NULL;
	return eh;
}

/* The address in the ELF's terms of file offset fileoff (through the
 * PT_LOAD segment holding it); 0 when none does. */
static int file_to_vaddr(const struct crash_sym_image *im,
			 const ElfW(Ehdr) * eh, uintptr_t fileoff,
			 uintptr_t *vaddr)
{
	const ElfW(Phdr) *ph =
		(const ElfW(Phdr) *)(const void *)(im->map + eh->e_phoff);

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (fileoff >= ph[i].p_offset &&
		    fileoff < ph[i].p_offset + ph[i].p_memsz) {
			*vaddr = fileoff - ph[i].p_offset + ph[i].p_vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

/* The best FUNC symbol of table sh for vaddr: the one holding it, else the
 * nearest one below it that has no size.  Fills name/off; 1 when found. */
static int scan_table(const struct crash_sym_image *im, const ElfW(Ehdr) * eh,
		      const ElfW(Shdr) * sh, uintptr_t vaddr, char *name,
		      size_t namelen, uintptr_t *off)
{
	const ElfW(Shdr) * str;
	const ElfW(Sym) *best = NULL;
	size_t n, strtab, strlen_;

	if (sh->sh_entsize != sizeof(ElfW(Sym)) || sh->sh_link >= eh->e_shnum ||
	    sh->sh_offset > im->len || sh->sh_size > im->len - sh->sh_offset)
		return 0;
	str = (const ElfW(Shdr) *)(const void *)(im->map + eh->e_shoff) +
	      sh->sh_link;
	if (str->sh_offset > im->len || str->sh_size > im->len - str->sh_offset)
		return 0;
	strtab = str->sh_offset;
	strlen_ = str->sh_size;
	n = sh->sh_size / sizeof(ElfW(Sym));
	if (n > CRASH_SYM_SYMBOLS_MAX)
		n = CRASH_SYM_SYMBOLS_MAX;
	for (size_t i = 0; i < n; i++) {
		const ElfW(Sym) *s =
			(const ElfW(Sym) *)(const void *)(im->map +
							  sh->sh_offset) +
			i;
		int type = ELF64_ST_TYPE(s->st_info);

		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    s->st_shndx == SHN_UNDEF || !s->st_value ||
		    s->st_value > vaddr || s->st_name >= strlen_)
			continue;
		if (s->st_size && vaddr < s->st_value + s->st_size) {
			best = s; /* holds it: nothing is better */
			break;
		}
		if (!s->st_size && (!best || s->st_value > best->st_value))
			best = s;
	}
	if (!best)
		return 0;
	{
		const char *nm = (const char *)im->map + strtab + best->st_name;
		size_t k = 0, max = strlen_ - best->st_name;

		while (k < max && k + 1 < namelen && nm[k])
			k++;
		memcpy(name, nm, k);
		name[k] = '\0';
	}
	*off = vaddr - best->st_value;
	return name[0] != '\0';
}

/* The function holding vaddr in im, from .symtab, else .dynsym. */
static void lookup_func(const struct crash_sym_image *im, const ElfW(Ehdr) * eh,
			uintptr_t vaddr, struct crash_sym *out)
{
	const ElfW(Shdr) * sh;

	if (eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff > im->len ||
	    (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > im->len - eh->e_shoff)
		return;
	sh = (const ElfW(Shdr) *)(const void *)(im->map + eh->e_shoff);
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 0; i < eh->e_shnum; i++)
			if (sh[i].sh_type ==
				    (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM) &&
			    scan_table(im, eh, &sh[i], vaddr, out->func,
				       sizeof(out->func), &out->func_off))
				return;
}

void crash_sym_begin(struct crash_sym_cache *c)
{
	for (unsigned i = 0; i < CRASH_SYM_IMAGES; i++)
		c->img[i].map = NULL;
	c->next = 0;
}

void crash_sym_end(struct crash_sym_cache *c)
{
	for (unsigned i = 0; i < CRASH_SYM_IMAGES; i++) {
		if (c->img[i].map)
			munmap((void *)c->img[i].map, c->img[i].len);
		c->img[i].map = NULL;
	}
}

int crash_sym_lookup(struct crash_sym_cache *c, uintptr_t ip, int is_return,
		     struct crash_sym *out)
{
	uintptr_t at = is_return && ip ? ip - 1 : ip, vaddr, lo, hi;
	struct crash_sym_image *im;
	const ElfW(Ehdr) * eh;
	struct mapping m;

	out->func[0] = '\0';
	out->object[0] = '\0';
	out->func_off = out->obj_off = 0;
	if (find_mapping(c, at, &m))
		return -ENOENT;
	if (!m.path[0])
		memcpy(out->object, "[anon]", sizeof("[anon]"));
	else
		memcpy(out->object, m.path, sizeof(out->object));
	out->obj_off = at - m.lo + m.off;
	im = image_of(c, &m);
	eh = im ? elf_header(im) : NULL;
	if (!eh || file_to_vaddr(im, eh, at - m.lo + m.off, &vaddr))
		return 0;
	out->obj_off = vaddr;
	if (im->trusted)
		lookup_func(im, eh, vaddr, out);
	/* The evaluation loop's code where a build names none of it
	 * (native.h: native_learn_eval_here): named as the loop's. */
	if (!out->func[0] && native_eval_loop(&lo, &hi) && at >= lo &&
	    at < hi) {
		memcpy(out->func, EVAL_LOOP, sizeof(EVAL_LOOP));
		out->func_off = at - lo;
	}
	if (out->func[0] && is_return)
		out->func_off++; /* the return address's offset, as gdb */
	return 0;
}
