/*
 * debugger: session, pause/step state machine, the trace function.
 * See debugger.h.
 *
 * State, and what guards it:
 *  - `lock`: owner, attached/active, the paused-thread table (struct
 *    paused: which thread, its round, the command that resumes it, the
 *    text of its frames), pause_pending, epoch, cleanup_pending.  The cond
 *    variable wakes paused threads.  Never held while taking the GIL or
 *    running Python.
 *  - the GIL: the Python objects of paused threads (frames, exception),
 *    the step table, the exception hooks, pyhook and breakpoints.
 *  - `active` and `epoch` are also read without the lock (atomics): the
 *    trace function checks them on every event.
 *
 * A stop: the stopping thread (GIL held, inside the trace function)
 * captures its frames, registers in the table, asks the other threads to
 * stop (pyhook modes), posts `stopped`, then waits on the cond variable
 * with the GIL released.  A resume sets each paused thread's command and
 * bumps the epoch; each thread takes the GIL back, drops its frames and
 * sets up its step, if any.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dap_msg.h"
#include "debugger.h"
#include "excepthooks.h"
#include "log.h"
#include "pyframes.h"
#include "pygil.h"
#include "pyhook.h"
#include "pystack.h"
#include "server.h"
#include "variables.h"
#include "worker.h"

#define STEPS_MAX 64
#define LOADED_EVENTS_MAX 64

struct pframe {
	char *func, *file;
	int line;
	PyObject *obj; /* PyFrameObject, strong; GIL */
};

struct paused {
	int used;
	long native_id;
	uint64_t ident;
	unsigned round;
	int cmd;	    /* 0 while waiting */
	unsigned cmd_epoch; /* the epoch the command started */
	int64_t frame_base;
	struct pframe *frames;
	size_t nframes;
	PyObject *exc; /* exception value of an exception stop; GIL */
	const char *exc_mode;
};

struct step {
	PyThreadState *ts;
	uint64_t ident;
	int cmd;
	int depth;
	unsigned epoch; /* stale when a resume came after */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static uint64_t owner;
static atomic_int active;
static atomic_uint epoch = 1;
static int pause_pending;
static int stopped; /* a round is in progress */
static unsigned round_no;
static int cleanup_pending;
static int64_t next_frame_id = DEBUGGER_FRAME_BASE;
static struct paused paused[DEBUGGER_PAUSED_MAX];
static int hold_asked; /* the owner asked for debugger_hold() */
static int hold_ms;
static int held;     /* paused, no owner, waiting for one */
static int announce; /* the owner took a held stop over */
static unsigned hold_gen;
static atomic_int hook_on;	  /* for status: pyhook_enabled(), mirrored */
static atomic_int filters_mirror; /* for status: 1 raised | 2 uncaught */

/* Loop thread only. */
static ev_timer hold_timer, threads_timer;
static struct ev_loop *dbg_loop;
#define KNOWN_THREADS_MAX 256
static long known[KNOWN_THREADS_MAX]; /* guarded by lock */
static size_t nknown;
static uint64_t known_session;

/* GIL */
static struct step steps[STEPS_MAX];
static int nsteps;
static int exc_raised, exc_uncaught;
static int audit_registered;
static atomic_int audit_on;
static struct server *dbg_server;

static int dbg_trace(PyObject *obj, PyFrameObject *f, int what, PyObject *arg);
static void cleanup_with_gil(void);
static int threads_now(long *now, size_t *k);

/* ---- events ----------------------------------------------------------- */

static void post(struct dap_message *ev)
{
	uint64_t s;

	pthread_mutex_lock(&lock);
	s = owner;
	pthread_mutex_unlock(&lock);
	if (!ev)
		return;
	if (!s || !dbg_server) {
		dap_message_free(ev);
		return;
	}
	server_post_event(dbg_server, s, ev);
}

static void post_output(const char *category, const char *text,
			const char *path, int line)
{
	struct dap_message *ev = dap_event_new("output");
	size_t n = strlen(text);
	char *t;

	if (!ev)
		return;
	t = malloc(n + 2);
	if (!t) {
		dap_message_free(ev);
		return;
	}
	memcpy(t, text, n);
	t[n] = '\n';
	t[n + 1] = 0;
	cJSON_AddStringToObject(ev->body, "category", category);
	cJSON_AddStringToObject(ev->body, "output", t);
	free(t);
	if (path) {
		cJSON *src = cJSON_AddObjectToObject(ev->body, "source");
		if (src)
			cJSON_AddStringToObject(src, "path", path);
		cJSON_AddNumberToObject(ev->body, "line", line);
	}
	post(ev);
}

static void post_verified(const int *ids, const int *lines, int n)
{
	for (int i = 0; i < n; i++) {
		struct dap_message *ev = dap_event_new("breakpoint");
		cJSON *bp;

		if (!ev)
			return;
		cJSON_AddStringToObject(ev->body, "reason", "changed");
		bp = cJSON_AddObjectToObject(ev->body, "breakpoint");
		if (bp) {
			cJSON_AddNumberToObject(bp, "id", ids[i]);
			cJSON_AddBoolToObject(bp, "verified", 1);
			cJSON_AddNumberToObject(bp, "line", lines[i]);
		}
		post(ev);
	}
}

static void post_stopped(const char *reason, long tid, int first,
			 const int *ids, int nids, const char *text)
{
	struct dap_message *ev = dap_event_new("stopped");
	cJSON *arr;

	if (!ev)
		return;
	cJSON_AddStringToObject(ev->body, "reason", reason);
	cJSON_AddNumberToObject(ev->body, "threadId", (double)tid);
	cJSON_AddBoolToObject(ev->body, "allThreadsStopped", 1);
	cJSON_AddBoolToObject(ev->body, "preserveFocusHint", !first);
	if (text) {
		cJSON_AddStringToObject(ev->body, "description", text);
		cJSON_AddStringToObject(ev->body, "text", text);
	}
	if (nids) {
		arr = cJSON_AddArrayToObject(ev->body, "hitBreakpointIds");
		for (int i = 0; arr && i < nids; i++)
			cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
	}
	post(ev);
}

/* ---- helpers ----------------------------------------------------------- */

static char *utf8_dup(PyObject *s)
{
	const char *t = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;

	if (!t) {
		PyErr_Clear();
		t = "?";
	}
	return strdup(t);
}

static int skip_own(long native_id)
{
	return pygil_is_own_thread(native_id);
}

/* GIL: forgets steps a resume made stale (their thread did not stop
 * since, e.g. it ended), so they keep no hook installed. */
static void prune_steps(void)
{
	unsigned ep = atomic_load(&epoch);

	for (int i = 0; i < nsteps;) {
		if (steps[i].epoch != ep) {
			pyhook_set_mode(steps[i].ts, 0);
			steps[i] = steps[--nsteps];
		} else {
			i++;
		}
	}
}

/* GIL: the hook is needed while anything may stop a thread. */
static void update_hooks(void)
{
	int loaded = 0, pending = 0, funcs = 0, need;

	prune_steps();

	breakpoints_counts(&loaded, &pending, &funcs);
	pthread_mutex_lock(&lock);
	need = atomic_load(&active) && (loaded || funcs || exc_raised ||
					stopped || pause_pending || nsteps);
	pthread_mutex_unlock(&lock);
	atomic_store(&audit_on, atomic_load(&active) && pending > 0);
	pyhook_set_exception_events(exc_raised && atomic_load(&active));
	if (need) {
		pyhook_enable();
		pyhook_retrace_all(skip_own);
	} else if (pyhook_enabled()) {
		pyhook_disable();
	}
	atomic_store(&hook_on, pyhook_enabled());
	atomic_store(&filters_mirror, exc_raised | exc_uncaught << 1);
}

static struct step *step_of(PyThreadState *ts)
{
	for (int i = 0; i < nsteps; i++)
		if (steps[i].ts == ts && steps[i].ident == ts->thread_id)
			return &steps[i];
	return NULL;
}

static void step_clear(PyThreadState *ts)
{
	for (int i = 0; i < nsteps; i++) {
		if (steps[i].ts == ts) {
			steps[i] = steps[--nsteps];
			pyhook_set_mode(ts, 0);
			return;
		}
	}
}

/* ---- stopping ---------------------------------------------------------- */

static void frames_free(struct pframe *fr, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(fr[i].func);
		free(fr[i].file);
		Py_XDECREF(fr[i].obj);
	}
	free(fr);
}

