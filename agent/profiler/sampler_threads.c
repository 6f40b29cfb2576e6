/*
 * sampler_threads: the threads the sampler knows and what it learns of
 * each at a tick (its state from /proc, its CPU clock).  Part of the
 * sampler (sampler_impl.h); sampler thread only.
 *
 * Descriptors (issue 27 item 3).  Each thread's /proc/self/task/TID/
 * syscall is kept open while a run lasts (one pread a tick) and closed
 * when it ends (sampler_threads_close), never for the life of the
 * process.  It is opened with fdown_open_take_high: at FDOWN_MIN or
 * above and short of the limit's last FDOWN_SPARE numbers, or not at all
 * (a program with 2,000 threads under `ulimit -n 1024` keeps its own
 * numbers).  A thread without its file has its state guessed from its
 * CPU time, and is never signalled for its native stack (the guess
 * cannot tell a thread blocked in a system call); the run's status says
 * how many.
 */
#include "sampler_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fdown.h"

static struct thr *thr; /* SAMPLER_THREADS_MAX */
static size_t nthr;
static struct sampler_map thr_map; /* thread_id + 1 -> index */
static uintptr_t gil_lo, gil_hi;   /* the GIL's futexes */
static uint64_t refused;	   /* files not opened, this run */

int sampler_threads_init(void)
{
	thr = calloc(SAMPLER_THREADS_MAX, sizeof(*thr));
	if (!thr)
		return -ENOMEM;
	cpython.read.gil_range(&gil_lo, &gil_hi);
	return 0;
}

void sampler_threads_atfork_child(void)
{
	for (size_t i = 0; i < nthr; i++)
		fdown_close(&thr[i].syscall_file); /* the parent's threads' */
	nthr = 0;
	memset(&thr_map, 0, sizeof(thr_map));
}

void sampler_threads_untrust(void)
{
	for (size_t i = 0; i < nthr; i++)
		thr[i].tn = 0;
}

void sampler_threads_unwant(void)
{
	for (size_t i = 0; i < nthr; i++)
		thr[i].nwant = 0;
}

static struct thr *thr_get(const struct cpython_thread *pt)
{
	struct thr *t;
	uint32_t idx;

	if (sampler_map_get(&thr_map, pt->thread_id + 1, &idx) == 0) {
		t = &thr[idx];
		if (t->native_id == pt->native_id)
			return t;
		/* Same ident, another kernel thread: start over. */
		fdown_close(&t->syscall_file);
	} else {
		if (nthr >= SAMPLER_THREADS_MAX ||
		    sampler_map_put(&thr_map, pt->thread_id + 1,
				    (uint32_t)nthr) < 0)
			return NULL;
		t = &thr[nthr++];
		t->frames = t->nodes = NULL;
	}
	t->thread_id = pt->thread_id;
	t->native_id = pt->native_id;
	t->cpu_ns = -1;
	t->depth = 0;
	t->tn = 0;
	t->nwant = 0; /* an earlier thread's wants are dropped unbound */
	t->syscall_file.fd = -1;
	t->file_tried = 0;
	if (!t->frames) {
		t->frames = malloc(PATH_MAX_FRAMES * sizeof(*t->frames));
		t->nodes = malloc(PATH_MAX_FRAMES * sizeof(*t->nodes));
	}
	if (!t->tframes) {
		t->tframes = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tframes));
		t->tcodes = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tcodes));
		t->tlasti = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tlasti));
		t->tfid = malloc(PYSTACK_DEPTH_MAX * sizeof(*t->tfid));
		if (!t->tframes || !t->tcodes || !t->tlasti || !t->tfid) {
			free(t->tframes);
			free(t->tcodes);
			free(t->tlasti);
			free(t->tfid);
			t->tframes = t->tcodes = NULL;
			t->tlasti = NULL;
			t->tfid = NULL;
		}
	}
	return t;
}

/* t's /proc file, opened once a run (when it can be without taking a
 * number of the program's). */
static void open_file(struct thr *t)
{
	char path[64];

	if (t->file_tried || t->native_id <= 0)
		return;
	t->file_tried = 1;
	snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall",
		 t->native_id);
	if (fdown_open_take_high(&t->syscall_file, path, O_RDONLY, 0) ==
	    -EMFILE)
		refused++;
}

