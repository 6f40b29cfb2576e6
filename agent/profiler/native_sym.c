/*
 * native_sym: ELF symbol tables of the loaded objects.  See native_sym.h.
 */
#include "native_sym.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdown.h"

struct sym {
	uintptr_t value, size;
	uint32_t name; /* offset in the object's string table */
};

struct object {
	char path[PATH_MAX];
	uintptr_t bias;
	uintptr_t lo, hi; /* its loaded segments in memory; 0, 0: unknown */
	const char *map; /* the file, read-only */
	size_t maplen;
	const char *strtab;
	size_t strtablen;
	struct sym *syms;
	size_t nsyms;
};

static struct object *objects[NATIVE_SYM_OBJECTS_MAX];
static size_t nobjects;

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->value < y->value ? -1 : x->value > y->value;
}

/* The FUNC symbols of the section sh (a symbol table) into o. */
static int take_symbols(struct object *o, const ElfW(Ehdr) *eh,
			const ElfW(Shdr) *sh)
{
	const ElfW(Shdr) *str;
	size_t n;

	if (sh->sh_link >= eh->e_shnum || sh->sh_entsize != sizeof(ElfW(Sym)))
		return -EINVAL;
	str = (const ElfW(Shdr) *)(o->map + eh->e_shoff) + sh->sh_link;
	if (sh->sh_offset + sh->sh_size > o->maplen ||
	    str->sh_offset + str->sh_size > o->maplen)
		return -EINVAL;
	o->strtab = o->map + str->sh_offset;
	o->strtablen = str->sh_size;
	n = sh->sh_size / sizeof(ElfW(Sym));
	if (n > NATIVE_SYM_SYMBOLS_MAX)
		n = NATIVE_SYM_SYMBOLS_MAX;
	o->syms = malloc((n ? n : 1) * sizeof(*o->syms));
	if (!o->syms)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const ElfW(Sym) *s = (const ElfW(Sym) *)(o->map +
							 sh->sh_offset) + i;
		int type = ELF64_ST_TYPE(s->st_info);

		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    s->st_shndx == SHN_UNDEF || !s->st_value ||
		    s->st_name >= o->strtablen)
			continue;
		o->syms[o->nsyms].value = s->st_value;
		o->syms[o->nsyms].size = s->st_size;
		o->syms[o->nsyms].name = s->st_name;
		o->nsyms++;
	}
	qsort(o->syms, o->nsyms, sizeof(*o->syms), cmp_sym);
	return 0;
}

/* The addresses o's loadable segments cover in memory, from the file's
 * program headers: lets a lookup find a known object without dladdr1,
 * which searches the object's dynamic symbols one by one (about a million
 * instructions for libtorch). */
static void loaded_range(struct object *o, const ElfW(Ehdr) *eh)
{
	const ElfW(Phdr) *ph;
	uintptr_t lo = UINTPTR_MAX, hi = 0;

	if (eh->e_phentsize != sizeof(ElfW(Phdr)) ||
	    eh->e_phoff + (size_t)eh->e_phnum * sizeof(ElfW(Phdr)) > o->maplen)
		return;
	ph = (const ElfW(Phdr) *)(o->map + eh->e_phoff);
	for (size_t i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (ph[i].p_vaddr < lo)
			lo = ph[i].p_vaddr;
		if (ph[i].p_vaddr + ph[i].p_memsz > hi)
			hi = ph[i].p_vaddr + ph[i].p_memsz;
	}
	if (lo < hi) {
		o->lo = o->bias + lo;
		o->hi = o->bias + hi;
	}
}

/* Maps the file of o and reads its symbol table (.symtab, else .dynsym).
 * An object without one still resolves to object+offset. */
static void load(struct object *o)
{
	const ElfW(Ehdr) *eh;
	const ElfW(Shdr) *sh, *best = NULL;
	struct stat st;
	struct fdown f;
	void *m;

	if (fdown_open_take(&f, o->path, O_RDONLY, 0))
		return;
	if (fstat(f.fd, &st) < 0 || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
		fdown_close(&f);
		return;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, f.fd, 0);
	fdown_close(&f);
	if (m == MAP_FAILED)
		return;
	o->map = m;
	o->maplen = (size_t)st.st_size;
	eh = m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(ElfW(Shdr)) ||
	    eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > o->maplen)
		return;
	loaded_range(o, eh);
	sh = (const ElfW(Shdr) *)(o->map + eh->e_shoff);
	for (size_t i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type == SHT_SYMTAB)
			best = &sh[i];
		else if (sh[i].sh_type == SHT_DYNSYM && !best)
			best = &sh[i];
	}
	if (best && take_symbols(o, eh, best) < 0) {
		free(o->syms);
		o->syms = NULL;
		o->nsyms = 0;
	}
}

/* The cached object of link map lm, loaded when new; NULL when the cache
 * is full or out of memory. */