/* GIL: the stack from f outwards (or, for an uncaught exception, from
 * a traceback's innermost frame outwards: tb given). */
static struct pframe *capture(PyFrameObject *f, PyObject *tb, size_t *n)
{
	struct pframe *fr = calloc(DEBUGGER_FRAMES_MAX, sizeof(*fr));
	PyFrameObject *cur;
	size_t k = 0;

	*n = 0;
	if (!fr)
		return NULL;
	if (tb) {
		/* Innermost last in a traceback: collect, then reverse. */
		PyTracebackObject *t = (PyTracebackObject *)tb;
		for (; t && k < DEBUGGER_FRAMES_MAX; t = t->tb_next, k++) {
			PyCodeObject *co = PyFrame_GetCode(t->tb_frame);

			/* tb_lineno is computed lazily by its getter in
			 * later 3.11 releases (the field stays -1). */
			PyObject *ln = PyObject_GetAttrString((PyObject *)t,
							      "tb_lineno");

			fr[k].obj = Py_NewRef((PyObject *)t->tb_frame);
			fr[k].line = ln && PyLong_Check(ln)
					     ? (int)PyLong_AsLong(ln)
					     : t->tb_lineno;
			Py_XDECREF(ln);
			PyErr_Clear();
			fr[k].func = utf8_dup(co->co_qualname);
			fr[k].file = utf8_dup(co->co_filename);
			Py_DECREF(co);
		}
		for (size_t i = 0; i < k / 2; i++) {
			struct pframe x = fr[i];
			fr[i] = fr[k - 1 - i];
			fr[k - 1 - i] = x;
		}
		*n = k;
		return fr;
	}
	cur = (PyFrameObject *)Py_XNewRef((PyObject *)f);
	while (cur && k < DEBUGGER_FRAMES_MAX) {
		PyCodeObject *co = PyFrame_GetCode(cur);

		fr[k].obj = (PyObject *)cur;
		fr[k].line = PyFrame_GetLineNumber(cur);
		fr[k].func = utf8_dup(co->co_qualname);
		fr[k].file = utf8_dup(co->co_filename);
		Py_DECREF(co);
		k++;
		cur = PyFrame_GetBack(cur);
	}
	Py_XDECREF(cur);
	*n = k;
	return fr;
}

static struct paused *slot_of_locked(long native_id)
{
	for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++)
		if (paused[i].used && paused[i].native_id == native_id)
			return &paused[i];
	return NULL;
}

/*
 * GIL held, inside the trace function (or an exception hook) of thread
 * ts: pauses it until a resume.  Returns the command it was resumed with
 * (0 when the debugger went away).
 */