void sampler_threads_close(void)
{
	for (size_t i = 0; i < nthr; i++) {
		fdown_close(&thr[i].syscall_file);
		thr[i].file_tried = 0;
	}
	refused = 0;
}

uint64_t sampler_threads_refused(void)
{
	return refused;
}

static int64_t thread_cpu_ns(long tid)
{
	/* The kernel's per-thread CPU clock of any thread of ours, as
	 * pthread_getcpuclockid() builds it: ~tid << 3 | PERTHREAD | SCHED. */
	clockid_t id = (clockid_t)((~(unsigned)tid << 3) | 6);
	struct timespec ts;

	if (tid <= 0 || clock_gettime(id, &ts) < 0)
		return -1;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* running, gil_wait or idle, from the thread's current system call
 * (*nr, -1 none): "running" when it is on a CPU, and when it is off one
 * but in no system call ("-1 sp pc": preempted, or faulting in a page);
 * -1 when unknown. */
static int syscall_state(struct thr *t, int *sys_nr)
{
	char buf[160], *end;
	ssize_t n;
	long nr;
	unsigned long long arg0;

	if (t->syscall_file.fd < 0)
		return -1;
	/* pread: a number the program took over is read without moving
	 * its offset, and a pipe or socket there refuses (ESPIPE). */
	n = pread(t->syscall_file.fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (!strncmp(buf, "running", 7))
		return SAMPLER_RUNNING;
	nr = strtol(buf, &end, 10);
	if (end == buf)
		return -1;
	if (nr < 0)
		return SAMPLER_RUNNING;
	*sys_nr = (int)nr;
	if (nr == SYS_futex && *end == ' ') {
		arg0 = strtoull(end + 1, NULL, 16);
		if (arg0 >= gil_lo && arg0 < gil_hi)
			return SAMPLER_GIL_WAIT;
	}
	return SAMPLER_IDLE;
}

int sampler_threads_running(struct thr *t)
{
	int nr = -1;

	return syscall_state(t, &nr) == SAMPLER_RUNNING;
}

int sampler_threads_begin(struct tick *tk, const struct cpython_thread *pt,
			  uintptr_t gil_ts, double now, struct want *w)
{
	struct thr *t = thr_get(pt);
	int64_t cpu;
	int state, sys_nr = -1, known;

	if (!t)
		return 1;
	t->seen = tk->n;
	open_file(t);
	if (t->nwant)
		sampler_join_bind(pt, t);
	cpu = thread_cpu_ns(pt->native_id);
	state = syscall_state(t, &sys_nr);
	known = state >= 0;
	if (state < 0) /* no /proc answer: on CPU if it used the CPU */
		state = cpu >= 0 && t->cpu_ns >= 0 &&
					cpu - t->cpu_ns >
						250000000LL / tk->o->hz
				? SAMPLER_RUNNING
				: SAMPLER_IDLE;
	memset(w, 0, sizeof(*w));
	w->pt = pt;
	w->t = t;
	w->native_id = pt->native_id;
	w->ts = now;
	w->tick = tk->n;
	w->cpu_us = cpu >= 0 && t->cpu_ns >= 0 ? (cpu - t->cpu_ns) / 1000 : -1;
	t->cpu_ns = cpu;
	w->state = (uint8_t)state;
	w->known = (uint8_t)known;
	w->sys_nr = state == SAMPLER_RUNNING ? -1 : sys_nr;
	w->gil = gil_ts && gil_ts == pt->tstate;
	return !tk->o->idle && state != SAMPLER_RUNNING;
}

void sampler_threads_prune(uint64_t n)
{
	size_t keep = 0;

	for (size_t i = 0; i < nthr; i++) {
		struct thr *t = &thr[i];

		if (t->seen == n) {
			if (keep != i) {
				struct thr tmp = thr[keep];

				thr[keep] = *t;
				*t = tmp; /* keeps the arrays owned */
			}
			keep++;
			continue;
		}
		fdown_close(&t->syscall_file);
	}
	if (keep == nthr)
		return;
	nthr = keep;
	sampler_map_release(&thr_map);
	for (size_t i = 0; i < nthr; i++)
		sampler_map_put(&thr_map, thr[i].thread_id + 1, (uint32_t)i);
}
