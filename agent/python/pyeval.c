/*
 * pyeval: run a piece of Python source in __main__.  See pyeval.h.
 *
 * Flow: compile as an expression; when that fails, parse as a module (an
 * AST), split off a last expression statement, run the rest and then
 * evaluate that expression.  Output goes to a bounded writer of our own
 * (a small C type, so a print loop cannot grow memory without bound);
 * sys.stdin is an empty StringIO so input() and exit() (which closes
 * stdin) do not touch the target's.  The swap and its undoing are C code
 * with the GIL held, and every path from one reaches the other, so no
 * asynchronous exception (pygil's KeyboardInterrupt) can skip the undoing.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "fdown.h"
#include "pyeval.h"
#include "pygil.h"
#include "pystack.h"

#define NEST_MAX 8 /* evaluations in progress at once (GIL threads) */
#define TRUNC_NOTE "\n[output truncated]\n"

/*
 * The output writer: keeps the first PYEVAL_OUTPUT_MAX bytes written
 * (UTF-8), drops the rest and remembers that it did.
 */
typedef struct writer {
	PyObject_HEAD char *buf;
	size_t len, cap;
	int truncated;
	/* Only the evaluating thread's writes are the evaluation's; the
	 * program's other threads keep writing where they did (stream: 0
	 * stdout, 1 stderr).  A stderr writer keeps its text in its stdout
	 * writer (sink, a reference), so both come back as one output. */
	unsigned long owner;
	int stream;
	struct writer *sink;
	/* The stream it stands in for (a reference), where the others'
	 * writes go, and every write once the evaluation is over (done):
	 * code may have kept the writer, as a logging handler does. */
	PyObject *orig;
	int done;
} writer;

static void writer_dealloc(PyObject *o)
{
	PyTypeObject *tp = Py_TYPE(o);

	Py_XDECREF((PyObject *)((writer *)o)->sink);
	Py_XDECREF(((writer *)o)->orig);
	free(((writer *)o)->buf);
	tp->tp_free(o);
	Py_DECREF(tp);
}