static int pause_here(PyThreadState *ts, PyFrameObject *f, PyObject *tb,
		      const char *reason, const int *ids, int nids,
		      const char *text, PyObject *exc, const char *exc_mode,
		      unsigned *cmd_epoch)
{
	struct pframe *fr;
	struct paused *p = NULL;
	size_t n;
	int first, cmd;
	long tid = ts->native_thread_id;

	fr = capture(f, tb, &n);
	*cmd_epoch = 0;
	if (!fr)
		return 0;
	step_clear(ts);
	pthread_mutex_lock(&lock);
	if (!atomic_load(&active)) {
		pthread_mutex_unlock(&lock);
		frames_free(fr, n);
		return 0;
	}
	for (int i = 0; i < DEBUGGER_PAUSED_MAX && !p; i++)
		if (!paused[i].used)
			p = &paused[i];
	if (!p) {
		pthread_mutex_unlock(&lock);
		frames_free(fr, n);
		log_warn("debugger: more than %d threads paused; thread %ld "
			 "goes on",
			 DEBUGGER_PAUSED_MAX, tid);
		return 0;
	}
	first = !stopped;
	if (first)
		round_no++;
	stopped = 1;
	pause_pending = 0;
	p->used = 1;
	p->native_id = tid;
	p->ident = ts->thread_id;
	p->round = round_no;
	p->cmd = 0;
	p->frames = fr;
	p->nframes = n;
	p->frame_base = next_frame_id;
	next_frame_id += (int64_t)n + 1;
	p->exc = Py_XNewRef(exc);
	p->exc_mode = exc_mode;
	pthread_mutex_unlock(&lock);

	if (first) {
		/* All-stop: every other thread stops at its next line. */
		pyhook_set_mode(NULL, PYHOOK_NEW | PYHOOK_CALLERS);
		pyhook_enable();
		atomic_store(&hook_on, 1);
		pyhook_retrace_all(skip_own);
	}
	if (first || strcmp(reason, "pause"))
		post_stopped(reason, tid, first, ids, nids, text);

	Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&lock);
	while (!p->cmd && atomic_load(&active))
		pthread_cond_wait(&wake, &lock);
	cmd = atomic_load(&active) ? p->cmd : 0;
	*cmd_epoch = p->cmd_epoch;
	pthread_mutex_unlock(&lock);
	Py_END_ALLOW_THREADS

		/* The GIL is ours again: let go of what the stop held. */
		pthread_mutex_lock(&lock);
	fr = p->frames;
	n = p->nframes;
	exc = p->exc;
	memset(p, 0, sizeof(*p));
	pthread_mutex_unlock(&lock);
	frames_free(fr, n);
	Py_XDECREF(exc);
	variables_reset_stale();
	return cmd;
}

/* GIL: after a resume, set up the thread's step (if any) and tracing. */
static void resumed(PyThreadState *ts, PyFrameObject *f, int cmd,
		    unsigned cmd_epoch)
{
	int still;

	pthread_mutex_lock(&lock);
	still = stopped || pause_pending;
	pthread_mutex_unlock(&lock);
	if (!still)
		pyhook_set_mode(NULL, 0);
	if (cmd == DEBUGGER_NEXT || cmd == DEBUGGER_STEP_IN ||
	    cmd == DEBUGGER_STEP_OUT) {
		if (nsteps < STEPS_MAX) {
			struct step *s = &steps[nsteps++];

			s->ts = ts;
			s->ident = ts->thread_id;
			s->cmd = cmd;
			s->depth = f ? pyhook_frame_depth(f) : 0;
			s->epoch = cmd_epoch;
			pyhook_set_mode(ts,
					cmd == DEBUGGER_STEP_IN
						? PYHOOK_NEW | PYHOOK_CALLERS
						: PYHOOK_CALLERS);
		}
	}
	if (!atomic_load(&active)) {
		cleanup_with_gil();
		return;
	}
	update_hooks();
	pyhook_retrace(ts);
}

/* Has the step of ts reached frame f? */
static int step_done(PyThreadState *ts, PyFrameObject *f)
{
	struct step *s = step_of(ts);

	if (!s)
		return 0;
	if (s->epoch != atomic_load(&epoch)) {
		step_clear(ts);
		return 0;
	}
	switch (s->cmd) {
	case DEBUGGER_STEP_IN:
		return 1;
	case DEBUGGER_NEXT:
		return pyhook_frame_depth(f) <= s->depth;
	case DEBUGGER_STEP_OUT:
		return pyhook_frame_depth(f) < s->depth;
	}
	return 0;
}

static void report_hit(struct bp_hit *hit, PyFrameObject *f, int line)
{
	PyCodeObject *co;
	char *path;

	if (!hit->log && !hit->error && !hit->newly_verified)
		return;
	co = PyFrame_GetCode(f);
	path = utf8_dup(co->co_filename);
	Py_DECREF(co);
	if (hit->log)
		post_output("console", hit->log, path, line);
	if (hit->error)
		post_output("stderr", hit->error, path, line);
	free(path);
}

static int pause_wanted(void)
{
	int p;

	pthread_mutex_lock(&lock);
	p = pause_pending || stopped;
	pthread_mutex_unlock(&lock);
	return p;
}

