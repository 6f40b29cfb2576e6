/*
 * bpsource: a source file with breakpoints.  See bpsource.h.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bp.h"
#include "bpsource.h"
#include "fdown.h"
#include "cpython/cpython.h"
#include "errbuf.h"

int bpsource_init(struct bp_source *s, const char *path)
{
	char real[PATH_MAX];
	const char *base;

	memset(s, 0, sizeof(*s));
	if (!(s->path = strdup(path)))
		return -ENOMEM;
	if (realpath(path, real))
		s->real = strdup(real);
	base = strrchr(s->path, '/');
	s->base = base ? base + 1 : s->path;
	return 0;
}

void bpsource_release(struct bp_source *s)
{
	free(s->lines);
	free(s->path);
	free(s->real);
	memset(s, 0, sizeof(*s));
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

struct line_list {
	int *lines;
	size_t n, cap;
	int nomem;
};

static int append_line(void *arg, int line)
{
	struct line_list *l = arg;

	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 256;
		int *nl = realloc(l->lines, c * sizeof(int));

		if (!nl) {
			l->nomem = 1;
			return 1;
		}
		l->lines = nl;
		l->cap = c;
	}
	l->lines[l->n++] = line;
	return 0;
}

/* Appends the lines of code and of the code objects in its constants. */
static int collect_lines(PyObject *code, struct line_list *l, int depth)
{
	PyObject *consts;

	if (depth > 64)
		return 0;
	if (cpython.code_lines(code, append_line, l) < 0)
		return -1;
	if (l->nomem) {
		PyErr_NoMemory();
		return -1;
	}
	consts = PyObject_GetAttrString(code, "co_consts");
	if (!consts)
		return -1;
	for (Py_ssize_t i = 0;
	     PyTuple_Check(consts) && i < PyTuple_GET_SIZE(consts); i++) {
		PyObject *c = PyTuple_GET_ITEM(consts, i);

		if (PyCode_Check(c) && collect_lines(c, l, depth + 1) < 0) {
			Py_DECREF(consts);
			return -1;
		}
	}
	Py_DECREF(consts);
	return 0;
}

int bpsource_lines(struct bp_source *f, char *msg, size_t msglen)
{
	struct stat st;
	FILE *fp;
	char *src;
	struct line_list found = {0};
	size_t len, n = 0, u = 0;
	PyObject *code;
	int *lines = NULL, rc;

	if (stat(f->path, &st) < 0) {
		rc = -errno;
		errbuf_set(msg, msglen, "cannot read %s: %s", f->path,
			   strerror(errno));
		return rc;
	}
	if (f->lines && st.st_mtim.tv_sec == f->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == f->mtime.tv_nsec && st.st_size == f->size)
		return 0;
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size > BP_SOURCE_MAX) {
		errbuf_set(msg, msglen,
			   "%s is not a source file of at most %u "
			   "bytes",
			   f->path, BP_SOURCE_MAX);
		return -EINVAL;
	}
	fp = fdown_fopen(f->path);
	if (!fp) {
		rc = -errno;
		errbuf_set(msg, msglen, "cannot read %s: %s", f->path,
			   strerror(errno));
		return rc;
	}
	src = malloc((size_t)st.st_size + 1);
	len = src ? fread(src, 1, (size_t)st.st_size, fp) : 0;
	fclose(fp);
	if (!src)
		return -ENOMEM;
	src[len] = 0;
	if (memchr(src, 0, len)) {
		free(src);
		errbuf_set(msg, msglen, "%s is not Python source (NUL bytes)",
			   f->path);
		return -EINVAL;
	}
	code = Py_CompileStringExFlags(src, f->path, Py_file_input, NULL, -1);
	free(src);
	if (!code) {
		char *e = bp_error_text();

		errbuf_set(msg, msglen, "%s does not compile: %s", f->base,
			   e ? e : "error");
		free(e);
		return -EINVAL;
	}
	rc = collect_lines(code, &found, 0);
	Py_DECREF(code);
	lines = found.lines;
	n = found.n;
	if (rc < 0) {
		PyErr_Clear();
		free(lines);
		return -ENOMEM;
	}
	if (n)
		qsort(lines, n, sizeof(int), cmp_int);
	for (size_t i = 0; i < n; i++)
		if (!u || lines[u - 1] != lines[i])
			lines[u++] = lines[i];
	free(f->lines);
	f->lines = lines;
	f->nlines = u;
	f->mtime = st.st_mtim;
	f->size = st.st_size;
	return 0;
}

int bpsource_code_line_at(const struct bp_source *f, int line)
{
	size_t lo = 0, hi = f->nlines;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->lines[mid] < line)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->nlines ? f->lines[lo] : 0;
}

/* Exact text, then real path. */
int bpsource_names(const struct bp_source *f, const char *name)
{
	const char *base;
	char abs[PATH_MAX], real[PATH_MAX];

	if (!strcmp(name, f->path))
		return 1;
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strcmp(base, f->base) || !f->real)
		return 0;
	if (name[0] != '/') {
		if (!getcwd(abs, sizeof(abs)) ||
		    strlen(abs) + strlen(name) + 2 > sizeof(abs))
			return 0;
		strcat(abs, "/");
		strcat(abs, name);
		name = abs;
	}
	return realpath(name, real) && !strcmp(real, f->real);
}

/* sys.modules holds __main__ too. */
int bpsource_loaded_now(const struct bp_source *f)
{
	PyObject *mods = PyImport_GetModuleDict(), *key, *mod;
	Py_ssize_t pos = 0;

	while (mods && PyDict_Next(mods, &pos, &key, &mod)) {
		PyObject *d, *file;
		const char *s;

		if (!PyModule_Check(mod))
			continue;
		d = PyModule_GetDict(mod);
		file = d ? PyDict_GetItemString(d, "__file__") : NULL;
		s = file && PyUnicode_Check(file) ? PyUnicode_AsUTF8(file)
						  : NULL;
		if (!s) {
			PyErr_Clear();
			continue;
		}
		if (bpsource_names(f, s))
			return 1;
	}
	return 0;
}