static struct object *object_of(const struct link_map *lm)
{
	struct object *o;
	char path[PATH_MAX];
	ssize_t n;

	if (lm->l_name && lm->l_name[0]) {
		snprintf(path, sizeof(path), "%s", lm->l_name);
	} else {
		/* The main program. */
		n = readlink("/proc/self/exe", path, sizeof(path) - 1);
		path[n > 0 ? n : 0] = '\0';
	}
	for (size_t i = 0; i < nobjects; i++)
		if (objects[i]->bias == lm->l_addr &&
		    !strcmp(objects[i]->path, path))
			return objects[i];
	if (nobjects >= NATIVE_SYM_OBJECTS_MAX)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	snprintf(o->path, sizeof(o->path), "%s", path);
	o->bias = lm->l_addr;
	load(o);
	objects[nobjects++] = o;
	return o;
}

/* The cached object whose segments hold address a, or NULL.  (An object
 * unloaded since, whose range another took, is the caveat every cache
 * keyed by address has; the link map cache before it had it too.) */
static const struct object *known_object(uintptr_t a)
{
	for (size_t i = 0; i < nobjects; i++)
		if (objects[i]->lo <= a && a < objects[i]->hi)
			return objects[i];
	return NULL;
}

/* The symbol of o holding address a (unbiased), or NULL. */
static const struct sym *find(const struct object *o, uintptr_t a)
{
	size_t lo = 0, hi = o->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->syms[mid].value <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Several symbols may share an address (aliases): any will do. */
	if (!lo)
		return NULL;
	if (a < o->syms[lo - 1].value + (o->syms[lo - 1].size ?: 1))
		return &o->syms[lo - 1];
	return NULL;
}

/* "ns::f(int, char const*) const" -> "ns::f": a flamegraph wants the
 * function, and overloads rarely matter there. */
static void drop_parameters(char *s)
{
	size_t n = strlen(s);
	int depth = 0;

	if (n > 6 && !strcmp(s + n - 6, " const"))
		n -= 6;
	if (!n || s[n - 1] != ')')
		return;
	while (n-- > 0) {
		if (s[n] == ')')
			depth++;
		else if (s[n] == '(' && --depth == 0)
			break;
	}
	if (depth == 0 && n > 0 && n != (size_t)-1)
		s[n] = '\0';
}

static demangle_fn demangle;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

static void find_demangle(void)
{
	/* C++ libraries are usually loaded RTLD_LOCAL (Python's extension
	 * modules): ask libstdc++ itself when it is in the process, never
	 * load it. */
	void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);

	demangle = (demangle_fn)dlsym(h ? h : RTLD_DEFAULT, "__cxa_demangle");
}

void native_sym_demangle(const char *name, char *out, size_t len)
{
	char *d = NULL;
	int status = -1;

	pthread_once(&demangle_once, find_demangle);
	if (demangle && name[0] == '_' && name[1] == 'Z')
		d = demangle(name, NULL, NULL, &status);
	snprintf(out, len, "%s", d && status == 0 ? d : name);
	if (d && status == 0)
		drop_parameters(out);
	free(d);
}

int native_sym_lookup(uintptr_t ip, struct native_symbol *out)
{
	uintptr_t at = ip ? ip - 1 : 0;
	struct link_map *lm = NULL;
	const struct object *o;
	const struct sym *s;
	const char *base;
	Dl_info info;

	memset(out, 0, sizeof(*out));
	memset(&info, 0, sizeof(info));
	o = known_object(at);
	if (o) {
		info.dli_fbase = (void *)o->lo;
	} else if (!dladdr1((void *)at, &info, (void **)&lm, RTLD_DL_LINKMAP) ||
		   !lm) {
		snprintf(out->func, sizeof(out->func), "0x%lx",
			 (unsigned long)at);
		out->offset = at;
		return -ENOENT;
	} else {
		o = object_of(lm);
	}
	snprintf(out->object, sizeof(out->object), "%.511s",
		 o ? o->path : info.dli_fname ? info.dli_fname : "");
	s = o && o->nsyms ? find(o, at - o->bias) : NULL;
	if (s) {
		native_sym_demangle(o->strtab + s->name, out->func,
				    sizeof(out->func));
		out->offset = at - o->bias - s->value;
		return 0;
	}
	base = strrchr(out->object, '/');
	base = base ? base + 1 : out->object;
	out->offset = at - (o && o->hi ? o->lo : (uintptr_t)info.dli_fbase);
	snprintf(out->func, sizeof(out->func), "[%.500s]", base);
	return 0;
}

void native_sym_release(void)
{
	for (size_t i = 0; i < nobjects; i++) {
		if (objects[i]->map)
			munmap((void *)objects[i]->map, objects[i]->maplen);
		free(objects[i]->syms);
		free(objects[i]);
	}
	nobjects = 0;
}