static int on_line(PyThreadState *ts, PyFrameObject *f)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	int wanted = pyhook_code_wanted((PyObject *)co), mode = pyhook_mode(ts);
	struct bp_hit hit = {0};
	const char *reason = NULL;
	unsigned ep;
	int line, cmd;

	Py_DECREF(co);
	if (!wanted && !mode && !step_of(ts)) {
		/* A frame traced for nothing (an exception event switched
		 * tracing on for the rest of it).  With raised-exception
		 * breakpoints the trace function must stay, so the frame stays
		 * traced until it returns; else switch it all off. */
		if (!exc_raised)
			pyhook_retrace(ts);
		return 0;
	}
	line = PyFrame_GetLineNumber(f);
	if (wanted)
		breakpoints_line_hit(f, line, &hit);
	report_hit(&hit, f, line);
	if (hit.newly_verified) {
		int ids[LOADED_EVENTS_MAX], lines[LOADED_EVENTS_MAX];
		PyCodeObject *c2 = PyFrame_GetCode(f);
		int k = breakpoints_file_loaded(c2->co_filename, ids, lines,
						LOADED_EVENTS_MAX);
		Py_DECREF(c2);
		post_verified(ids, lines, k);
	}
	if (hit.stop)
		reason = "breakpoint";
	else if (step_done(ts, f))
		reason = "step";
	else if (mode && pause_wanted())
		reason = "pause";
	if (!reason) {
		breakpoints_hit_release(&hit);
		if (mode && !pause_wanted() && !step_of(ts)) {
			/* A pause that was cancelled: stop tracing. */
			pyhook_set_mode(NULL, 0);
			pyhook_retrace(ts);
		}
		return 0;
	}
	cmd = pause_here(ts, f, NULL, reason, hit.ids, hit.nids, hit.error,
			 NULL, NULL, &ep);
	breakpoints_hit_release(&hit);
	resumed(ts, f, cmd, ep);
	return 0;
}

static int on_call(PyThreadState *ts, PyFrameObject *f)
{
	PyCodeObject *co = PyFrame_GetCode(f);
	int wanted = pyhook_code_wanted((PyObject *)co), cmd;
	struct bp_hit hit;

	Py_DECREF(co);
	if (!wanted || !pyhook_frame_starting(f))
		return 0;
	breakpoints_function_hit(f, &hit);
	report_hit(&hit, f, PyFrame_GetLineNumber(f));
	if (hit.stop) {
		unsigned ep;

		cmd = pause_here(ts, f, NULL, "function breakpoint", hit.ids,
				 hit.nids, hit.error, NULL, NULL, &ep);
		resumed(ts, f, cmd, ep);
	}
	breakpoints_hit_release(&hit);
	return 0;
}

/* "Type: message" of an exception value (malloc'd). */
static char *exc_text(PyObject *value)
{
	PyObject *s = PyObject_Str(value);
	const char *m = s ? PyUnicode_AsUTF8(s) : NULL;
	const char *tn = _PyType_Name(Py_TYPE(value));
	size_t n;
	char *out;

	if (!m)
		PyErr_Clear();
	n = strlen(tn) + (m ? strlen(m) : 0) + 3;
	if (n > DEBUGGER_TEXT_MAX)
		n = DEBUGGER_TEXT_MAX;
	out = malloc(n);
	if (out)
		snprintf(out, n, "%s%s%s", tn, m && *m ? ": " : "", m ? m : "");
	Py_XDECREF(s);
	return out;
}

static int on_exception(PyThreadState *ts, PyFrameObject *f, PyObject *arg)
{
	PyObject *type, *value, *tb, *cur;
	unsigned ep;
	char *text;
	int cmd;

	if (!exc_raised || !PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != 3)
		return 0;
	type = PyTuple_GET_ITEM(arg, 0);
	value = PyTuple_GET_ITEM(arg, 1);
	tb = PyTuple_GET_ITEM(arg, 2);
	/* Only where it is raised (the traceback has this frame alone),
	 * and not the exceptions that end loops and generators. */
	if (!PyTraceBack_Check(tb) || ((PyTracebackObject *)tb)->tb_next ||
	    PyErr_GivenExceptionMatches(type, PyExc_StopIteration) ||
	    PyErr_GivenExceptionMatches(type, PyExc_StopAsyncIteration) ||
	    PyErr_GivenExceptionMatches(type, PyExc_GeneratorExit) ||
	    !PyExceptionInstance_Check(value))
		return 0;
	/* In 3.11 the traceback is attached to the value later, when it is
	 * caught; exceptionInfo wants it now (the same object it will get). */
	cur = PyException_GetTraceback(value);
	if (!cur)
		PyException_SetTraceback(value, tb);
	Py_XDECREF(cur);
	PyErr_Clear();
	text = exc_text(value);
	cmd = pause_here(ts, f, NULL, "exception", NULL, 0, text, value,
			 "always", &ep);
	free(text);
	resumed(ts, f, cmd, ep);
	return 0;
}

/* The trace function of every traced thread.  GIL held. */
static int dbg_trace(PyObject *obj, PyFrameObject *f, int what, PyObject *arg)
{
	PyThreadState *ts = PyThreadState_Get();
	PyObject *et, *ev, *etb;
	int rc = 0;

	(void)obj;
	if (!atomic_load(&active)) {
		cleanup_with_gil();
		pyhook_retrace(ts);
		return 0;
	}
	if (pygil_is_gil_thread()) {
		/* The agent's own evaluations never stop. */
		if (ts->c_tracefunc == (Py_tracefunc)dbg_trace)
			ts->c_tracefunc = NULL;
		return 0;
	}
	PyErr_Fetch(&et, &ev, &etb);
	switch (what) {
	case PyTrace_LINE:
		rc = on_line(ts, f);
		break;
	case PyTrace_CALL:
		rc = on_call(ts, f);
		break;
	case PyTrace_EXCEPTION:
		rc = on_exception(ts, f, arg);
		break;
	default:
		break;
	}
	PyErr_Restore(et, ev, etb);
	return rc;
}

/* ---- uncaught exceptions: sys.excepthook / threading.excepthook ------ */

