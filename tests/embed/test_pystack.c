/*
 * pystack in an embedded interpreter: three named Python threads parked at
 * known lines (fixture_threads.py) and the main thread calling into a small
 * built-in module _probe, which takes the stacks with the GIL, without it
 * (GIL released; from a pthread while the main thread spins holding the
 * GIL; through the pipe fallback) and from an agent-like thread that takes
 * the GIL with PyGILState_Ensure.  The snapshots are checked after the
 * fixture ends.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cpython/pyframes.h"
#include "python/pystack.h"
#include "test.h"

#define FIXTURE FIXTURE_DIR "/fixture_threads.py"

static struct pystack g_gil, g_nogil, g_spin, g_agent, g_filter, g_trunc,
	g_excl, g_pipe;
static int rc_gil = 1, rc_nogil = 1, rc_spin = 1, rc_agent = 1, rc_pipe = 1;
static int exc_after_gil = -1;
static uint64_t holder_nogil = 1, holder_spin;
static long holder_spin_native;
static atomic_int spin_done;

/* The line of the "# LINE name" marker in the fixture, or -1. */
static int marker_line(const char *name)
{
	char line[512], tag[64];
	FILE *f = fopen(FIXTURE, "r");
	int n = 0, found = -1;

	snprintf(tag, sizeof(tag), "# LINE %s\n", name);
	while (f && fgets(line, sizeof(line), f)) {
		char *p;

		n++;
		p = strstr(line, "# LINE ");
		if (p && strcmp(p, tag) == 0) {
			found = n;
			break;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static struct pystack_thread *find_thread(struct pystack *s, uint64_t id)
{
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].thread_id == id)
			return &s->threads[i];
	return NULL;
}

static struct pystack_frame *find_frame(struct pystack_thread *t,
					const char *func)
{
	for (size_t i = 0; t && i < t->nframes; i++)
		if (t->frames[i].func && strcmp(t->frames[i].func, func) == 0)
			return &t->frames[i];
	return NULL;
}

static struct pystack_var *find_local(struct pystack_frame *f, const char *name)
{
	for (size_t i = 0; f && i < f->nlocals; i++)
		if (strcmp(f->locals[i].name, name) == 0)
			return &f->locals[i];
	return NULL;
}

/* Are the two stacks of a thread the same, frame by frame? */
static int same_stack(const struct pystack_thread *a,
		      const struct pystack_thread *b)
{
	if (!a || !b || a->nframes != b->nframes || !a->nframes)
		return 0;
	for (size_t i = 0; i < a->nframes; i++) {
		const struct pystack_frame *x = &a->frames[i],
					   *y = &b->frames[i];

		if (strcmp(x->func, y->func) || strcmp(x->file, y->file) ||
		    x->lineno != y->lineno) {
			fprintf(stderr, "frame %zu: %s %s:%d != %s %s:%d\n", i,
				x->func, x->file, x->lineno, y->func, y->file,
				y->lineno);
			return 0;
		}
	}
	return a->native_id == b->native_id;
}

/*
 * The _probe module.
 */

static PyObject *probe_take_gil(PyObject *m, PyObject *a)
{
	struct pystack_opts o = {.locals = 1};
	char err[128];

	(void)m;
	(void)a;
	rc_gil = pystack_take_gil(&g_gil, &o, err, sizeof(err));
	exc_after_gil = PyErr_Occurred() != NULL;
	Py_RETURN_NONE;
}

static PyObject *probe_take_nogil(PyObject *m, PyObject *a)
{
	char err[128];
	long nid;

	(void)m;
	(void)a;
	Py_BEGIN_ALLOW_THREADS rc_nogil =
		pystack_take_nogil(&g_nogil, NULL, err, sizeof(err));
	holder_nogil = pystack_gil_holder(&nid);
	Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static void *spin_walker(void *arg)
{
	char err[128];

	(void)arg;
	rc_spin = pystack_take_nogil(&g_spin, NULL, err, sizeof(err));
	holder_spin = pystack_gil_holder(&holder_spin_native);
	atomic_store(&spin_done, 1);
	return NULL;
}

/* Holds the GIL in a C loop while a thread walks without it. */
static PyObject *probe_spin_and_walk(PyObject *m, PyObject *a)
{
	pthread_t th;

	(void)m;
	(void)a;
	if (pthread_create(&th, NULL, spin_walker, NULL) != 0)
		Py_RETURN_NONE;
	while (!atomic_load(&spin_done))
		;
	pthread_join(th, NULL);
	Py_RETURN_NONE;
}

/* Waits (at most 5 s) until the main thread sleeps in the kernel: it
 * created the agent thread and goes on into pthread_join(), which on a
 * busy machine it may not have reached yet. */
static void wait_main_asleep(void)
{
	char path[64], buf[512];

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)getpid());
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		const char *p;

		if (f)
			fclose(f);
		buf[n] = '\0';
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'S')
			return;
		usleep(1000);
	}
}

