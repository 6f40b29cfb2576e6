/*
 * pyframes_code: code objects' names and line tables, read without the
 * GIL.  Part of the pyframes module (pyframes.h, pyframes_impl.h).
 */
#include "pyframes_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/*
 * Strings.  A code object's names are exact, ready str objects, almost
 * always compact; the legacy (non-compact) form is read too.
 */

/* Appends code point c as UTF-8 at out+*len if it fits in cap bytes
 * (keeping room for the NUL).  Lone surrogates become "\udXXX" as the
 * backslashreplace error handler writes them.  0, or -1 when full. */
static int put_utf8(char *out, size_t cap, size_t *len, uint32_t c)
{
	char b[10];
	size_t k;

	if (c < 0x80) {
		b[0] = (char)c;
		k = 1;
	} else if (c < 0x800) {
		b[0] = (char)(0xC0 | (c >> 6));
		b[1] = (char)(0x80 | (c & 0x3F));
		k = 2;
	} else if (c >= 0xD800 && c <= 0xDFFF) {
		k = (size_t)snprintf(b, sizeof(b), "\\u%04x", (unsigned)c);
	} else if (c < 0x10000) {
		b[0] = (char)(0xE0 | (c >> 12));
		b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[2] = (char)(0x80 | (c & 0x3F));
		k = 3;
	} else if (c <= 0x10FFFF) {
		b[0] = (char)(0xF0 | (c >> 18));
		b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
		b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
		b[3] = (char)(0x80 | (c & 0x3F));
		k = 4;
	} else {
		b[0] = '?';
		k = 1;
	}
	if (*len + k + 1 > cap)
		return -1;
	memcpy(out + *len, b, k);
	*len += k;
	return 0;
}

/* Every str is ready from 3.12 (the state has no flag for it). */
#if PY_VERSION_HEX >= 0x030C0000
#define STR_READY(c) 1
#else
#define STR_READY(c) ((c)._base.state.ready)
#endif

/* Reads the str at addr into out (cap bytes, cap >= 4) as UTF-8; a
 * string that does not fit is cut and ends in "...".  0 or -EFAULT. */
int pyframes_code_str(uintptr_t addr, char *out, size_t cap)
{
	unsigned char data[STR_CHARS_MAX * 4];
	PyCompactUnicodeObject c;
	uintptr_t at;
	size_t len = 0, nchars, kind, i;
	int cut;

	out[0] = '\0';
	if (pyframes_mem_read(&c, addr, sizeof(c)))
		return -EFAULT;
	if (c._base.ob_base.ob_type != &PyUnicode_Type || !STR_READY(c))
		return -EFAULT;
	kind = c._base.state.kind;
	if ((kind != 1 && kind != 2 && kind != 4) || c._base.length < 0)
		return -EFAULT;
	if (c._base.state.compact)
		at = addr + (c._base.state.ascii
				     ? sizeof(PyASCIIObject)
				     : sizeof(PyCompactUnicodeObject));
	else if (READ_FIELD(at, addr, PyUnicodeObject, data.any))
		return -EFAULT;
	/* More than cap characters never fit in cap bytes. */
	nchars = (size_t)c._base.length;
	cut = nchars > cap;
	if (cut)
		nchars = cap;
	if (pyframes_mem_read(data, at, nchars * kind))
		return -EFAULT;
	for (i = 0; i < nchars; i++) {
		uint32_t ch;

		if (kind == 1)
			ch = data[i];
		else if (kind == 2)
			ch = ((uint16_t *)(void *)data)[i];
		else
			ch = ((uint32_t *)(void *)data)[i];
		if (put_utf8(out, cap, &len, ch) < 0) {
			cut = 1;
			break;
		}
	}
	if (cut) {
		/* Back off to a character boundary that leaves room for
		 * "...", never splitting a UTF-8 sequence. */
		while (len && len + 4 > cap)
			while (len &&
			       ((unsigned char)out[--len] & 0xC0) == 0x80)
				;
		memcpy(out + len, "...", 3);
		len += 3;
	}
	out[len] = '\0';
	return 0;
}

/*
 * Line numbers, as each version's PyCode_Addr2Line finds them: the table
 * is read in small chunks as it is scanned.
 */
/* The byte at index i, or -1 (end or unreadable). */
static int lt_byte(struct lt_reader *r, size_t i)
{
	if (i >= r->len)
		return -1;
	if (r->local)
		return r->local[i];
	if (i < r->start || i >= r->start + r->have) {
		size_t k = r->len - i < sizeof(r->buf) ? r->len - i
						       : sizeof(r->buf);

		if (pyframes_mem_read(r->buf, r->base + i, k))
			return -1;
		r->start = i;
		r->have = k;
	}
	return r->buf[i - r->start];
}