static void uncaught_stop(PyObject *value, PyObject *tb)
{
	PyThreadState *ts = PyThreadState_Get();
	unsigned ep;
	char *text;
	int cmd;

	if (!atomic_load(&active) || !exc_uncaught || pygil_is_gil_thread() ||
	    !PyTraceBack_Check(tb) || !PyExceptionInstance_Check(value) ||
	    PyErr_GivenExceptionMatches(value, PyExc_SystemExit))
		return;
	text = exc_text(value);
	cmd = pause_here(ts, NULL, tb, "exception", NULL, 0, text, value,
			 "unhandled", &ep);
	free(text);
	/* No stepping from here: the thread is ending. */
	resumed(ts, NULL, cmd ? DEBUGGER_CONTINUE : 0, ep);
}

/* ---- files being loaded: the audit hook ------------------------------- */

/* Never fails the audited operation.  Costs a flag test when no
 * breakpoint waits for its file. */
static int audit_hook(const char *event, PyObject *args, void *data)
{
	PyObject *name = NULL, *et, *ev, *etb;
	int ids[LOADED_EVENTS_MAX], lines[LOADED_EVENTS_MAX], k;

	(void)data;
	if (!atomic_load_explicit(&audit_on, memory_order_relaxed))
		return 0;
	if (strcmp(event, "exec") && strcmp(event, "compile"))
		return 0;
	if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 1 ||
	    _Py_IsFinalizing())
		return 0;
	if (event[0] == 'e') {
		PyObject *code = PyTuple_GET_ITEM(args, 0);
		if (PyCode_Check(code))
			name = ((PyCodeObject *)code)->co_filename;
	} else if (PyTuple_GET_SIZE(args) >= 2) {
		name = PyTuple_GET_ITEM(args, 1);
	}
	if (!name || !PyUnicode_Check(name))
		return 0;
	PyErr_Fetch(&et, &ev, &etb);
	k = breakpoints_file_loaded(name, ids, lines, LOADED_EVENTS_MAX);
	if (k) {
		pyhook_invalidate();
		update_hooks();
		post_verified(ids, lines, k);
	}
	PyErr_Clear();
	PyErr_Restore(et, ev, etb);
	return 0;
}

/* ---- session ---------------------------------------------------------- */

int debugger_attach(uint64_t session, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (owner && owner != session) {
		snprintf(err, errlen,
			 "another debugger is attached to this "
			 "process (session %llu); only one at a time",
			 (unsigned long long)owner);
		rc = -EBUSY;
	} else if (!owner && cleanup_pending) {
		snprintf(err, errlen,
			 "the previous debug session is still "
			 "being cleaned up; try again");
		rc = -EAGAIN;
	} else if (!owner && held) {
		/* Takes over a stop held for it (debugger_hold). */
		owner = session;
		held = 0;
		announce = 1;
		hold_gen++;
	} else if (!owner) {
		owner = session;
		atomic_store(&active, 1);
		atomic_fetch_add(&epoch, 1);
	}
	pthread_mutex_unlock(&lock);
	if (!rc) {
		/* The threads it will hear of are those started from now. */
		long now[KNOWN_THREADS_MAX];
		size_t k;

		if (!threads_now(now, &k)) {
			pthread_mutex_lock(&lock);
			if (owner == session && known_session != session) {
				memcpy(known, now, k * sizeof(long));
				nknown = k;
				known_session = session;
			}
			pthread_mutex_unlock(&lock);
		}
	}
	return rc;
}

int debugger_is_attached(uint64_t session)
{
	int r;

	pthread_mutex_lock(&lock);
	r = session && owner == session;
	pthread_mutex_unlock(&lock);
	return r;
}

uint64_t debugger_session(void)
{
	uint64_t s;

	pthread_mutex_lock(&lock);
	s = owner;
	pthread_mutex_unlock(&lock);
	return s;
}

/* The job that finishes a detach with the GIL when no thread does. */
struct cleanup_job {
	struct worker_job job;
};

static void cleanup_run(struct worker_job *job)
{
	char err[128];

	(void)job;
	/* Retry while the GIL is held elsewhere; a traced line or a
	 * resumed thread may well do it first. */
	for (int i = 0; i < 20; i++) {
		int rc = debugger_cleanup(err, sizeof(err));
		if (rc != -ETIMEDOUT)
			break;
	}
}

static void cleanup_done(struct worker_job *job)
{
	free(job);
}

static void detach_locked(void)
{
	owner = 0;
	announce = 0;
	atomic_store(&active, 0);
	atomic_fetch_add(&epoch, 1);
	pause_pending = 0;
	stopped = 0;
	cleanup_pending = 1;
	for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++)
		if (paused[i].used && !paused[i].cmd)
			paused[i].cmd = DEBUGGER_CONTINUE;
	pthread_cond_broadcast(&wake);
}

static void submit_cleanup(void)
{
	struct cleanup_job *j = calloc(1, sizeof(*j));

	if (!j)
		return;
	j->job.run = cleanup_run;
	j->job.done = cleanup_done;
	if (worker_submit(&j->job))
		free(j);
}

/* Loop thread: a held stop that nobody came for ends. */
static void on_hold_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	int expired;

	(void)loop, (void)revents;
	pthread_mutex_lock(&lock);
	expired = held && hold_gen == (unsigned)(uintptr_t)w->data;
	if (expired) {
		held = 0;
		detach_locked();
	}
	pthread_mutex_unlock(&lock);
	if (expired) {
		log_info("debugger: nobody attached to the held stop; resumed");
		submit_cleanup();
	}
}