static void *agent_thread(void *arg)
{
	PyGILState_STATE st;
	struct pystack_opts o = {0};
	char err[128];
	uint64_t alpha = 0;

	(void)arg;
	wait_main_asleep();
	st = PyGILState_Ensure();
	rc_agent = pystack_take_gil(&g_agent, NULL, err, sizeof(err));
	for (size_t i = 0; i < g_agent.nthreads; i++)
		if (g_agent.threads[i].name &&
		    strcmp(g_agent.threads[i].name, "alpha") == 0)
			alpha = g_agent.threads[i].thread_id;
	o.threads = &alpha;
	o.nthreads = 1;
	pystack_take_gil(&g_filter, &o, err, sizeof(err));
	o.max_depth = 2;
	pystack_take_gil(&g_trunc, &o, err, sizeof(err));
	memset(&o, 0, sizeof(o));
	o.exclude = &alpha;
	o.nexclude = 1;
	pystack_take_gil(&g_excl, &o, err, sizeof(err));
	PyGILState_Release(st);
	return NULL;
}

static PyObject *probe_take_from_agent_thread(PyObject *m, PyObject *a)
{
	pthread_t th;
	int rc;

	(void)m;
	(void)a;
	Py_BEGIN_ALLOW_THREADS rc =
		pthread_create(&th, NULL, agent_thread, NULL);
	if (rc == 0)
		pthread_join(th, NULL);
	Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyObject *probe_take_nogil_pipe(PyObject *m, PyObject *a)
{
	char err[128];

	(void)m;
	(void)a;
	Py_BEGIN_ALLOW_THREADS pyframes_force_pipe(1);
	rc_pipe = pystack_take_nogil(&g_pipe, NULL, err, sizeof(err));
	pyframes_force_pipe(0);
	Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyMethodDef probe_methods[] = {
	{"take_gil", probe_take_gil, METH_NOARGS, NULL},
	{"take_nogil", probe_take_nogil, METH_NOARGS, NULL},
	{"spin_and_walk", probe_spin_and_walk, METH_NOARGS, NULL},
	{"take_from_agent_thread", probe_take_from_agent_thread, METH_NOARGS,
	 NULL},
	{"take_nogil_pipe", probe_take_nogil_pipe, METH_NOARGS, NULL},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef probe_def = {
	PyModuleDef_HEAD_INIT,
	"_probe",
	NULL,
	-1,
	probe_methods,
	NULL,
	NULL,
	NULL,
	NULL,
};

static PyObject *probe_init(void)
{
	return PyModule_Create(&probe_def);
}

/*
 * Checks.
 */

struct ids {
	uint64_t id;
	long native;
};

static struct ids ids_of(PyObject *idents, const char *name)
{
	struct ids r = {0, 0};
	PyObject *t = PyDict_GetItemString(idents, name);

	if (t && PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 2) {
		r.id = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 0));
		r.native = PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
	}
	return r;
}

static void check_frame(struct pystack_thread *t, const char *func,
			const char *marker)
{
	struct pystack_frame *f = find_frame(t, func);

	CHECK(f != NULL);
	if (!f) {
		fprintf(stderr, "  no frame %s\n", func);
		return;
	}
	CHECK_STR(f->file, FIXTURE);
	CHECK(f->lineno == marker_line(marker));
}

static PyObject *idents;

static void test_run_fixture(void)
{
	char code[512];
	PyObject *main;

	snprintf(code, sizeof(code),
		 "exec(compile(open(%s).read(), %s, 'exec'))", "'" FIXTURE "'",
		 "'" FIXTURE "'");
	CHECK(PyRun_SimpleString(code) == 0);
	main = PyImport_AddModule("__main__");
	idents = PyDict_GetItemString(PyModule_GetDict(main), "idents");
	CHECK(idents != NULL && PyDict_Check(idents));
}

static void test_gil_path(void)
{
	struct ids al = ids_of(idents, "alpha"), be = ids_of(idents, "beta");
	struct ids ga = ids_of(idents, "gamma");
	struct ids mn = ids_of(idents, "MainThread");
	struct pystack_thread *t;
	struct pystack_frame *f;
	struct pystack_var *v;

	CHECK(rc_gil == 0);
	CHECK(exc_after_gil == 0);
	CHECK(g_gil.with_gil == 1);
	CHECK(g_gil.nthreads == 4);

	t = find_thread(&g_gil, al.id);
	CHECK(t != NULL);
	if (t) {
		CHECK_STR(t->name, "alpha");
		CHECK(t->native_id == al.native);
		CHECK(t->daemon == 0);
		CHECK(t->holds_gil == 0);
		CHECK(t->is_main == 0);
		CHECK_STR(t->state, "sleeping");
		CHECK(t->truncated == 0);
		check_frame(t, "leaf_alpha", "alpha");
		check_frame(t, "worker_alpha", "alpha_caller");
		CHECK(find_frame(t, "Event.wait") != NULL);
		f = find_frame(t, "leaf_alpha");
		v = find_local(f, "n");
		CHECK(v && strcmp(v->value, "21") == 0 &&
		      strcmp(v->type, "int") == 0);
		v = find_local(f, "greeting");
		CHECK(v && strcmp(v->value, "'hello'") == 0 &&
		      strcmp(v->type, "str") == 0);
		v = find_local(f, "count");
		CHECK(v && strcmp(v->value, "42") == 0);
	}

	t = find_thread(&g_gil, be.id);
	CHECK(t != NULL);
	if (t) {
		CHECK_STR(t->name, "beta");
		CHECK(t->daemon == 1);
		check_frame(t, "worker_beta", "beta");
		f = find_frame(t, "worker_beta");
		v = find_local(f, "bad");
		CHECK(v != NULL);
		if (v) {
			CHECK_STR(v->value, "<repr failed: ValueError: boom>");
			CHECK_STR(v->type, "Boom");
		}
		v = find_local(f, "huge");
		CHECK(v != NULL);
		if (v) {
			size_t n = strlen(v->value);

			CHECK(n == PYSTACK_REPR_DEFAULT);
			CHECK(strncmp(v->value, "'yyyy", 5) == 0);
			CHECK(strcmp(v->value + n - 3, "...") == 0);
		}
	}

	t = find_thread(&g_gil, ga.id);
	CHECK(t != NULL);
	if (t) {
		CHECK_STR(t->name, "gamma");
		check_frame(t, "Gamma.run", "gamma");
		v = find_local(find_frame(t, "Gamma.run"), "items");
		CHECK(v && strcmp(v->value, "[1, 2, 3]") == 0 &&
		      strcmp(v->type, "list") == 0);
		v = find_local(find_frame(t, "Gamma.run"), "self");
		CHECK(v && strcmp(v->type, "Gamma") == 0);
	}

	t = find_thread(&g_gil, mn.id);
	CHECK(t != NULL);
	if (t) {
		CHECK_STR(t->name, "MainThread");
		CHECK(t->is_main == 1);
		CHECK(t->holds_gil == 1);
		CHECK(t->native_id == (long)getpid());
		CHECK_STR(t->state, "running");
		/* main_probe, the fixture, the PyRun_SimpleString code. */
		CHECK(t->nframes == 3);
		CHECK(t->nframes &&
		      strcmp(t->frames[0].func, "main_probe") == 0);
		CHECK(t->nframes == 3 &&
		      strcmp(t->frames[2].file, "<string>") == 0);
		check_frame(t, "main_probe", "main_gil");
		check_frame(t, "<module>", "main_call");
		v = find_local(find_frame(t, "main_probe"), "marker");
		CHECK(v && strcmp(v->value, "42") == 0);
	}
	for (size_t i = 0; i < g_gil.nthreads; i++)
		CHECK(g_gil.threads[i].holds_gil ==
		      (g_gil.threads[i].thread_id == mn.id));
}

/* A snapshot without the GIL against the one with it. */
static void check_nogil(struct pystack *s, int rc, const char *main_marker)
{
	const char *names[] = {"alpha", "beta", "gamma"};
	struct ids mn = ids_of(idents, "MainThread");
	struct pystack_thread *t;

	CHECK(rc == 0);
	CHECK(s->with_gil == 0);
	CHECK(s->nthreads == 4);
	for (size_t i = 0; i < s->nthreads && i < g_gil.nthreads; i++)
		CHECK(s->threads[i].thread_id == g_gil.threads[i].thread_id);
	for (int i = 0; i < 3; i++) {
		struct ids id = ids_of(idents, names[i]);

		t = find_thread(s, id.id);
		CHECK(t != NULL);
		CHECK(same_stack(t, find_thread(&g_gil, id.id)));
		if (t) {
			CHECK(t->daemon == -1);
			CHECK(t->is_main == 0);
			CHECK(t->holds_gil == 0);
			CHECK(t->frames == NULL || t->frames[0].locals == NULL);
			CHECK_STR(t->state, "sleeping");
			CHECK(t->name != NULL);
		}
	}
	t = find_thread(s, mn.id);
	CHECK(t != NULL);
	if (t) {
		CHECK(t->is_main == 1);
		CHECK(t->native_id == (long)getpid());
		CHECK(t->nframes == 3);
		check_frame(t, "main_probe", main_marker);
		check_frame(t, "<module>", "main_call");
	}
}

static void test_nogil_released(void)
{
	check_nogil(&g_nogil, rc_nogil, "main_nogil");
	CHECK(holder_nogil == 0);
	for (size_t i = 0; i < g_nogil.nthreads; i++)
		CHECK(g_nogil.threads[i].holds_gil == 0);
}

static void test_nogil_while_held(void)
{
	struct ids mn = ids_of(idents, "MainThread");
	struct pystack_thread *t;

	check_nogil(&g_spin, rc_spin, "main_spin");
	CHECK(holder_spin == mn.id);
	CHECK(holder_spin_native == (long)getpid());
	t = find_thread(&g_spin, mn.id);
	CHECK(t && t->holds_gil == 1 && strcmp(t->state, "running") == 0);
}

static void test_nogil_pipe(void)
{
	check_nogil(&g_pipe, rc_pipe, "main_pipe");
}

static void test_agent_thread(void)
{
	struct ids al = ids_of(idents, "alpha");
	struct ids mn = ids_of(idents, "MainThread");
	struct pystack_thread *t;

	/* The agent thread itself (no Python frame) is left out, and the
	 * main thread (in C, GIL released) no longer holds it. */
	CHECK(rc_agent == 0);
	CHECK(g_agent.nthreads == 4);
	for (size_t i = 0; i < g_agent.nthreads; i++)
		CHECK(g_agent.threads[i].holds_gil == 0);
	t = find_thread(&g_agent, mn.id);
	CHECK(t != NULL);
	if (t) {
		check_frame(t, "main_probe", "main_agent");
		CHECK_STR(t->state, "sleeping");
	}
	CHECK(same_stack(find_thread(&g_agent, al.id),
			 find_thread(&g_gil, al.id)));

	CHECK(g_filter.nthreads == 1);
	CHECK(g_filter.nthreads == 1 && g_filter.threads[0].thread_id == al.id);
	CHECK(g_trunc.nthreads == 1);
	if (g_trunc.nthreads == 1) {
		CHECK(g_trunc.threads[0].nframes == 2);
		CHECK(g_trunc.threads[0].truncated == 1);
	}
	CHECK(g_excl.nthreads == 3);
	CHECK(find_thread(&g_excl, al.id) == NULL);
}

static void test_nogil_uninitialised(void)
{
	struct pystack s;

	/* Runs after Py_FinalizeEx. */
	CHECK(pystack_take_nogil(&s, NULL, NULL, 0) == -ENOENT);
	CHECK(s.nthreads == 0 && s.threads == NULL);
	CHECK(pystack_gil_holder(NULL) == 0);
}

static void test_release(void)
{
	struct pystack *all[] = {&g_gil,    &g_nogil, &g_spin, &g_agent,
				 &g_filter, &g_trunc, &g_excl, &g_pipe};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		pystack_release(all[i]);
		CHECK(all[i]->threads == NULL && all[i]->nthreads == 0);
		pystack_release(all[i]);
	}
}

static void test_start(void)
{
	PyImport_AppendInittab("_probe", probe_init);
	Py_Initialize();
	test_run_fixture();
	test_gil_path();
	test_nogil_released();
	test_nogil_while_held();
	test_nogil_pipe();
	test_agent_thread();
	CHECK(Py_FinalizeEx() == 0);
}

TEST_MAIN(test_start, test_nogil_uninitialised, test_release)
