/*
 * dbgoutput: the target's stdout and stderr as output events.  See
 * dbgoutput.h.
 *
 * State: `lock` guards the buffers, the byte budget (a token bucket) and
 * the dropped counts; `on` is read and cleared without it (an atomic).
 * Lock order: `lock`, then the session's (posting asks for the owner),
 * then the server's.
 * The streams patched and our wrappers are guarded by the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include "cpython/pycompat.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/config.h"
#include "core/thread.h"
#include "dbgevents.h"
#include "dbgoutput.h"
#include "python/gilcall.h"
#include "python/pygil.h"

#define NOTE_MAX 256

static const char *const names[2] = {"stdout", "stderr"};

struct outbuf {
	char text[DBGOUTPUT_CHUNK_MAX + 1];
	size_t len;
	int has_line; /* a newline since the last event */
	uint64_t dropped;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int on;
static struct outbuf bufs[2];
static double tokens = DBGOUTPUT_RATE; /* bytes that may go now */
static int64_t refilled_ms;	       /* when tokens were last topped up */
static int64_t posted_ms;	       /* when the last event went */

/* GIL */
static PyObject *patched[2];  /* the stream objects wrapped (strong) */
static PyObject *wrappers[2]; /* our write functions set on them */

/* Sends stream i's buffer as one event.  The lock held. */
static void post_locked(int i)
{
	struct outbuf *b = &bufs[i];

	if (!b->len)
		return;
	b->text[b->len] = 0;
	dbgevents_stream(names[i], b->text);
	b->len = 0;
	b->has_line = 0;
	posted_ms = agent_now_ms();
}

/* The longest prefix of s[0..n) of at most max bytes that does not cut a
 * UTF-8 sequence. */
static size_t utf8_prefix(const char *s, size_t n, size_t max)
{
	if (n <= max)
		return n;
	while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
		max--;
	return max;
}

/* Copies what the budget allows of s[0..n) into stream i's buffer. */
static void capture(int i, const char *s, size_t n)
{
	struct outbuf *b = &bufs[i];
	int64_t t = agent_now_ms();
	size_t take;

	pthread_mutex_lock(&lock);
	if (!atomic_load(&on)) {
		pthread_mutex_unlock(&lock);
		return;
	}
	tokens += (double)(t - refilled_ms) * DBGOUTPUT_RATE / 1000.0;
	if (tokens > DBGOUTPUT_RATE)
		tokens = DBGOUTPUT_RATE;
	refilled_ms = t;
	take = utf8_prefix(s, n, tokens > 0 ? (size_t)tokens : 0);
	b->dropped += n - take;
	tokens -= (double)take;
	while (take) {
		size_t room = DBGOUTPUT_CHUNK_MAX - b->len, k;

		if (!room) {
			post_locked(i);
			continue;
		}
		k = utf8_prefix(s, take, room);
		if (!k) { /* a sequence that does not fit: next chunk */
			post_locked(i);
			k = utf8_prefix(s, take, DBGOUTPUT_CHUNK_MAX);
		}
		memcpy(b->text + b->len, s, k);
		if (memchr(s, '\n', k))
			b->has_line = 1;
		b->len += k;
		s += k;
		take -= k;
	}
	if (b->has_line && t - posted_ms >= DBGOUTPUT_COALESCE_MS)
		post_locked(i);
	pthread_mutex_unlock(&lock);
}

/* The write that shadows a stream's: self is (index, original write). */
static PyObject *tee_write(PyObject *self, PyObject *arg)
{
	PyObject *orig = PyTuple_GET_ITEM(self, 1);
	PyObject *r = PyObject_CallOneArg(orig, arg);
	const char *s;
	Py_ssize_t n;

	if (!r || !atomic_load_explicit(&on, memory_order_relaxed) ||
	    !PyUnicode_Check(arg))
		return r;
	s = PyUnicode_AsUTF8AndSize(arg, &n);
	if (s)
		capture((int)PyLong_AsLong(PyTuple_GET_ITEM(self, 0)), s,
			(size_t)n);
	else
		PyErr_Clear();
	return r;
}