void debugger_detach(uint64_t session)
{
	int hold = 0;

	pthread_mutex_lock(&lock);
	if (!session || owner != session) {
		pthread_mutex_unlock(&lock);
		return;
	}
	if (hold_asked) {
		/* Keep everything as it is for the next debugger. */
		hold = hold_ms;
		hold_asked = 0;
		owner = 0;
		held = 1;
		hold_gen++;
	} else {
		detach_locked();
	}
	pthread_mutex_unlock(&lock);
	if (hold) {
		/* The close hook runs on the loop thread: the timer is ours. */
		if (dbg_loop) {
			ev_timer_stop(dbg_loop, &hold_timer);
			ev_timer_set(&hold_timer, hold / 1000.0, 0.);
			hold_timer.data = (void *)(uintptr_t)hold_gen;
			ev_timer_start(dbg_loop, &hold_timer);
		}
		return;
	}
	submit_cleanup();
}

int debugger_hold(uint64_t session, int wait_ms, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (!session || owner != session) {
		snprintf(err, errlen, "not the attached debugger");
		rc = -ENOTCONN;
	} else {
		hold_asked = 1;
		hold_ms = wait_ms > 0 ? wait_ms : 1;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void debugger_release(uint64_t session)
{
	struct dap_message *ev = NULL;
	uint64_t to = 0;
	int was_held;

	pthread_mutex_lock(&lock);
	was_held = held;
	if (held) {
		held = 0;
		detach_locked();
	} else if (owner) {
		pause_pending = 0;
		stopped = 0;
		atomic_fetch_add(&epoch, 1);
		for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++)
			if (paused[i].used && !paused[i].cmd)
				paused[i].cmd = DEBUGGER_CONTINUE;
		pthread_cond_broadcast(&wake);
		if (owner != session)
			to = owner;
	}
	pthread_mutex_unlock(&lock);
	(void)was_held; /* the caller runs debugger_cleanup() */
	if (to && dbg_server && (ev = dap_event_new("continued"))) {
		cJSON_AddNumberToObject(ev->body, "threadId", 0);
		cJSON_AddBoolToObject(ev->body, "allThreadsContinued", 1);
		server_post_event(dbg_server, to, ev);
	}
}

void debugger_announce(uint64_t session)
{
	long tid = 0;

	pthread_mutex_lock(&lock);
	if (owner == session && stopped && announce)
		for (int i = 0; i < DEBUGGER_PAUSED_MAX && !tid; i++)
			if (paused[i].used && !paused[i].cmd)
				tid = paused[i].native_id;
	if (owner == session)
		announce = 0;
	pthread_mutex_unlock(&lock);
	if (tid)
		post_stopped("pause", tid, 1, NULL, 0, NULL);
}

void debugger_get_status(struct debugger_status *st)
{
	int f = atomic_load(&filters_mirror);

	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&lock);
	st->session = owner;
	st->held = held;
	st->stopped = stopped;
	for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++)
		if (paused[i].used && !paused[i].cmd)
			st->paused[st->npaused++] = paused[i].native_id;
	pthread_mutex_unlock(&lock);
	st->hook = atomic_load(&hook_on);
	st->exc_raised = f & 1;
	st->exc_uncaught = (f >> 1) & 1;
}

#define THREADS_SCAN KNOWN_THREADS_MAX

/* The target's threads now (native ids), read without the GIL; -1 when
 * they cannot be read. */
static int threads_now(long *now, size_t *k)
{
	struct pyframes_thread th[THREADS_SCAN];
	size_t n = 0;
	char err[64];

	*k = 0;
	if (pyframes_ready() ||
	    pyframes_threads(th, THREADS_SCAN, &n, err, sizeof(err)))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (th[i].native_id && !pygil_is_own_thread(th[i].native_id))
			now[(*k)++] = th[i].native_id;
	return 0;
}

/* Loop thread, twice a second: `thread` events for the attached session
 * (thread states read without the GIL).  known[] is guarded by `lock`;
 * debugger_attach() fills it for a new session. */
static void on_threads_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	long now[THREADS_SCAN];
	size_t k = 0;
	uint64_t s;

	(void)loop, (void)w, (void)revents;
	pthread_mutex_lock(&lock);
	s = owner;
	pthread_mutex_unlock(&lock);
	if (!s || threads_now(now, &k))
		return;
	pthread_mutex_lock(&lock);
	if (s != known_session) {
		memcpy(known, now, k * sizeof(long));
		nknown = k;
		known_session = s;
		pthread_mutex_unlock(&lock);
		return;
	}
	for (size_t i = 0; i < k; i++) {
		size_t j;
		for (j = 0; j < nknown && known[j] != now[i]; j++)
			;
		if (j == nknown) {
			struct dap_message *ev = dap_event_new("thread");
			if (ev) {
				cJSON_AddStringToObject(ev->body, "reason",
							"started");
				cJSON_AddNumberToObject(ev->body, "threadId",
							(double)now[i]);
				server_post_event(dbg_server, s, ev);
			}
		}
	}
	for (size_t j = 0; j < nknown; j++) {
		size_t i;
		for (i = 0; i < k && now[i] != known[j]; i++)
			;
		if (i == k) {
			struct dap_message *ev = dap_event_new("thread");
			if (ev) {
				cJSON_AddStringToObject(ev->body, "reason",
							"exited");
				cJSON_AddNumberToObject(ev->body, "threadId",
							(double)known[j]);
				server_post_event(dbg_server, s, ev);
			}
		}
	}
	memcpy(known, now, k * sizeof(long));
	nknown = k;
	pthread_mutex_unlock(&lock);
}