/* Line numbers wider than int are none. */
static int line_or_none(long long line)
{
	return line < INT_MIN || line > INT_MAX ? -1 : (int)line;
}

#if PY_VERSION_HEX >= 0x030B0000
/*
 * 3.11 on: the location table (Objects/locations.md).  Each entry starts
 * with a byte whose top bit is set: bits 3-6 the code, bits 0-2 the length
 * in code units minus one; following bytes (top bit clear) hold varints.
 */
static int lt_svarint(struct lt_reader *r, size_t i)
{
	int b = lt_byte(r, i);
	unsigned val, shift = 0;

	if (b < 0)
		return 0;
	val = (unsigned)b & 63;
	while ((b & 64) && shift < 24) {
		b = lt_byte(r, ++i);
		if (b < 0)
			return 0;
		shift += 6;
		val |= ((unsigned)b & 63) << shift;
	}
	return (val & 1) ? -(int)(val >> 1) : (int)(val >> 1);
}

/* The line of the instruction at byte offset addr, as PyCode_Addr2Line;
 * -1 when it has none. */
int pyframes_code_line(struct lt_reader *rd, int firstlineno, long addr)
{
	struct lt_reader *r = rd;
	size_t i = 0, len = r->len;
	long start = 0;
	/* Wide enough that no table (LINETABLE_MAX entries of at most
	 * 2^24 lines each) can overflow it; a line outside int is none. */
	long long line = firstlineno;

	if (addr < 0)
		return firstlineno;
	while (i < len) {
		int b = lt_byte(r, i);
		int code;

		if (b < 0 || !(b & 0x80))
			return -1;
		code = (b >> 3) & 15;
		if (code == 13 || code == 14) /* no columns, long form */
			line += lt_svarint(r, i + 1);
		else if (code >= 10 && code <= 12) /* one line forms */
			line += code - 10;
		start += ((b & 7) + 1) * (long)sizeof(_Py_CODEUNIT);
		if (addr < start)
			return code == 15 ? -1 : line_or_none(line);
		do
			b = lt_byte(r, ++i);
		while (b >= 0 && !(b & 0x80));
	}
	return -1;
}

#elif PY_VERSION_HEX >= 0x030A0000
/*
 * 3.10: (bytecode delta, line delta) byte pairs (Objects/lnotab_notes.txt):
 * the delta of bytes unsigned, of lines signed, -128 for "no line"; an
 * address's line is that of the first non-empty range ending after it.
 */
int pyframes_code_line(struct lt_reader *r, int firstlineno, long addr)
{
	long long line = firstlineno, at = -1;
	long end = 0;

	if (addr < 0)
		return firstlineno;
	for (size_t i = 0; i + 1 < r->len; i += 2) {
		int sd = lt_byte(r, i), ld = lt_byte(r, i + 1);

		if (sd < 0 || ld < 0)
			return -1;
		ld = (signed char)ld;
		end += sd;
		if (ld == -128)
			at = -1;
		else
			at = line += ld;
		if (addr < end)
			return at < 0 ? -1 : line_or_none(at);
	}
	return -1;
}
#else
/*
 * 3.9: co_lnotab, (bytecode delta, line delta) byte pairs: the line
 * grows by each pair's line delta (signed) while the address reached is
 * not past addr.
 */
int pyframes_code_line(struct lt_reader *r, int firstlineno, long addr)
{
	long long line = firstlineno;
	long at = 0;

	for (size_t i = 0; i + 1 < r->len; i += 2) {
		int ad = lt_byte(r, i), ld = lt_byte(r, i + 1);

		if (ad < 0 || ld < 0)
			return -1;
		at += ad;
		if (at > addr)
			break;
		line += (signed char)ld;
	}
	return line_or_none(line);
}
#endif

int pyframes_code_names(const struct cpython_raw *r, char *func, size_t funclen,
			char *file, size_t filelen)
{
	if (funclen < 4 || filelen < 4 ||
	    pyframes_code_str(r->qualname, func, funclen) ||
	    pyframes_code_str(r->filename, file, filelen))
		return -EFAULT;
	return 0;
}

/* The length of r's line table (a bytes object), or -EFAULT. */
static long linetable_len(const struct cpython_raw *r)
{
	PyBytesObject lt;

	if (pyframes_mem_read(&lt, r->linetable,
			      offsetof(PyBytesObject, ob_sval)) ||
	    lt.ob_base.ob_base.ob_type != &PyBytes_Type ||
	    lt.ob_base.ob_size < 0 || lt.ob_base.ob_size > LINETABLE_MAX)
		return -EFAULT;
	return (long)lt.ob_base.ob_size;
}

