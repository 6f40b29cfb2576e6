/*
 * breakpoints: the table and its matching.  See breakpoints.h.
 *
 * Line breakpoints live per file (struct bp_file, one per path); function
 * breakpoints in one list.  file_map caches which file a co_filename
 * string is (or that it is none), and is emptied whenever the set of
 * files changes; pyhook caches the per-code answer.  Everything is
 * guarded by the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "breakpoints.h"

enum hit_op { HIT_NONE, HIT_EQ, HIT_GE, HIT_GT, HIT_LE, HIT_LT, HIT_MOD };

struct bp {
	int id;
	int line;     /* effective line (0: function breakpoint) */
	int req_line; /* the line asked for */
	int verified;
	char *name; /* function breakpoints */
	char *cond_text, *hit_text, *log_text;
	PyObject *cond;	     /* compiled condition, or NULL */
	PyObject *log_parts; /* list of str and code objects, or NULL */
	enum hit_op hit_op;
	long hit_n;
	long hits;
};

struct bp_file {
	char *path;	  /* as the client gave it */
	char *real;	  /* its real path, or NULL */
	const char *base; /* its last component, inside path */
	int loaded;
	struct bp *bps;
	size_t n;
	int *lines; /* lines with code, sorted */
	size_t nlines;
	struct timespec mtime;
	off_t size;
};

static struct bp_file *files[BP_FILES_MAX];
static size_t nfiles;
static struct bp *funcs;
static size_t nfuncs;
static PyObject *file_map; /* co_filename -> index in files, or -1 */
static int next_id;
static unsigned table_gen; /* bumped by every change of the table */