int debugger_register(struct server *srv)
{
	dbg_server = srv;
	dbg_loop = server_loop(srv);
	pyhook_init(breakpoints_code_wanted, dbg_trace);
	ev_timer_init(&hold_timer, on_hold_timeout, 1., 0.);
	ev_timer_init(&threads_timer, on_threads_timer, 0.5, 0.5);
	ev_timer_start(dbg_loop, &threads_timer);
	return server_on_close(srv, debugger_detach);
}

/* GIL: removes everything a finished session left, once. */
static void cleanup_with_gil(void)
{
	int todo;

	pthread_mutex_lock(&lock);
	todo = cleanup_pending && !atomic_load(&active);
	if (todo)
		cleanup_pending = 0;
	pthread_mutex_unlock(&lock);
	if (!todo)
		return;
	atomic_store(&audit_on, 0);
	breakpoints_clear();
	nsteps = 0;
	exc_raised = exc_uncaught = 0;
	excepthooks_set(NULL);
	pyhook_disable();
	atomic_store(&hook_on, 0);
	atomic_store(&filters_mirror, 0);
	variables_reset();
}

static void cleanup_gil_fn(void *arg)
{
	(void)arg;
	cleanup_with_gil();
}

/* Runs fn with the GIL (never interrupted: our code, no user code). */
static int with_gil(pygil_fn fn, void *arg, char *err, size_t errlen)
{
	struct pygil_limits lim = {0};
	long holder_native = 0;
	uint64_t holder;
	int rc;

	lim.start_ms = (int)config_int("python.gil_timeout_ms");
	rc = pygil_run(fn, arg, &lim, NULL);
	if (rc == -ETIMEDOUT) {
		holder = pystack_gil_holder(&holder_native);
		if (holder)
			snprintf(err, errlen,
				 "the GIL is held by thread %ld "
				 "and did not come within %d ms",
				 holder_native, lim.start_ms);
		else
			snprintf(err, errlen,
				 "the GIL did not come within "
				 "%d ms",
				 lim.start_ms);
	} else if (rc) {
		snprintf(err, errlen, "cannot run Python: %s", strerror(-rc));
	}
	return rc;
}

int debugger_cleanup(char *err, size_t errlen)
{
	int todo;

	pthread_mutex_lock(&lock);
	todo = cleanup_pending;
	pthread_mutex_unlock(&lock);
	if (!todo)
		return 0;
	return with_gil(cleanup_gil_fn, NULL, err, errlen);
}

/* ---- configuration ---------------------------------------------------- */

struct set_call {
	const char *path;
	const struct bp_spec *specs;
	size_t n;
	struct bp_result *out;
	int functions;
	int rc;
	char err[256];
};

static void set_gil_fn(void *arg)
{
	struct set_call *c = arg;

	cleanup_with_gil();
	if (!atomic_load(&active)) {
		c->rc = -ENOTCONN;
		snprintf(c->err, sizeof(c->err), "not attached");
		return;
	}
	if (c->functions)
		c->rc = breakpoints_set_functions(c->specs, c->n, c->out,
						  c->err, sizeof(c->err));
	else
		c->rc = breakpoints_set_file(c->path, c->specs, c->n, c->out,
					     c->err, sizeof(c->err));
	pyhook_invalidate();
	if (!audit_registered && PySys_AddAuditHook(audit_hook, NULL) == 0)
		audit_registered = 1;
	PyErr_Clear();
	update_hooks();
}

static int set_common(struct set_call *c, char *err, size_t errlen)
{
	int rc = with_gil(set_gil_fn, c, err, errlen);

	if (rc)
		return rc;
	if (c->rc)
		snprintf(err, errlen, "%s", c->err);
	return c->rc;
}

int debugger_set_breakpoints(const char *path, const struct bp_spec *specs,
			     size_t n, struct bp_result *out, char *err,
			     size_t errlen)
{
	struct set_call c = {.path = path, .specs = specs, .n = n, .out = out};

	return set_common(&c, err, errlen);
}

int debugger_set_function_breakpoints(const struct bp_spec *specs, size_t n,
				      struct bp_result *out, char *err,
				      size_t errlen)
{
	struct set_call c = {
		.specs = specs, .n = n, .out = out, .functions = 1};

	return set_common(&c, err, errlen);
}

struct filter_call {
	int raised, uncaught, rc;
};

static void filter_gil_fn(void *arg)
{
	struct filter_call *c = arg;

	cleanup_with_gil();
	if (!atomic_load(&active)) {
		c->rc = -ENOTCONN;
		return;
	}
	exc_raised = c->raised;
	exc_uncaught = c->uncaught;
	excepthooks_set(c->uncaught ? uncaught_stop : NULL);
	update_hooks();
}

int debugger_set_exception_filters(int raised, int uncaught, char *err,
				   size_t errlen)
{
	struct filter_call c = {raised, uncaught, 0};
	int rc = with_gil(filter_gil_fn, &c, err, errlen);

	if (!rc && c.rc)
		snprintf(err, errlen, "not attached");
	return rc ? rc : c.rc;
}

/* ---- execution control ------------------------------------------------- */

static void pause_gil_fn(void *arg)
{
	int *rc = arg;

	if (!atomic_load(&active)) {
		*rc = -ENOTCONN;
		return;
	}
	pyhook_set_mode(NULL, PYHOOK_NEW | PYHOOK_CALLERS);
	pyhook_enable();
	atomic_store(&hook_on, 1);
	pyhook_retrace_all(skip_own);
}