static void writer_append(writer *w, const char *s, size_t n)
{
	size_t room = PYEVAL_OUTPUT_MAX - w->len;

	if (n > room) {
		n = room;
		w->truncated = 1;
	}
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		char *nb;

		while (cap < w->len + n)
			cap *= 2;
		if (cap > PYEVAL_OUTPUT_MAX)
			cap = PYEVAL_OUTPUT_MAX;
		nb = realloc(w->buf, cap);
		if (!nb) {
			w->truncated = 1;
			return;
		}
		w->buf = nb;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static PyObject *forward_write(writer *w, PyObject *arg);

static PyObject *writer_write(PyObject *o, PyObject *arg)
{
	writer *w = (writer *)o;
	PyObject *b = NULL;
	const char *s;
	Py_ssize_t n;

	if (w->done || w->owner != PyThread_get_thread_ident())
		return forward_write(w, arg);
	if (w->sink)
		w = w->sink;
	if (!PyUnicode_Check(arg))
		return PyErr_Format(PyExc_TypeError,
				    "write() argument must be str, not %.100s",
				    Py_TYPE(arg)->tp_name);
	s = PyUnicode_AsUTF8AndSize(arg, &n);
	if (!s) {
		PyErr_Clear();
		b = PyUnicode_AsEncodedString(arg, "utf-8", "backslashreplace");
		if (!b)
			return NULL;
		s = PyBytes_AS_STRING(b);
		n = PyBytes_GET_SIZE(b);
	}
	if (!w->truncated)
		writer_append(w, s, (size_t)n);
	else if (n)
		w->truncated = 1;
	Py_XDECREF(b);
	return PyLong_FromSsize_t(PyUnicode_GET_LENGTH(arg));
}

static PyObject *writer_writelines(PyObject *o, PyObject *lines)
{
	PyObject *it = PyObject_GetIter(lines), *line;

	if (!it)
		return NULL;
	while ((line = PyIter_Next(it))) {
		PyObject *r = writer_write(o, line);

		Py_DECREF(line);
		if (!r) {
			Py_DECREF(it);
			return NULL;
		}
		Py_DECREF(r);
	}
	Py_DECREF(it);
	if (PyErr_Occurred())
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *writer_none(PyObject *o, PyObject *unused)
{
	(void)o;
	(void)unused;
	Py_RETURN_NONE;
}

static PyObject *writer_true(PyObject *o, PyObject *unused)
{
	(void)o;
	(void)unused;
	Py_RETURN_TRUE;
}

static PyObject *writer_false(PyObject *o, PyObject *unused)
{
	(void)o;
	(void)unused;
	Py_RETURN_FALSE;
}

/* As io.StringIO: io.UnsupportedOperation. */
static PyObject *writer_fileno(PyObject *o, PyObject *unused)
{
	PyObject *io = PyImport_ImportModule("io"), *exc = NULL;

	(void)o;
	(void)unused;
	if (io)
		exc = PyObject_GetAttrString(io, "UnsupportedOperation");
	Py_XDECREF(io);
	PyErr_Clear();
	PyErr_SetString(exc ? exc : PyExc_OSError, "fileno");
	Py_XDECREF(exc);
	return NULL;
}

static PyObject *writer_encoding(PyObject *o, void *c)
{
	(void)o;
	(void)c;
	return PyUnicode_FromString("utf-8");
}

static PyObject *writer_errors(PyObject *o, void *c)
{
	(void)o;
	(void)c;
	return PyUnicode_FromString("strict");
}

static PyObject *writer_closed(PyObject *o, void *c)
{
	(void)o;
	(void)c;
	Py_RETURN_FALSE;
}

static PyMethodDef writer_methods[] = {
	{"write", writer_write, METH_O, NULL},
	{"writelines", writer_writelines, METH_O, NULL},
	{"flush", writer_none, METH_NOARGS, NULL},
	{"isatty", writer_false, METH_NOARGS, NULL},
	{"readable", writer_false, METH_NOARGS, NULL},
	{"seekable", writer_false, METH_NOARGS, NULL},
	{"writable", writer_true, METH_NOARGS, NULL},
	{"fileno", writer_fileno, METH_NOARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
	{"encoding", writer_encoding, NULL, NULL, NULL},
	{"errors", writer_errors, NULL, NULL, NULL},
	{"closed", writer_closed, NULL, NULL, NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot writer_slots[] = {
	{Py_tp_dealloc, (void *)writer_dealloc},
	{Py_tp_methods, writer_methods},
	{Py_tp_getset, writer_getset},
	{0, NULL},
};

static PyType_Spec writer_spec = {
	.name = "probing.Output",
	.basicsize = sizeof(writer),
	.flags = Py_TPFLAGS_DEFAULT,
	.slots = writer_slots,
};

/* A new writer (the type is made per call: no state survives
 * Py_Finalize).  New reference or NULL with an exception set. */
static PyObject *writer_new(void)
{
	PyObject *tp = PyType_FromSpec(&writer_spec), *w;

	if (!tp)
		return NULL;
	w = PyType_GenericNew((PyTypeObject *)tp, NULL, NULL);
	Py_DECREF(tp);
	if (w)
		((writer *)w)->owner = PyThread_get_thread_ident();
	return w;
}

/*
 * Redirection.  Evaluations may overlap (user code releases the GIL and
 * another GIL thread starts one): the streams seen on entry to the first
 * are kept until the last ends, and a stream that still is one of ours
 * when an evaluation ends is handed to the newest one left, or restored.
 * A stream the user code set itself is left as it is.  All of this state
 * is guarded by the GIL.
 */
struct redirect {
	PyObject *out; /* writer, for stdout (owns the text) */
	PyObject *err; /* writer, for stderr (into out's text) */
	PyObject *in;  /* empty StringIO, for stdin */
};

static struct redirect active[NEST_MAX];
static size_t nactive;
static PyObject *saved[3]; /* stdout, stderr, stdin on first entry */
static const char *const stream_names[3] = {"stdout", "stderr", "stdin"};

static PyObject *stream_of(const struct redirect *r, int i)
{
	return i == 0 ? r->out : i == 1 ? r->err : r->in;
}

/* A write from a thread other than w's evaluating one: into the
 * evaluation that thread runs, if it runs one, else to the stream the
 * program had (its output must not vanish into someone's eval reply). */
static PyObject *forward_write(writer *w, PyObject *arg)
{
	unsigned long me = PyThread_get_thread_ident();
	PyObject *to;

	for (size_t k = 0; k < nactive; k++) {
		writer *o = (writer *)stream_of(&active[k], w->stream);

		if (o->owner == me)
			return writer_write((PyObject *)o, arg);
	}
	to = w->orig;
	if (!to || to == Py_None) /* no stream: dropped, as print does */
		return PyLong_FromSsize_t(
			PyUnicode_Check(arg) ? PyUnicode_GET_LENGTH(arg) : 0);
	return PyObject_CallMethod(to, "write", "O", arg);
}

static int redirect_begin(const struct redirect *r)
{
	if (nactive == NEST_MAX)
		return -EBUSY;
	if (!nactive)
		for (int i = 0; i < 3; i++) {
			saved[i] = PySys_GetObject(stream_names[i]);
			Py_XINCREF(saved[i]);
		}
	active[nactive].out = Py_NewRef(r->out);
	active[nactive].err = Py_NewRef(r->err);
	active[nactive].in = Py_NewRef(r->in);
	nactive++;
	for (int i = 0; i < 3; i++)
		if (PySys_SetObject(stream_names[i], stream_of(r, i)) < 0)
			PyErr_Clear();
	return 0;
}

static int is_ours(PyObject *o, const struct redirect *r, int i)
{
	if (o && o == stream_of(r, i))
		return 1;
	for (size_t k = 0; o && k < nactive; k++)
		if (o == stream_of(&active[k], i))
			return 1;
	return 0;
}

static void redirect_end(const struct redirect *r)
{
	size_t k;

	for (k = 0; k < nactive; k++)
		if (active[k].out == r->out)
			break;
	if (k == nactive)
		return;
	memmove(&active[k], &active[k + 1],
		(nactive - k - 1) * sizeof(active[0]));
	nactive--;
	for (int i = 0; i < 3; i++) {
		PyObject *cur = PySys_GetObject(stream_names[i]);
		PyObject *to =
			nactive ? stream_of(&active[nactive - 1], i) : saved[i];

		if (is_ours(cur, r, i) && PySys_SetObject(stream_names[i], to))
			PyErr_Clear();
	}
	Py_DECREF(r->out);
	Py_DECREF(r->err);
	Py_DECREF(r->in);
	if (!nactive)
		for (int i = 0; i < 3; i++)
			Py_CLEAR(saved[i]);
}

/*
 * Running.
 */

/* Source lines for tracebacks: linecache.cache[name].  Best effort. */
static void linecache_set(const char *name, const char *code, int add)
{
	PyObject *lc = PyImport_ImportModule("linecache"), *cache = NULL;
	PyObject *src = NULL, *lines = NULL, *entry = NULL;

	if (lc)
		cache = PyObject_GetAttrString(lc, "cache");
	if (cache && PyDict_Check(cache)) {
		if (!add) {
			if (PyDict_DelItemString(cache, name) < 0)
				PyErr_Clear();
		} else if ((src = PyUnicode_FromString(code)) &&
			   (lines = PyUnicode_Splitlines(src, 1)) &&
			   (entry = Py_BuildValue("(nOOs)",
						  (Py_ssize_t)strlen(code),
						  Py_None, lines, name))) {
			PyDict_SetItemString(cache, name, entry);
		}
	}
	Py_XDECREF(entry);
	Py_XDECREF(lines);
	Py_XDECREF(src);
	Py_XDECREF(cache);
	Py_XDECREF(lc);
	PyErr_Clear();
}

/* compile(ast, name, mode, 0, True): new reference or NULL. */
static PyObject *compile_ast(PyObject *ast, const char *name, const char *mode)
{
	PyObject *bi = PyImport_ImportModule("builtins"), *r = NULL;

	if (bi) {
		r = PyObject_CallMethod(bi, "compile", "Ossii", ast, name, mode,
					0, 1);
		Py_DECREF(bi);
	}
	return r;
}

/* Runs a module's AST: all but a last expression statement, then that
 * expression, whose value comes back in *value (NULL when there is none).
 * 0, or -1 with an exception set. */
static int run_module(PyObject *mod, const char *name, PyObject *g, PyObject *l,
		      PyObject **value)
{
	PyObject *body = NULL, *last = NULL, *astmod = NULL, *exprcls = NULL;
	PyObject *expr = NULL, *rest = NULL, *co = NULL, *r = NULL;
	Py_ssize_t n;
	int rc = -1;

	*value = NULL;
	body = PyObject_GetAttrString(mod, "body");
	astmod = PyImport_ImportModule("_ast");
	if (!body || !astmod || !PyList_Check(body))
		goto out;
	n = PyList_GET_SIZE(body);
	if (n) {
		exprcls = PyObject_GetAttrString(astmod, "Expr");
		if (!exprcls)
			goto out;
		last = PyList_GET_ITEM(body, n - 1);
		if (PyObject_IsInstance(last, exprcls) == 1) {
			PyObject *v = PyObject_GetAttrString(last, "value");
			PyObject *cls =
				v ? PyObject_GetAttrString(astmod, "Expression")
				  : NULL;

			expr = cls ? PyObject_CallOneArg(cls, v) : NULL;
			Py_XDECREF(cls);
			Py_XDECREF(v);
			rest = expr ? PyList_GetSlice(body, 0, n - 1) : NULL;
			if (!rest ||
			    PyObject_SetAttrString(mod, "body", rest) < 0)
				goto out;
		}
	}
	/* Compile both before running either: a syntax error in the last
	 * line must not run the rest. */
	co = compile_ast(mod, name, "exec");
	if (!co)
		goto out;
	if (expr) {
		PyObject *eco = compile_ast(expr, name, "eval");

		Py_SETREF(expr, eco);
		if (!expr)
			goto out;
	}
	r = PyEval_EvalCode(co, g, l);
	if (!r)
		goto out;
	if (expr) {
		*value = PyEval_EvalCode(expr, g, l);
		if (!*value)
			goto out;
	}
	rc = 0;
out:
	Py_XDECREF(r);
	Py_XDECREF(co);
	Py_XDECREF(rest);
	Py_XDECREF(expr);
	Py_XDECREF(exprcls);
	Py_XDECREF(astmod);
	Py_XDECREF(body);
	return rc;
}

/* Runs code in g (globals) and l (locals).  0 with *value (new
 * reference, NULL for none) and *is_expr, or -1 with an exception set.
 * expr_only: a SyntaxError unless code is an expression. */
static int run(const char *code, const char *name, PyObject *g, PyObject *l,
	       int expr_only, PyObject **value, int *is_expr)
{
	PyCompilerFlags cf = {.cf_flags = 0,
			      .cf_feature_version = PY_MINOR_VERSION};
	PyObject *co, *mod;
	int rc;

	*value = NULL;
	*is_expr = 0;
	/* As eval() does, an expression may be indented. */
	co = Py_CompileStringExFlags(code + strspn(code, " \t"), name,
				     Py_eval_input, &cf, -1);
	if (co) {
		*is_expr = 1;
		*value = PyEval_EvalCode(co, g, l);
		Py_DECREF(co);
		return *value ? 0 : -1;
	}
	if (expr_only)
		return -1; /* the expression's SyntaxError */
	/* Not an expression: whatever the error, the module form gives the
	 * one to report. */
	PyErr_Clear();
	cf.cf_flags = PyCF_ONLY_AST;
	mod = Py_CompileStringExFlags(code, name, Py_file_input, &cf, -1);
	if (!mod)
		return -1;
	rc = run_module(mod, name, g, l, value);
	Py_DECREF(mod);
	return rc;
}

/* The formatted traceback of the raised exception (malloc'd); clears
 * it.  *kbint is set for KeyboardInterrupt. */
static char *format_error(int *kbint)
{
	PyObject *type, *value, *tb, *tbmod, *lines = NULL, *text = NULL;
	PyObject *empty;
	char *s = NULL;

	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	*kbint = type &&
		 PyErr_GivenExceptionMatches(type, PyExc_KeyboardInterrupt);
	if (value && tb)
		PyException_SetTraceback(value, tb);
	tbmod = PyImport_ImportModule("traceback");
	/* Three arguments: the one-argument form is 3.10's. */
	if (tbmod && value)
		lines = PyObject_CallMethod(tbmod, "format_exception", "OOO",
					    (PyObject *)Py_TYPE(value), value,
					    tb ? tb : Py_None);
	empty = PyUnicode_FromString("");
	if (lines && empty)
		text = PyUnicode_Join(empty, lines);
	if (text) {
		const char *p = PyUnicode_AsUTF8(text);

		s = p ? strdup(p) : NULL;
	}
	PyErr_Clear();
	if (!s) {
		/* The traceback module failed (or was interrupted too). */
		char buf[256];
		const char *tn = type && PyType_Check(type)
					 ? ((PyTypeObject *)type)->tp_name
					 : "Exception";

		snprintf(buf, sizeof(buf), "%s\n", tn);
		s = strdup(buf);
	}
	Py_XDECREF(empty);
	Py_XDECREF(text);
	Py_XDECREF(lines);
	Py_XDECREF(tbmod);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	return s;
}

static char *output_text(const writer *w)
{
	size_t len = w->len, n = sizeof(TRUNC_NOTE) - 1;
	char *s;

	if (w->truncated) {
		/* Keep the note inside the cap, cut on a character. */
		if (len + n > PYEVAL_OUTPUT_MAX) {
			len = PYEVAL_OUTPUT_MAX - n;
			while (len &&
			       ((unsigned char)w->buf[len] & 0xC0) == 0x80)
				len--;
		}
	} else {
		n = 0;
	}
	s = malloc(len + n + 1);
	if (!s)
		return NULL;
	if (len)
		memcpy(s, w->buf, len);
	memcpy(s + len, TRUNC_NOTE, n);
	s[len + n] = '\0';
	return s;
}

/* Fills res from the run's outcome; the exception, if any, is consumed.
 * 0 or -ENOMEM. */
static int fill_result(struct pyeval_result *res, int rc, PyObject *value,
		       int is_expr)
{
	int kb = 0;

	if (rc == 0 && value && (is_expr || value != Py_None)) {
		int failed = 0;
		PyObject *tn = PyType_GetName(Py_TYPE(value));
		const char *t = tn ? PyUnicode_AsUTF8(tn) : NULL;

		res->type = strdup(t ? t : Py_TYPE(value)->tp_name);
		Py_XDECREF(tn);
		PyErr_Clear();
		res->value = pystack_repr(value, PYEVAL_RESULT_MAX, &failed);
		if (!res->type || !res->value)
			return -ENOMEM;
		if (failed == 2) {
			/* Interrupted in __repr__: report it as such. */
			res->interrupted = 1;
			res->error = strdup("KeyboardInterrupt\n");
			return res->error ? 0 : -ENOMEM;
		}
	}
	if (rc == 0) {
		res->ok = 1;
		return 0;
	}
	res->error = format_error(&kb);
	res->interrupted = kb;
	return res->error ? 0 : -ENOMEM;
}

/*
 * A signal the code raised for its own thread (signal.raise_signal(),
 * raise(), pthread_kill of itself) is pending on this GIL thread, which
 * blocks every signal: there it would stay, unseen (an eval of
 * raise_signal(SIGINT) did nothing).  It was meant for the program, as if
 * the program had raised it: it is taken off this thread and sent to the
 * process, where a thread of the program that does not block it takes it.
 * Signals pending for the whole process are not this thread's and stay.
 */
static void forward_own_signals(void)
{
	unsigned long long mask = 0;
	struct timespec zero = {0, 0};
	char line[128];
	sigset_t pending, one;
	siginfo_t si;
	FILE *f;

	if (!pygil_is_gil_thread() || sigpending(&pending) < 0 ||
	    sigisemptyset(&pending))
		return;
	/* The thread's own pending signals, not the process's. */
	f = fdown_fopen("/proc/thread-self/status");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "SigPnd: %llx", &mask) == 1)
			break;
	if (f)
		fclose(f);
	for (int sig = 1; sig <= 64 && mask; sig++) {
		if (!(mask & (1ULL << (sig - 1))))
			continue;
		sigemptyset(&one);
		if (sigaddset(&one, sig) < 0)
			continue;
		/* Thread-private signals are taken before the process's. */
		if (sigtimedwait(&one, &si, &zero) == sig)
			kill(getpid(), sig);
	}
}

int pyeval_run(const char *code, struct pyeval_result *res, char *err,
	       size_t errlen)
{
	return pyeval_run_in(code, NULL, res, err, errlen);
}

int pyeval_run_in(const char *code, const struct pyeval_scope *scope,
		  struct pyeval_result *res, char *err, size_t errlen)
{
	static unsigned long runs;
	struct redirect r = {NULL, NULL, NULL};
	PyObject *et, *ev, *etb, *main, *g, *l, *value = NULL, *io;
	char name[64];
	int rc, is_expr = 0, ret = 0;

	memset(res, 0, sizeof(*res));
	if (!code) {
		errbuf_set(err, errlen, "no code");
		return -EINVAL;
	}
	PyErr_Fetch(&et, &ev, &etb);
	if (scope && scope->globals) {
		g = scope->globals;
	} else {
		main = PyImport_AddModule("__main__");
		g = main ? PyModule_GetDict(main) : NULL;
	}
	l = scope && scope->locals ? scope->locals : g;
	r.out = writer_new();
	r.err = writer_new();
	if (r.out && r.err) {
		((writer *)r.out)->orig = Py_XNewRef(PySys_GetObject("stdout"));
		((writer *)r.err)->orig = Py_XNewRef(PySys_GetObject("stderr"));
		((writer *)r.err)->stream = 1;
		((writer *)r.err)->sink = (writer *)Py_NewRef(r.out);
	}
	io = PyImport_ImportModule("io");
	r.in = io ? PyObject_CallMethod(io, "StringIO", NULL) : NULL;
	Py_XDECREF(io);
	if (!g || !r.out || !r.err || !r.in) {
		PyErr_Clear();
		errbuf_set(err, errlen, "cannot set up the evaluation");
		ret = -ENOMEM;
		goto out;
	}
	if (redirect_begin(&r) < 0) {
		errbuf_set(err, errlen, "too many evaluations at once");
		ret = -EBUSY;
		goto out;
	}
	snprintf(name, sizeof(name), "<probing-%lu>", ++runs);
	linecache_set(name, code, 1);
	rc = run(code, name, g, l, scope && scope->expression, &value,
		 &is_expr);
	forward_own_signals();
	/* The value's repr and the traceback run Python code too: still
	 * captured.  Nothing returns between here and the undoing. */
	if (fill_result(res, rc, value, is_expr) < 0)
		ret = -ENOMEM;
	PyErr_Clear();
	redirect_end(&r);
	((writer *)r.out)->done = ((writer *)r.err)->done = 1;
	linecache_set(name, NULL, 0);
	res->output = output_text((writer *)r.out);
	if (!res->output)
		ret = -ENOMEM;
	if (ret == 0 && rc == 0 && value && scope && scope->keep)
		res->obj = Py_NewRef(value);
	if (ret < 0) {
		pyeval_result_release(res);
		errbuf_set(err, errlen, "out of memory");
	}
out:
	Py_XDECREF(value);
	Py_XDECREF(r.out);
	Py_XDECREF(r.err);
	Py_XDECREF(r.in);
	PyErr_Clear();
	PyErr_Restore(et, ev, etb);
	return ret;
}

void pyeval_result_release(struct pyeval_result *res)
{
	if (!res)
		return;
	free(res->value);
	free(res->type);
	free(res->output);
	free(res->error);
	memset(res, 0, sizeof(*res));
}