static void set_msg(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_msg(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* "Type: message" of the raised exception (malloc'd); clears it. */
static char *error_text(void)
{
	PyObject *t, *v, *tb, *s = NULL;
	const char *tn = "Exception", *msg = NULL;
	char *out;
	size_t n;

	PyErr_Fetch(&t, &v, &tb);
	PyErr_NormalizeException(&t, &v, &tb);
	if (t && PyType_Check(t))
		tn = _PyType_Name((PyTypeObject *)t);
	if (v)
		s = PyObject_Str(v);
	if (s)
		msg = PyUnicode_AsUTF8(s);
	PyErr_Clear();
	n = strlen(tn) + (msg ? strlen(msg) : 0) + 4;
	if (n > BP_LOG_MAX)
		n = BP_LOG_MAX;
	out = malloc(n);
	if (out)
		snprintf(out, n, "%s%s%s", tn, msg && *msg ? ": " : "",
			 msg ? msg : "");
	Py_XDECREF(s);
	Py_XDECREF(t);
	Py_XDECREF(v);
	Py_XDECREF(tb);
	return out;
}

/* ---- parsing what the client sent ------------------------------------- */

static int parse_hit(const char *text, enum hit_op *op, long *n)
{
	const char *p = text;
	char *end;

	*op = HIT_NONE;
	if (!text || !*text)
		return 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!strncmp(p, "==", 2)) {
		*op = HIT_EQ;
		p += 2;
	} else if (!strncmp(p, ">=", 2)) {
		*op = HIT_GE;
		p += 2;
	} else if (!strncmp(p, "<=", 2)) {
		*op = HIT_LE;
		p += 2;
	} else if (*p == '>') {
		*op = HIT_GT;
		p++;
	} else if (*p == '<') {
		*op = HIT_LT;
		p++;
	} else if (*p == '%') {
		*op = HIT_MOD;
		p++;
	} else {
		*op = HIT_EQ; /* a bare number: stop on that hit */
	}
	while (*p == ' ' || *p == '\t')
		p++;
	errno = 0;
	*n = strtol(p, &end, 10);
	if (errno || end == p || *n < 0 || (*op == HIT_MOD && *n == 0))
		return -1;
	while (*end == ' ' || *end == '\t')
		end++;
	return *end ? -1 : 0;
}

/* "x={x} and {{braces}}" -> ["x=", <code x>, " and {braces}"]; NULL
 * with msg on a syntax error. */
static PyObject *parse_log(const char *text, char *msg, size_t msglen)
{
	PyObject *parts = PyList_New(0), *item;
	const char *p = text;
	char lit[BP_TEXT_MAX + 1];
	size_t nl = 0;

	if (!parts)
		return NULL;
	while (*p) {
		if ((p[0] == '{' && p[1] == '{') ||
		    (p[0] == '}' && p[1] == '}')) {
			lit[nl++] = *p;
			p += 2;
			continue;
		}
		if (*p != '{') {
			lit[nl++] = *p++;
			continue;
		}
		const char *close = strchr(p + 1, '}');
		char expr[BP_TEXT_MAX + 1];
		size_t el;

		if (!close) {
			set_msg(msg, msglen, "log message: '{' without '}'");
			goto fail;
		}
		el = (size_t)(close - p - 1);
		memcpy(expr, p + 1, el);
		expr[el] = 0;
		if (nl) {
			item = PyUnicode_DecodeUTF8(lit, (Py_ssize_t)nl,
						    "replace");
			if (!item || PyList_Append(parts, item) < 0) {
				Py_XDECREF(item);
				goto fail;
			}
			Py_DECREF(item);
			nl = 0;
		}
		item = Py_CompileString(expr, "<logpoint>", Py_eval_input);
		if (!item) {
			char *e = error_text();

			set_msg(msg, msglen, "log message {%s}: %s", expr,
				e ? e : "syntax error");
			free(e);
			goto fail;
		}
		if (PyList_Append(parts, item) < 0) {
			Py_DECREF(item);
			goto fail;
		}
		Py_DECREF(item);
		p = close + 1;
	}
	if (nl) {
		item = PyUnicode_DecodeUTF8(lit, (Py_ssize_t)nl, "replace");
		if (!item || PyList_Append(parts, item) < 0) {
			Py_XDECREF(item);
			goto fail;
		}
		Py_DECREF(item);
	}
	return parts;
fail:
	PyErr_Clear();
	Py_DECREF(parts);
	return NULL;
}

static char *dup_opt(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

static int same_text(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

static void bp_release(struct bp *b)
{
	free(b->name);
	free(b->cond_text);
	free(b->hit_text);
	free(b->log_text);
	Py_XDECREF(b->cond);
	Py_XDECREF(b->log_parts);
	memset(b, 0, sizeof(*b));
}

/* Fills b from spec (its id and line are the caller's).  Returns 0, or
 * -EINVAL with msg (b then stays unverified but valid), -ENOMEM. */
static int bp_fill(struct bp *b, const struct bp_spec *s, char *msg,
		   size_t msglen)
{
	if ((s->condition && strlen(s->condition) > BP_TEXT_MAX) ||
	    (s->log_message && strlen(s->log_message) > BP_TEXT_MAX) ||
	    (s->hit_condition && strlen(s->hit_condition) > BP_TEXT_MAX)) {
		set_msg(msg, msglen, "condition or message longer than %d",
			BP_TEXT_MAX);
		return -EINVAL;
	}
	b->cond_text = dup_opt(s->condition);
	b->hit_text = dup_opt(s->hit_condition);
	b->log_text = dup_opt(s->log_message);
	if ((s->condition && *s->condition && !b->cond_text) ||
	    (s->hit_condition && *s->hit_condition && !b->hit_text) ||
	    (s->log_message && *s->log_message && !b->log_text))
		return -ENOMEM;
	if (b->cond_text) {
		b->cond = Py_CompileString(b->cond_text, "<condition>",
					   Py_eval_input);
		if (!b->cond) {
			char *e = error_text();

			set_msg(msg, msglen, "condition: %s",
				e ? e : "syntax error");
			free(e);
			return -EINVAL;
		}
	}
	if (parse_hit(b->hit_text, &b->hit_op, &b->hit_n) < 0) {
		set_msg(msg, msglen,
			"hit condition '%s': expected a number, optionally "
			"after ==, >=, >, <=, < or %%",
			b->hit_text);
		return -EINVAL;
	}
	if (b->log_text) {
		b->log_parts = parse_log(b->log_text, msg, msglen);
		if (!b->log_parts)
			return -EINVAL;
	}
	return 0;
}

/* ---- source files ----------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Appends the lines of code and of the code objects in its constants. */
static int collect_lines(PyObject *code, int **lines, size_t *n, size_t *cap,
			 int depth)
{
	PyObject *it, *t, *consts;

	if (depth > 64)
		return 0;
	it = PyObject_CallMethod(code, "co_lines", NULL);
	if (!it)
		return -1;
	while ((t = PyIter_Next(it))) {
		PyObject *ln = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3
				       ? PyTuple_GET_ITEM(t, 2)
				       : NULL;
		if (ln && PyLong_Check(ln)) {
			long l = PyLong_AsLong(ln);

			if (l > 0 && l < INT_MAX) {
				if (*n == *cap) {
					size_t c = *cap ? *cap * 2 : 256;
					int *nl = realloc(*lines,
							  c * sizeof(int));
					if (!nl) {
						Py_DECREF(t);
						Py_DECREF(it);
						PyErr_NoMemory();
						return -1;
					}
					*lines = nl;
					*cap = c;
				}
				(*lines)[(*n)++] = (int)l;
			}
		}
		Py_DECREF(t);
	}
	Py_DECREF(it);
	if (PyErr_Occurred())
		return -1;
	consts = PyObject_GetAttrString(code, "co_consts");
	if (!consts)
		return -1;
	for (Py_ssize_t i = 0;
	     PyTuple_Check(consts) && i < PyTuple_GET_SIZE(consts); i++) {
		PyObject *c = PyTuple_GET_ITEM(consts, i);

		if (PyCode_Check(c) &&
		    collect_lines(c, lines, n, cap, depth + 1) < 0) {
			Py_DECREF(consts);
			return -1;
		}
	}
	Py_DECREF(consts);
	return 0;
}

/* The lines of path that hold code, as the compiler sees the file now
 * (cached while its mtime and size stay).  0, or -errno with msg. */
static int source_lines(struct bp_file *f, char *msg, size_t msglen)
{
	struct stat st;
	FILE *fp;
	char *src;
	size_t len, cap = 0, n = 0, u = 0;
	PyObject *code;
	int *lines = NULL, rc;

	if (stat(f->path, &st) < 0) {
		rc = -errno;
		set_msg(msg, msglen, "cannot read %s: %s", f->path,
			strerror(errno));
		return rc;
	}
	if (f->lines && st.st_mtim.tv_sec == f->mtime.tv_sec &&
	    st.st_mtim.tv_nsec == f->mtime.tv_nsec && st.st_size == f->size)
		return 0;
	if (!S_ISREG(st.st_mode) || (size_t)st.st_size > BP_SOURCE_MAX) {
		set_msg(msg, msglen,
			"%s is not a source file of at most %u "
			"bytes",
			f->path, BP_SOURCE_MAX);
		return -EINVAL;
	}
	fp = fopen(f->path, "rb");
	if (!fp) {
		rc = -errno;
		set_msg(msg, msglen, "cannot read %s: %s", f->path,
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
		set_msg(msg, msglen, "%s is not Python source (NUL bytes)",
			f->path);
		return -EINVAL;
	}
	code = Py_CompileStringExFlags(src, f->path, Py_file_input, NULL, -1);
	free(src);
	if (!code) {
		char *e = error_text();

		set_msg(msg, msglen, "%s does not compile: %s", f->base,
			e ? e : "error");
		free(e);
		return -EINVAL;
	}
	rc = collect_lines(code, &lines, &n, &cap, 0);
	Py_DECREF(code);
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

/* The first line >= line with code, or 0. */
static int code_line_at(const struct bp_file *f, int line)
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

/* Does a str name the same file as f?  Exact text, then real path. */
static int names_file(const char *name, const struct bp_file *f)
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

/* Is a module (sys.modules, __main__) loaded from f?  No Python code runs:
 * modules' dicts are read directly. */
static int file_loaded_now(const struct bp_file *f)
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
		if (names_file(s, f))
			return 1;
	}
	return 0;
}

static void file_free(struct bp_file *f)
{
	for (size_t i = 0; i < f->n; i++)
		bp_release(&f->bps[i]);
	free(f->bps);
	free(f->lines);
	free(f->path);
	free(f->real);
	free(f);
}

static void map_reset(void)
{
	table_gen++;
	if (file_map)
		PyDict_Clear(file_map);
}

/* The file entry for path, created when absent (create) or NULL. */
static struct bp_file *file_get(const char *path, int create)
{
	struct bp_file *f;
	char real[PATH_MAX];
	const char *base;

	for (size_t i = 0; i < nfiles; i++)
		if (!strcmp(files[i]->path, path))
			return files[i];
	if (!create || nfiles == BP_FILES_MAX)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return NULL;
	}
	if (realpath(path, real))
		f->real = strdup(real);
	base = strrchr(f->path, '/');
	f->base = base ? base + 1 : f->path;
	files[nfiles++] = f;
	map_reset();
	return f;
}

static void file_remove(struct bp_file *f)
{
	for (size_t i = 0; i < nfiles; i++) {
		if (files[i] == f) {
			files[i] = files[--nfiles];
			break;
		}
	}
	file_free(f);
	map_reset();
}

int breakpoints_set_file(const char *path, const struct bp_spec *specs,
			 size_t n, struct bp_result *out, char *err,
			 size_t errlen)
{
	struct bp_file *f = file_get(path, n > 0);
	struct bp *nb;
	char msg[BP_MESSAGE_MAX] = "";
	int src_rc;

	if (n > BP_PER_FILE_MAX) {
		set_msg(err, errlen,
			"too many breakpoints in one file (max "
			"%d)",
			BP_PER_FILE_MAX);
		return -ENOSPC;
	}
	if (!f) {
		if (!n)
			return 0;
		set_msg(err, errlen,
			nfiles == BP_FILES_MAX
				? "too many files with breakpoints"
				: "out of memory");
		return nfiles == BP_FILES_MAX ? -ENOSPC : -ENOMEM;
	}
	if (!n) {
		file_remove(f);
		return 0;
	}
	nb = calloc(n, sizeof(*nb));
	if (!nb) {
		set_msg(err, errlen, "out of memory");
		return -ENOMEM;
	}
	src_rc = source_lines(f, msg, sizeof(msg));
	if (src_rc == 0 && !f->loaded)
		f->loaded = file_loaded_now(f);
	for (size_t i = 0; i < n; i++) {
		const struct bp_spec *s = &specs[i];
		struct bp *b = &nb[i], *old = NULL;
		struct bp_result *r = &out[i];
		char why[BP_MESSAGE_MAX] = "";
		int rc;

		memset(r, 0, sizeof(*r));
		b->req_line = s->line;
		for (size_t j = 0; j < f->n; j++) {
			struct bp *o = &f->bps[j];
			if (o->id && o->req_line == s->line &&
			    same_text(o->cond_text, s->condition) &&
			    same_text(o->hit_text, s->hit_condition))
				old = o;
		}
		if (old) {
			b->id = old->id;
			b->hits = old->hits;
			old->id = 0; /* taken */
		} else {
			b->id = ++next_id;
		}
		rc = bp_fill(b, s, why, sizeof(why));
		if (rc == -ENOMEM) {
			for (size_t k = 0; k <= i; k++)
				bp_release(&nb[k]);
			free(nb);
			set_msg(err, errlen, "out of memory");
			return -ENOMEM;
		}
		if (src_rc) {
			snprintf(why, sizeof(why), "%s", msg);
		} else if (s->line <= 0) {
			snprintf(why, sizeof(why), "line %d: lines start at 1",
				 s->line);
		} else if (!rc) {
			b->line = code_line_at(f, s->line);
			if (!b->line)
				snprintf(why, sizeof(why),
					 "no code at or "
					 "after line %d",
					 s->line);
		}
		b->verified = !why[0] && f->loaded;
		if (!why[0] && !f->loaded)
			snprintf(why, sizeof(why),
				 "%s is not loaded yet: the "
				 "breakpoint takes effect when its code runs",
				 f->base);
		if (!b->line || rc || src_rc)
			b->line = 0; /* never matches */
		r->id = b->id;
		r->verified = b->verified;
		r->line = b->line ? b->line : s->line;
		snprintf(r->message, sizeof(r->message), "%s", why);
	}
	for (size_t j = 0; j < f->n; j++)
		bp_release(&f->bps[j]);
	free(f->bps);
	f->bps = nb;
	f->n = n;
	map_reset();
	return 0;
}

int breakpoints_set_functions(const struct bp_spec *specs, size_t n,
			      struct bp_result *out, char *err, size_t errlen)
{
	struct bp *nf = NULL;

	if (n > BP_FUNCTIONS_MAX) {
		set_msg(err, errlen, "too many function breakpoints (max %d)",
			BP_FUNCTIONS_MAX);
		return -ENOSPC;
	}
	if (n && !(nf = calloc(n, sizeof(*nf)))) {
		set_msg(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct bp_spec *s = &specs[i];
		struct bp *b = &nf[i], *old = NULL;
		struct bp_result *r = &out[i];
		char why[BP_MESSAGE_MAX] = "";
		int rc = 0;

		memset(r, 0, sizeof(*r));
		for (size_t j = 0; j < nfuncs; j++)
			if (funcs[j].id && s->name &&
			    !strcmp(funcs[j].name, s->name) &&
			    same_text(funcs[j].cond_text, s->condition) &&
			    same_text(funcs[j].hit_text, s->hit_condition))
				old = &funcs[j];
		b->id = old ? old->id : ++next_id;
		b->hits = old ? old->hits : 0;
		if (old)
			old->id = 0;
		if (!s->name || !*s->name || strlen(s->name) > 512 ||
		    strpbrk(s->name, " \t()")) {
			snprintf(why, sizeof(why),
				 "'%s' is not a function "
				 "name (e.g. train or Model.forward)",
				 s->name ? s->name : "");
		} else if (!(b->name = strdup(s->name))) {
			rc = -ENOMEM;
		} else {
			rc = bp_fill(b, s, why, sizeof(why));
		}
		if (rc == -ENOMEM) {
			for (size_t k = 0; k <= i; k++)
				bp_release(&nf[k]);
			free(nf);
			set_msg(err, errlen, "out of memory");
			return -ENOMEM;
		}
		if (why[0]) {
			free(b->name);
			b->name = NULL; /* never matches */
		}
		b->verified = !why[0];
		r->id = b->id;
		r->verified = b->verified;
		snprintf(r->message, sizeof(r->message), "%s", why);
	}
	for (size_t j = 0; j < nfuncs; j++)
		bp_release(&funcs[j]);
	free(funcs);
	funcs = nf;
	nfuncs = n;
	table_gen++;
	return 0;
}

void breakpoints_clear(void)
{
	while (nfiles)
		file_remove(files[0]);
	for (size_t j = 0; j < nfuncs; j++)
		bp_release(&funcs[j]);
	free(funcs);
	funcs = NULL;
	nfuncs = 0;
	Py_CLEAR(file_map);
}

void breakpoints_counts(int *loaded, int *pending, int *functions)
{
	int l = 0, p = 0, fn = 0;

	for (size_t i = 0; i < nfiles; i++)
		for (size_t j = 0; j < files[i]->n; j++)
			if (files[i]->bps[j].line)
				*(files[i]->loaded ? &l : &p) += 1;
	for (size_t j = 0; j < nfuncs; j++)
		fn += funcs[j].name != NULL;
	if (loaded)
		*loaded = l;
	if (pending)
		*pending = p;
	if (functions)
		*functions = fn;
}

/* ---- matching --------------------------------------------------------- */

/* The index of the file co_filename names, or -1.  Never raises. */
static int file_of(PyObject *filename)
{
	PyObject *v, *num;
	const char *s;
	int idx = -1;

	if (!nfiles || !filename || !PyUnicode_Check(filename))
		return -1;
	if (!file_map && !(file_map = PyDict_New())) {
		PyErr_Clear();
		return -1;
	}
	v = PyDict_GetItemWithError(file_map, filename);
	if (v)
		return (int)PyLong_AsLong(v);
	PyErr_Clear();
	s = PyUnicode_AsUTF8(filename);
	if (!s) {
		PyErr_Clear();
		return -1;
	}
	for (size_t i = 0; i < nfiles; i++) {
		if (names_file(s, files[i])) {
			idx = (int)i;
			break;
		}
	}
	num = PyLong_FromLong(idx);
	if (!num || PyDict_SetItem(file_map, filename, num) < 0)
		PyErr_Clear();
	Py_XDECREF(num);
	return idx;
}

/* Does any line of code hold one of f's breakpoints? */
static int code_has_bp(PyObject *code, const struct bp_file *f)
{
	PyObject *it, *t;
	int found = 0;

	it = PyObject_CallMethod(code, "co_lines", NULL);
	if (!it) {
		PyErr_Clear();
		return 0;
	}
	while (!found && (t = PyIter_Next(it))) {
		PyObject *ln = PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 3
				       ? PyTuple_GET_ITEM(t, 2)
				       : NULL;
		long l = ln && PyLong_Check(ln) ? PyLong_AsLong(ln) : -1;

		for (size_t j = 0; l > 0 && j < f->n; j++)
			if (f->bps[j].line == l)
				found = 1;
		Py_DECREF(t);
	}
	Py_DECREF(it);
	PyErr_Clear();
	return found;
}

/* Could a function breakpoint name code?  (The module prefix is checked
 * when the frame runs.) */
static int name_matches(const char *name, const char *qual, const char *co,
			const char *module)
{
	size_t ln = strlen(name), lq = strlen(qual);

	if (!strcmp(name, qual))
		return 1;
	if (!strchr(name, '.') && !strcmp(name, co))
		return 1;
	if (ln > lq + 1 && name[ln - lq - 1] == '.' &&
	    !strcmp(name + ln - lq, qual)) {
		if (!module)
			return 1;
		return strlen(module) == ln - lq - 1 &&
		       !strncmp(name, module, ln - lq - 1);
	}
	return 0;
}

static int code_names(PyCodeObject *co, const char **qual, const char **name)
{
	*qual = PyUnicode_AsUTF8(co->co_qualname);
	*name = PyUnicode_AsUTF8(co->co_name);
	if (!*qual || !*name) {
		PyErr_Clear();
		return -1;
	}
	return 0;
}

int breakpoints_code_wanted(PyObject *code)
{
	PyCodeObject *co = (PyCodeObject *)code;
	const char *qual, *name;
	int idx;

	if (!PyCode_Check(code))
		return 0;
	idx = file_of(co->co_filename);
	if (idx >= 0 && code_has_bp(code, files[idx]))
		return 1;
	if (nfuncs && code_names(co, &qual, &name) == 0)
		for (size_t j = 0; j < nfuncs; j++)
			if (funcs[j].name &&
			    name_matches(funcs[j].name, qual, name, NULL))
				return 1;
	return 0;
}

static int mark_loaded(struct bp_file *f, int *ids, int *lines, int max)
{
	int k = 0;

	if (f->loaded)
		return 0;
	f->loaded = 1;
	for (size_t j = 0; j < f->n; j++) {
		struct bp *b = &f->bps[j];
		if (!b->line || b->verified)
			continue;
		b->verified = 1;
		if (k < max) {
			ids[k] = b->id;
			lines[k] = b->line;
			k++;
		}
	}
	return k;
}

int breakpoints_file_loaded(PyObject *filename, int *ids, int *lines, int max)
{
	int idx = file_of(filename);

	return idx < 0 ? 0 : mark_loaded(files[idx], ids, lines, max);
}

/* ---- hits ------------------------------------------------------------- */

static int hit_passes(const struct bp *b)
{
	switch (b->hit_op) {
	case HIT_NONE:
		return 1;
	case HIT_EQ:
		return b->hits == b->hit_n;
	case HIT_GE:
		return b->hits >= b->hit_n;
	case HIT_GT:
		return b->hits > b->hit_n;
	case HIT_LE:
		return b->hits <= b->hit_n;
	case HIT_LT:
		return b->hits < b->hit_n;
	case HIT_MOD:
		return b->hits % b->hit_n == 0;
	}
	return 1;
}

static void append(char *buf, size_t *len, const char *s, size_t n)
{
	if (*len + n > BP_LOG_MAX)
		n = BP_LOG_MAX - *len;
	memcpy(buf + *len, s, n);
	*len += n;
	buf[*len] = 0;
}

/* The log message made of parts in frame namespaces g/l (malloc'd). */
static char *format_log(PyObject *parts, PyObject *g, PyObject *l)
{
	char *out = malloc(BP_LOG_MAX + 1);
	size_t len = 0;

	if (!out)
		return NULL;
	out[0] = 0;
	for (Py_ssize_t i = 0; i < PyList_GET_SIZE(parts); i++) {
		PyObject *p = PyList_GET_ITEM(parts, i), *v, *s;
		const char *t;
		Py_ssize_t n;

		if (PyUnicode_Check(p)) {
			t = PyUnicode_AsUTF8AndSize(p, &n);
			if (t)
				append(out, &len, t, (size_t)n);
			continue;
		}
		Py_INCREF(p);
		v = PyEval_EvalCode(p, g, l);
		Py_DECREF(p);
		s = v ? PyObject_Str(v) : NULL;
		t = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
		if (t) {
			append(out, &len, t, (size_t)n);
		} else {
			char *e = error_text();

			append(out, &len, "<", 1);
			if (e)
				append(out, &len, e, strlen(e));
			append(out, &len, ">", 1);
			free(e);
		}
		Py_XDECREF(v);
		Py_XDECREF(s);
		PyErr_Clear();
	}
	return out;
}

static void add_log(struct bp_hit *hit, char *s)
{
	if (s && hit->log) {
		size_t n = strlen(hit->log) + strlen(s) + 2;
		char *j = malloc(n);

		if (j)
			snprintf(j, n, "%s\n%s", hit->log, s);
		free(hit->log);
		free(s);
		hit->log = j;
	} else if (s) {
		hit->log = s;
	}
}

/*
 * One breakpoint reached: condition, hit count, log message.  The user's
 * code may let other threads run, and the table change meanwhile: b is
 * not touched after Python code ran unless the table is unchanged.
 */
static void consider(struct bp *b, PyObject *g, PyObject *l, struct bp_hit *hit)
{
	unsigned g0 = table_gen;
	int id = b->id;

	if (b->cond) {
		PyObject *cond = Py_NewRef(b->cond), *v;
		int t;

		v = PyEval_EvalCode(cond, g, l);
		Py_DECREF(cond);
		t = v ? PyObject_IsTrue(v) : -1;
		Py_XDECREF(v);
		if (t < 0) {
			char *e = error_text();

			if (!hit->error && e && table_gen == g0) {
				size_t n =
					strlen(e) + strlen(b->cond_text) + 64;
				hit->error = malloc(n);
				if (hit->error)
					snprintf(hit->error, n,
						 "breakpoint "
						 "condition '%s' raised %s",
						 b->cond_text, e);
			}
			free(e);
			goto stop;
		}
		if (!t || table_gen != g0)
			return;
	}
	b->hits++;
	if (!hit_passes(b))
		return;
	if (b->log_parts) {
		PyObject *parts = Py_NewRef(b->log_parts);

		add_log(hit, format_log(parts, g, l));
		Py_DECREF(parts);
		return;
	}
stop:
	hit->stop = 1;
	if (hit->nids < BP_HIT_IDS_MAX)
		hit->ids[hit->nids++] = id;
}

/* The frame's namespaces, new references; -1 when they cannot be had. */
static int namespaces(PyFrameObject *f, PyObject **g, PyObject **l)
{
	*g = PyFrame_GetGlobals(f);
	*l = PyFrame_GetLocals(f);
	if (!*g || !*l) {
		Py_CLEAR(*g);
		Py_CLEAR(*l);
		PyErr_Clear();
		return -1;
	}
	return 0;
}

int breakpoints_line_hit(PyFrameObject *f, int line, struct bp_hit *hit)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	PyObject *g = NULL, *l = NULL, *et, *ev, *etb;
	struct bp_file *file;
	int idx, ids[1], lines[1];
	unsigned g0;

	memset(hit, 0, sizeof(*hit));
	idx = file_of(co->co_filename);
	Py_DECREF(co);
	if (idx < 0)
		return 0;
	file = files[idx];
	for (size_t j = 0; j < file->n; j++) {
		struct bp *b = &file->bps[j];

		if (b->line != line)
			continue;
		if (!file->loaded) {
			/* Seen running before any event named the file. */
			hit->newly_verified = 1;
			mark_loaded(file, ids, lines, 0);
		}
		if (!g) {
			PyErr_Fetch(&et, &ev, &etb);
			if (namespaces(f, &g, &l) < 0) {
				PyErr_Restore(et, ev, etb);
				return 0;
			}
			PyErr_Restore(et, ev, etb);
		}
		PyErr_Fetch(&et, &ev, &etb);
		g0 = table_gen;
		consider(b, g, l, hit);
		PyErr_Clear();
		PyErr_Restore(et, ev, etb);
		if (table_gen != g0)
			break; /* changed while Python code ran */
	}
	Py_XDECREF(g);
	Py_XDECREF(l);
	return 0;
}

int breakpoints_function_hit(PyFrameObject *f, struct bp_hit *hit)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	PyObject *g = NULL, *l = NULL, *modname, *et, *ev, *etb;
	const char *qual, *name, *module = "";
	int named;

	memset(hit, 0, sizeof(*hit));
	if (!nfuncs || code_names(co, &qual, &name) < 0) {
		Py_DECREF(co);
		return 0;
	}
	PyErr_Fetch(&et, &ev, &etb);
	if (namespaces(f, &g, &l) < 0) {
		PyErr_Restore(et, ev, etb);
		Py_DECREF(co);
		return 0;
	}
	modname = PyDict_Check(g) ? PyDict_GetItemString(g, "__name__") : NULL;
	if (modname && PyUnicode_Check(modname))
		module = PyUnicode_AsUTF8(modname);
	if (!module)
		module = "";
	for (size_t j = 0; j < nfuncs; j++) {
		struct bp *b = &funcs[j];
		unsigned g0 = table_gen;

		named = b->name && name_matches(b->name, qual, name, module);
		if (!named)
			continue;
		consider(b, g, l, hit);
		PyErr_Clear();
		if (table_gen != g0)
			break; /* changed while Python code ran */
	}
	PyErr_Restore(et, ev, etb);
	Py_DECREF(g);
	Py_DECREF(l);
	Py_DECREF(co);
	return 0;
}

void breakpoints_hit_release(struct bp_hit *hit)
{
	free(hit->log);
	free(hit->error);
	memset(hit, 0, sizeof(*hit));
}
