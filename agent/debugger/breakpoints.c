/*
 * breakpoints: the table and its matching.  See breakpoints.h.
 *
 * Line breakpoints live per file (struct bp_file, one per path: its
 * source, bpsource.h, and its breakpoints); function breakpoints in one
 * list.  One breakpoint's condition, hit count and log message are bp.h's.
 * file_map caches which file a co_filename string is (or that it is
 * none), and is emptied whenever the set of files changes; the trace backend
 * (cpython.trace) caches the per-code answer.  Everything is guarded by the
 * GIL.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"
#include <frameobject.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp.h"
#include "bpsource.h"
#include "breakpoints.h"
#include "cpython/cpython.h"
#include "errbuf.h"

struct bp_file {
	struct bp_source src;
	int loaded;
	struct bp *bps;
	size_t n;
};

static struct bp_file *files[BP_FILES_MAX];
static size_t nfiles;
static struct bp *funcs;
static size_t nfuncs;
static PyObject *file_map; /* co_filename -> index in files, or -1 */
static int next_id;
static unsigned table_gen; /* bumped by every change of the table */
/* file_of()'s last answer, for the line events of one frame after another
 * (up to 3.11 every line of a traced frame asks); the name is held, so
 * that no other string takes its address. */
static PyObject *last_name;
static int last_idx;
static unsigned last_gen;

static int same_text(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

static void file_free(struct bp_file *f)
{
	for (size_t i = 0; i < f->n; i++)
		bp_release(&f->bps[i]);
	free(f->bps);
	bpsource_release(&f->src);
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

	for (size_t i = 0; i < nfiles; i++)
		if (!strcmp(files[i]->src.path, path))
			return files[i];
	if (!create || nfiles == BP_FILES_MAX)
		return NULL;
	f = calloc(1, sizeof(*f));
	if (!f || bpsource_init(&f->src, path)) {
		free(f);
		return NULL;
	}
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
		errbuf_set(err, errlen,
			   "too many breakpoints in one file (max "
			   "%d)",
			   BP_PER_FILE_MAX);
		return -ENOSPC;
	}
	if (!f) {
		if (!n)
			return 0;
		errbuf_set(err, errlen,
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
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	src_rc = bpsource_lines(&f->src, msg, sizeof(msg));
	if (src_rc == 0 && !f->loaded)
		f->loaded = bpsource_loaded_now(&f->src);
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
			errbuf_set(err, errlen, "out of memory");
			return -ENOMEM;
		}
		if (src_rc) {
			snprintf(why, sizeof(why), "%s", msg);
		} else if (s->line <= 0) {
			snprintf(why, sizeof(why), "line %d: lines start at 1",
				 s->line);
		} else if (!rc) {
			b->line = bpsource_code_line_at(&f->src, s->line);
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
				 f->src.base);
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
		errbuf_set(err, errlen,
			   "too many function breakpoints (max %d)",
			   BP_FUNCTIONS_MAX);
		return -ENOSPC;
	}
	if (n && !(nf = calloc(n, sizeof(*nf)))) {
		errbuf_set(err, errlen, "out of memory");
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
			errbuf_set(err, errlen, "out of memory");
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
	Py_CLEAR(last_name);
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

/* The index of the file co_filename names, or -1, through file_map. */
static int file_lookup(PyObject *filename)
{
	PyObject *v, *num;
	const char *s;
	int idx = -1;

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
		if (bpsource_names(&files[i]->src, s)) {
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

/* The index of the file co_filename names, or -1.  Never raises. */
static int file_of(PyObject *filename)
{
	int idx;

	if (!nfiles || !filename || !PyUnicode_Check(filename))
		return -1;
	if (filename == last_name && last_gen == table_gen)
		return last_idx;
	idx = file_lookup(filename);
	Py_XSETREF(last_name, Py_NewRef(filename));
	last_idx = idx;
	last_gen = table_gen;
	return idx;
}

/* Does any line of code hold one of f's breakpoints? */
struct line_match {
	const struct bp_file *f;
	int found;
};

static int line_has_bp(void *arg, int line)
{
	struct line_match *m = arg;

	for (size_t j = 0; j < m->f->n; j++)
		if (m->f->bps[j].line == line)
			m->found = 1;
	return m->found;
}

static int code_has_bp(PyObject *code, const struct bp_file *f)
{
	struct line_match m = {f, 0};

	if (cpython.code_lines(code, line_has_bp, &m) < 0)
		PyErr_Clear();
	return m.found;
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
	*qual = PyUnicode_AsUTF8(cpython.frame.qualname(co));
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

int breakpoints_line_wanted(PyObject *code, int line)
{
	struct line_match m;
	int idx;

	if (!PyCode_Check(code))
		return 0;
	idx = file_of(((PyCodeObject *)code)->co_filename);
	if (idx < 0)
		return 0;
	m.f = files[idx];
	m.found = 0;
	return line_has_bp(&m, line);
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

/* The frame's namespaces, new references; -1 when they cannot be had. */
static int namespaces(PyFrameObject *f, PyObject **g, PyObject **l)
{
	*g = cpython.frame.globals(f);
	*l = cpython.frame.locals(f);
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
		bp_consider(b, g, l, hit, &table_gen);
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
		bp_consider(b, g, l, hit, &table_gen);
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
