/*
 * Stacks taken over and over while Python threads call, return, raise,
 * yield, and start and end threads (fixture_stress.py): walks without the
 * GIL from a pthread (some through the pipe fallback), and walks with it,
 * locals included, from the main thread in between.  Nothing may crash and
 * every answer must be well formed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cpython/pyframes.h"
#include "python/pystack.h"
#include "test.h"

#define FIXTURE FIXTURE_DIR "/fixture_stress.py"
#define NOGIL_WALKS 2000
#define GIL_WALKS 200

static atomic_int walker_done;
static int walks_ok, walks_failed, saw_rec, malformed, holders, unread;

/* Every string set, every line plausible, every count within caps. */
static int well_formed(const struct pystack *s)
{
	if (s->nthreads > PYSTACK_THREADS_MAX)
		return 0;
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct pystack_thread *t = &s->threads[i];

		if (!t->name || t->nframes > PYSTACK_DEPTH_MAX ||
		    !t->state[0]) {
			fprintf(stderr, "bad thread: %s %zu %s\n",
				t->name ? t->name : "(null)", t->nframes,
				t->state);
			return 0;
		}
		for (size_t j = 0; j < t->nframes; j++) {
			const struct pystack_frame *f = &t->frames[j];

			if (!f->func || !f->file || f->lineno < -1) {
				fprintf(stderr, "bad frame: %s %s:%d\n",
					f->func ? f->func : "(null)",
					f->file ? f->file : "(null)",
					f->lineno);
				return 0;
			}
			if (f->nlocals > PYSTACK_LOCALS_MAX)
				return 0;
			for (size_t k = 0; k < f->nlocals; k++)
				if (!f->locals[k].name || !f->locals[k].type ||
				    !f->locals[k].value)
					return 0;
		}
	}
	return 1;
}

static int has_func(const struct pystack *s, const char *func)
{
	for (size_t i = 0; i < s->nthreads; i++)
		for (size_t j = 0; j < s->threads[i].nframes; j++)
			if (strcmp(s->threads[i].frames[j].func, func) == 0)
				return 1;
	return 0;
}

static void *walker(void *arg)
{
	(void)arg;
	for (int i = 0; i < NOGIL_WALKS; i++) {
		struct pystack s;
		char err[128];
		long nid;
		int rc;

		pyframes_force_pipe(i % 10 == 9);
		rc = pystack_take_nogil(&s, NULL, err, sizeof(err));
		if (rc == 0) {
			walks_ok++;
			if (!well_formed(&s))
				malformed++;
			if (has_func(&s, "rec"))
				saw_rec++;
			for (size_t k = 0; k < s.nthreads; k++)
				unread +=
					!strcmp(s.threads[k].state, "unknown");
			pystack_release(&s);
		} else {
			walks_failed++;
		}
		if (pystack_gil_holder(&nid))
			holders++;
	}
	pyframes_force_pipe(0);
	atomic_store(&walker_done, 1);
	return NULL;
}

static void test_stress(void)
{
	char code[512];
	pthread_t th;
	int gil_ok = 0, gil_bad = 0, exc = 0;

	Py_Initialize();
	snprintf(code, sizeof(code),
		 "exec(compile(open('%s').read(), '%s', "
		 "'exec'))",
		 FIXTURE, FIXTURE);
	CHECK(PyRun_SimpleString(code) == 0);
	CHECK(pthread_create(&th, NULL, walker, NULL) == 0);
	/* Walk with the GIL meanwhile, letting the threads run between. */
	for (int i = 0; i < GIL_WALKS || !atomic_load(&walker_done); i++) {
		struct pystack_opts o = {.locals = 1, .repr_max = 64};
		struct pystack s;
		char err[128];

		if (i < GIL_WALKS) {
			if (pystack_take_gil(&s, &o, err, sizeof(err)) == 0) {
				gil_ok++;
				gil_bad += !well_formed(&s);
				pystack_release(&s);
			}
			exc += PyErr_Occurred() != NULL;
		}
		Py_BEGIN_ALLOW_THREADS usleep(1000);
		Py_END_ALLOW_THREADS
	}
	pthread_join(th, NULL);
	CHECK(PyRun_SimpleString("stop.set()\n"
				 "for w in workers: w.join()\n") == 0);
	printf("nogil walks: %d ok, %d failed, %d saw rec, %d threads "
	       "unread, %d holder readings; gil walks: %d\n",
	       walks_ok, walks_failed, saw_rec, unread, holders, gil_ok);
	CHECK(walks_ok == NOGIL_WALKS);
	CHECK(malformed == 0);
	CHECK(saw_rec > NOGIL_WALKS / 2);
	CHECK(gil_ok == GIL_WALKS);
	CHECK(gil_bad == 0);
	CHECK(exc == 0);
	CHECK(Py_FinalizeEx() == 0);
}

TEST_MAIN(test_stress)