int pyframes_linetable_copy(const struct cpython_raw *r, unsigned char *buf,
			    size_t cap, size_t *len)
{
	long n = linetable_len(r);

	*len = 0;
	if (n < 0)
		return -EFAULT;
	if ((size_t)n > cap)
		return -E2BIG;
	if (pyframes_mem_read(buf,
			      r->linetable + offsetof(PyBytesObject, ob_sval),
			      (size_t)n))
		return -EFAULT;
	*len = (size_t)n;
	return 0;
}

int pyframes_line_decode(const unsigned char *table, size_t len,
			 int firstlineno, int lasti)
{
	struct lt_reader r = {.local = table, .len = len};
	int line = pyframes_code_line(&r, firstlineno, lasti);

	return line < -1 ? -1 : line;
}

int pyframes_line_remote(const struct cpython_raw *r)
{
	long n = linetable_len(r);
	struct lt_reader rd = {
		.base = r->linetable + offsetof(PyBytesObject, ob_sval),
	};
	int line;

	if (n < 0)
		return -1;
	rd.len = (size_t)n;
	line = pyframes_code_line(&rd, r->firstlineno, r->lasti);
	return line < -1 ? -1 : line;
}

/* Reads the headers of code objects s->gather[0..n) into s->code with as
 * few system calls as the kernel allows; a header that cannot be read is
 * zeroed (its type check then fails). */
static void read_code_heads(struct cpython_scratch *s, size_t n)
{
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < GATHER_MAX ? n - done : GATHER_MAX, got;
		ssize_t r = -1;

		for (size_t i = 0; i < k; i++) {
			s->local[i].iov_base = &s->code[done + i];
			s->local[i].iov_len = CODE_HEAD;
			s->remote[i].iov_base = (void *)s->gather[done + i];
			s->remote[i].iov_len = CODE_HEAD;
		}
		if (!pyframes_mem_piped())
			r = process_vm_readv(pyframes_mem_pid(), s->local, k,
					     s->remote, k, 0);
		/* Whole headers read; the one that failed is read alone
		 * (and zeroed when it cannot be), then on with the rest. */
		got = r > 0 ? (size_t)r / CODE_HEAD : 0;
		if (got < k &&
		    pyframes_mem_read(&s->code[done + got],
				      s->gather[done + got], CODE_HEAD))
			memset(&s->code[done + got], 0, CODE_HEAD);
		done += got < k ? got + 1 : k;
	}
	for (size_t i = 0; i < n; i++)
		pyl_fix(PYL_CODE, &s->code[i], CODE_HEAD);
}

/* See pyframes_impl.h. */
void pyframes_read_untrusted(struct cpython_scratch *s, size_t nf,
			     const struct cpython_trust *trust, int truncated)
{
	size_t ng = 0;

	for (size_t i = 0; i < nf; i++) {
		size_t pos = nf - 1 - i;

		s->trusted[i] = !truncated && trust && pos < trust->n &&
				trust->frames[pos] == s->frameaddr[i] &&
				trust->codes[pos] == s->codeaddr[i];
		if (!s->trusted[i])
			s->gather[ng++] = s->codeaddr[i];
	}
	read_code_heads(s, ng);
}

struct cpython_scratch *pyframes_scratch_new(void)
{
	return malloc(sizeof(struct cpython_scratch));
}

void pyframes_scratch_free(struct cpython_scratch *s)
{
	free(s);
}

int pyframes_leaf_resolve(struct cpython_scratch *s,
			  const struct cpython_leaf *l, struct cpython_raw *out,
			  size_t max, size_t *n)
{
	size_t nf = l->n < CPYTHON_LEAF_MAX ? l->n : CPYTHON_LEAF_MAX;
	int truncated = 0;

	*n = 0;
	if (max > CPYTHON_RAW_MAX)
		max = CPYTHON_RAW_MAX;
	for (size_t i = 0; i < nf; i++) {
		s->frameaddr[i] = l->f[i].frame;
		s->codeaddr[i] = l->f[i].code;
		s->prev_instr[i] = l->f[i].instr;
		s->entry[i] = l->f[i].entry == 1;
		s->owner[i] = l->f[i].owner;
	}
	return pyframes_walk_resolve(s, nf, NULL, &truncated, out, max, n);
}

int pyframes_named_same(uintptr_t obj, uintptr_t type, size_t field,
			int64_t len, int64_t hash)
{
	PyASCIIObject a;
	PyObject o;
	uintptr_t name;

	/* A freed object keeps a refcount of 0 (the allocator's links go
	 * where the object's header is not, or before it: the GC's). */
	if (pyframes_mem_read(&o, obj, sizeof(o)) || Py_REFCNT(&o) == 0 ||
	    (uintptr_t)Py_TYPE(&o) != type ||
	    pyframes_mem_read(&name, obj + field, sizeof(name)) || !name ||
	    pyframes_mem_read(&a, name, sizeof(a)))
		return 0;
	return a.ob_base.ob_type == &PyUnicode_Type && a.length == len &&
	       a.hash == hash;
}