static PyMethodDef tee_def = {
	"write", tee_write, METH_O,
	"Writes to the stream, and copies the text to the debugger."};

/* ---- starting and removing ---------------------------------------------- */

struct start_call {
	char note[NOTE_MAX];
};

static void start_gil_fn(void *arg)
{
	struct start_call *c = arg;

	for (int i = 0; i < 2; i++) {
		PyObject *s = PySys_GetObject(names[i]), *orig, *self, *fn;

		if (patched[i] || !s || s == Py_None)
			continue;
		orig = PyObject_GetAttrString(s, "write");
		self = orig ? Py_BuildValue("(iN)", i, orig) : NULL;
		fn = self ? PyCFunction_New(&tee_def, self) : NULL;
		Py_XDECREF(self);
		if (!fn || PyObject_SetAttrString(s, "write", fn) < 0) {
			PyErr_Clear();
			Py_XDECREF(fn);
			snprintf(c->note, sizeof(c->note),
				 "probing: the target's sys.%s (%.100s) cannot "
				 "be redirected: it takes no attributes\n",
				 names[i], Py_TYPE(s)->tp_name);
			continue;
		}
		patched[i] = Py_NewRef(s);
		wrappers[i] = fn;
	}
}

int dbgoutput_start(char *err, size_t errlen)
{
	struct pygil_limits lim = {0};
	struct start_call c = {""};
	int rc;

	pthread_mutex_lock(&lock);
	memset(bufs, 0, sizeof(bufs));
	tokens = DBGOUTPUT_RATE;
	refilled_ms = posted_ms = agent_now_ms();
	atomic_store(&on, 1);
	pthread_mutex_unlock(&lock);
	lim.start_ms = (int)config_int("python.gil_timeout_ms");
	rc = pygil_run(start_gil_fn, &c, &lim, NULL);
	if (rc) {
		dbgoutput_stop();
		gilcall_explain(rc, lim.start_ms, err, errlen);
		return rc;
	}
	if (c.note[0])
		dbgevents_stream("console", c.note);
	return 0;
}

/* Lock-free: a detach calls it with the session's lock held, and a
 * posting writer holds ours while it asks who the session is. */
void dbgoutput_stop(void)
{
	atomic_store(&on, 0);
}

void dbgoutput_remove(void)
{
	for (int i = 0; i < 2; i++) {
		PyObject *d, *cur;

		if (!patched[i])
			continue;
		/* Only our own: a write the program set since stays. */
		d = PyObject_GetAttrString(patched[i], "__dict__");
		cur = d && PyDict_Check(d) ? PyDict_GetItemString(d, "write")
					   : NULL;
		if (cur == wrappers[i] && PyDict_DelItemString(d, "write") < 0)
			PyErr_Clear();
		PyErr_Clear();
		Py_XDECREF(d);
		Py_CLEAR(patched[i]);
		Py_CLEAR(wrappers[i]);
	}
}

/* ---- the periodic flush -------------------------------------------------- */

void dbgoutput_flush(void)
{
	char note[NOTE_MAX];

	if (!atomic_load_explicit(&on, memory_order_relaxed))
		return;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < 2; i++) {
		post_locked(i);
		if (!bufs[i].dropped)
			continue;
		snprintf(note, sizeof(note),
			 "probing: %llu bytes of %s not shown (more than %u "
			 "bytes per second)\n",
			 (unsigned long long)bufs[i].dropped, names[i],
			 DBGOUTPUT_RATE);
		dbgevents_stream("console", note);
		bufs[i].dropped = 0;
	}
	pthread_mutex_unlock(&lock);
}

void dbgoutput_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	atomic_store(&on, 0);
	memset(bufs, 0, sizeof(bufs));
}