int debugger_pause(char *err, size_t errlen)
{
	int rc = 0, grc;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&active)) {
		pthread_mutex_unlock(&lock);
		snprintf(err, errlen, "no debugger is attached");
		return -ENOTCONN;
	}
	if (stopped) {
		pthread_mutex_unlock(&lock);
		return 0; /* already paused */
	}
	pause_pending = 1;
	pthread_mutex_unlock(&lock);
	grc = with_gil(pause_gil_fn, &rc, err, errlen);
	if (grc || rc) {
		pthread_mutex_lock(&lock);
		pause_pending = 0;
		pthread_mutex_unlock(&lock);
		if (rc == -ENOTCONN)
			snprintf(err, errlen, "no debugger is attached");
		return grc ? grc : rc;
	}
	return 0;
}

int debugger_resume(long thread, enum debugger_cmd cmd, char *err,
		    size_t errlen)
{
	struct paused *p = NULL;
	unsigned ep;

	pthread_mutex_lock(&lock);
	if (cmd != DEBUGGER_CONTINUE) {
		p = slot_of_locked(thread);
		if (!p || p->cmd) {
			pthread_mutex_unlock(&lock);
			snprintf(err, errlen, "thread %ld is not paused",
				 thread);
			return -ESRCH;
		}
	}
	pause_pending = 0;
	stopped = 0;
	ep = atomic_fetch_add(&epoch, 1) + 1;
	for (int i = 0; i < DEBUGGER_PAUSED_MAX; i++) {
		if (!paused[i].used || paused[i].cmd)
			continue;
		paused[i].cmd = &paused[i] == p ? (int)cmd : DEBUGGER_CONTINUE;
		paused[i].cmd_epoch = ep;
	}
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	return 0;
}

unsigned debugger_epoch(void)
{
	return atomic_load(&epoch);
}

int debugger_is_paused(long native_id)
{
	struct paused *p;
	int r;

	pthread_mutex_lock(&lock);
	p = slot_of_locked(native_id);
	r = p && !p->cmd;
	pthread_mutex_unlock(&lock);
	return r;
}

int debugger_stopped(void)
{
	int r;

	pthread_mutex_lock(&lock);
	r = stopped;
	pthread_mutex_unlock(&lock);
	return r;
}

int debugger_frames(long native_id, size_t start, size_t levels,
		    struct debugger_frame **out, size_t *n, size_t *total)
{
	struct debugger_frame *f = NULL;
	struct paused *p;
	size_t k = 0, end;

	*out = NULL;
	*n = *total = 0;
	pthread_mutex_lock(&lock);
	p = slot_of_locked(native_id);
	if (!p || p->cmd) {
		pthread_mutex_unlock(&lock);
		return -ESRCH;
	}
	*total = p->nframes;
	end = levels ? start + levels : p->nframes;
	if (end > p->nframes)
		end = p->nframes;
	if (start < end && !(f = calloc(end - start, sizeof(*f)))) {
		pthread_mutex_unlock(&lock);
		return -ENOMEM;
	}
	for (size_t d = start; d < end; d++, k++) {
		f[k].id = p->frame_base + (int64_t)d;
		f[k].func = strdup(p->frames[d].func ? p->frames[d].func : "?");
		f[k].file = strdup(p->frames[d].file ? p->frames[d].file : "?");
		f[k].line = p->frames[d].line;
		if (!f[k].func || !f[k].file) {
			pthread_mutex_unlock(&lock);
			debugger_frames_release(f, k + 1);
			return -ENOMEM;
		}
	}
	pthread_mutex_unlock(&lock);
	*out = f;
	*n = k;
	return 0;
}

void debugger_frames_release(struct debugger_frame *f, size_t n)
{
	for (size_t i = 0; f && i < n; i++) {
		free(f[i].func);
		free(f[i].file);
	}
	free(f);
}

PyFrameObject *debugger_frame_object(int64_t id, char *err, size_t errlen)
{
	PyObject *obj = NULL;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < DEBUGGER_PAUSED_MAX && !obj; i++) {
		struct paused *p = &paused[i];
		if (!p->used || p->cmd || id < p->frame_base ||
		    id >= p->frame_base + (int64_t)p->nframes)
			continue;
		obj = p->frames[id - p->frame_base].obj;
	}
	/* The owning thread drops its frames only with the GIL, which the
	 * caller holds: the reference is safe to take. */
	Py_XINCREF(obj);
	pthread_mutex_unlock(&lock);
	if (!obj)
		snprintf(err, errlen,
			 "frame %lld is not a frame of a paused "
			 "thread (was it resumed?)",
			 (long long)id);
	return (PyFrameObject *)obj;
}

PyObject *debugger_exception(long native_id, const char **mode, char *err,
			     size_t errlen)
{
	struct paused *p;
	PyObject *exc = NULL;

	pthread_mutex_lock(&lock);
	p = slot_of_locked(native_id);
	if (p && !p->cmd && p->exc) {
		exc = Py_NewRef(p->exc);
		*mode = p->exc_mode ? p->exc_mode : "always";
	}
	pthread_mutex_unlock(&lock);
	if (!exc)
		snprintf(err, errlen,
			 "thread %ld is not stopped on an "
			 "exception",
			 native_id);
	return exc;
}

void debugger_stop(void)
{
	pthread_mutex_lock(&lock);
	if (owner || held) {
		held = 0;
		detach_locked();
	}
	pthread_mutex_unlock(&lock);
}

void debugger_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&wake, NULL);
	owner = 0;
	atomic_store(&active, 0);
	pause_pending = 0;
	stopped = 0;
	cleanup_pending = 0;
	memset(paused, 0, sizeof(paused)); /* the parent's; leaked */
	nsteps = 0;
	atomic_store(&audit_on, 0);
	dbg_server = NULL;
	dbg_loop = NULL; /* the parent's loop; its timers are not ours */
	held = hold_asked = 0;
	nknown = 0;
	known_session = 0;
	pyhook_atfork_child();
}
