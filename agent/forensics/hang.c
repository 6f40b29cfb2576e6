/*
 * hang: the watchdog thread and process.hangs.  See hang.h.
 */
#include "hang.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "fdown.h"
#include "core/log.h"
#include "core/record.h"
#include "core/thread.h"
#include "cpython/cpython.h"
#include "crash.h"
#include "crash_report.h"
#include "debugger/debugger.h"
#include "hang_native.h"
#include "python/pygil.h"
#include "python/pystack.h"
#include "recorder.h"
#include "store.h"

#define PERIOD_MIN_MS 50
#define PERIOD_MAX_MS 1000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static pthread_t thread;
static int running, exited, stop, listening;
static int64_t timeout_ms; /* as the settings say; 0: off */

static struct store *store;
static struct recorder *rec;
static struct store_stmt *resume_stmt, *progress_stmt;

/* The watchdog's own state (its thread only). */
static struct {
	struct cpython_thread *threads;
	struct cpython_frame *frames;
	uintptr_t codes[HANG_FRAMES_MAX];
	int lines[HANG_FRAMES_MAX];
	size_t n;
	int have;	  /* codes/lines hold a stack */
	int changed;	  /* it replaced another: its start is known */
	int64_t last_ms;  /* when we last looked (monotonic) */
	int64_t stuck_ms; /* how long the stack has been the same */
	int64_t hang_id;  /* the hang recorded, 0 when none */
	int64_t next_id;
	int said_off;	     /* the reader's being off was logged */
	double hang_started; /* Unix seconds */
	char path[PATH_MAX]; /* its report file, "" when none */
	char *report;	     /* HANG_REPORT_MAX bytes */
	struct crash_sym_cache sym;
} W;

static double real_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the setting --------------------------------------------------------- */

int hang_timeout_parse(const char *text, int64_t *ms)
{
	char *end;
	double v;
	double unit = 1000;

	*ms = 0;
	while (isspace((unsigned char)*text))
		text++;
	if (!*text || !strcasecmp(text, "off") || !strcmp(text, "0"))
		return 0;
	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || !(v > 0))
		return -EINVAL;
	if (!strcmp(end, "ms"))
		unit = 1;
	else if (!strcmp(end, "s") || !*end)
		unit = 1000;
	else if (!strcmp(end, "m") || !strcmp(end, "min"))
		unit = 60000;
	else if (!strcmp(end, "h"))
		unit = 3600000;
	else
		return -EINVAL;
	v *= unit;
	if (v < 1 || v > 30.0 * 86400000)
		return -EINVAL;
	*ms = (int64_t)v;
	return 0;
}

int hang_timeout_canon(const char *text, char *canon, size_t canonlen,
		       char *err, size_t errlen)
{
	int64_t ms;

	if (hang_timeout_parse(text, &ms)) {
		snprintf(err, errlen,
			 "hang.timeout: '%s' is not a duration (300s, 5m, "
			 "1500ms, 1h; off) of at most 30 days",
			 text);
		return -EINVAL;
	}
	if (ms && cpython.read.off_reason()) {
		snprintf(err, errlen,
			 "hang.timeout: the watchdog reads the main thread's "
			 "stack without the GIL, and %s",
			 cpython.read.off_reason());
		return -ENOTSUP;
	}
	if (!ms)
		snprintf(canon, canonlen, "off");
	else if (ms % 1000)
		snprintf(canon, canonlen, "%lldms", (long long)ms);
	else
		snprintf(canon, canonlen, "%llds", (long long)(ms / 1000));
	return 0;
}

/* ---- the report ---------------------------------------------------------- */

static void write_thread(struct crash_out *o, const struct pystack_thread *t,
			 const char *flags, int native)
{
	uintptr_t ips[HANG_NATIVE_DEPTH_MAX];
	size_t n = 0;
	int rc;

	crash_report_thread(o, t->native_id, t->thread_id, t->name, flags);
	crash_report_python(o, NULL);
	for (size_t i = 0; i < t->nframes; i++)
		crash_report_frame(o, t->frames[i].func, t->frames[i].file,
				   t->frames[i].lineno);
	if (!t->nframes)
		crash_report_note(o, !strcmp(t->state, "unknown")
					     ? "frames changed while read"
					     : "no Python frames");
	if (t->truncated)
		crash_report_note(o, "more frames not shown");
	if (native) {
		rc = hang_native_capture(t->native_id, ips,
					 HANG_NATIVE_DEPTH_MAX, &n);
		if (rc == 0) {
			crash_report_native(o, &W.sym, ips, n, 0,
					    n == HANG_NATIVE_DEPTH_MAX);
		} else {
			crash_out_str(o,
				      "  native (most recent call first):\n");
			crash_report_note(o,
					  rc == -ETIMEDOUT
						  ? "the thread did not answer "
						    "(it blocks signals)"
						  : "not available");
		}
	}
	crash_report_thread_end(o);
}

/* Writes the report of the hang of main (a thread of ps) into W.report;
 * returns its length. */
static size_t write_report(const struct pystack *ps,
			   const struct pystack_thread *main, int64_t stuck_ms)
{
	struct crash_out o;
	char reason[160], when[13 + 32];
	int native = config_bool("hang.native");

	crash_out_init(&o);
	crash_out_mem(&o, W.report, HANG_REPORT_MAX);
	snprintf(reason, sizeof(reason),
		 "the main thread's Python stack has not changed for %s%.1f s",
		 W.changed ? "" : "at least ", (double)stuck_ms / 1000);
	crash_report_head(&o, "hang", reason);
	if (record_dir()[0])
		crash_report_key(&o, "recording", record_dir());
	crash_time_format(
		(int64_t)W.hang_started,
		(int)((W.hang_started - (double)(int64_t)W.hang_started) *
		      1000),
		when + 13);
	/* Stuck already when the watchdog first looked: no earlier stack
	 * was seen, so it began then or before. */
	memcpy(when, "at or before ", 13);
	crash_report_key(&o, "stuck-since", W.changed ? when + 13 : when);
	crash_report_key_int(&o, "stuck-ms", stuck_ms);
	crash_report_key_int(&o, "thread", main ? main->native_id : 0);
	crash_report_body(&o);
	crash_sym_begin(&W.sym);
	if (main)
		write_thread(&o, main, "stuck main", native);
	for (size_t i = 0; i < ps->nthreads; i++) {
		const struct pystack_thread *t = &ps->threads[i];

		if (t == main || pygil_is_own_thread(t->native_id))
			continue;
		write_thread(&o, t, "", native);
	}
	crash_sym_end(&W.sym);
	crash_report_end(&o);
	return o.memlen;
}

static void record(int64_t stuck_ms)
{
	struct pystack_opts opts = {.max_depth = HANG_FRAMES_MAX};
	struct pystack ps;
	const struct pystack_thread *main = NULL;
	struct store_stmt *s = recorder_stmt(rec);
	char err[256];
	double now = real_s();
	struct fdown f;
	size_t len;
	int fd;

	W.hang_started = now - (double)stuck_ms / 1000;
	if (pystack_take_nogil(&ps, &opts, err, sizeof(err)))
		return; /* Python is going away: tried again next time */
	W.hang_id = ++W.next_id;
	for (size_t i = 0; i < ps.nthreads; i++)
		if (ps.threads[i].is_main)
			main = &ps.threads[i];
	/* Written whole into memory, then into the file while its number
	 * is still ours (the report takes a while: the program may close
	 * and reuse it meanwhile). */
	len = write_report(&ps, main, stuck_ms);
	fd = crash_report_open("hang", W.path, sizeof(W.path));
	if (fd < 0 || fdown_adopt(&f, fd)) {
		W.path[0] = '\0';
	} else {
		if (!fdown_ours(&f) || write(f.fd, W.report, len) != (ssize_t)len)
			W.path[0] = '\0';
		fdown_close(&f);
	}
	if (main && main->nframes)
		log_warn("hang: the main thread has been stuck for %.0f s in "
			 "%s (%s:%d); %s%s",
			 (double)stuck_ms / 1000, main->frames[0].func,
			 main->frames[0].file, main->frames[0].lineno,
			 W.path[0] ? "report written to " : "no report file",
			 W.path);
	else
		log_warn("hang: the main thread has been stuck for %.0f s; "
			 "%s%s",
			 (double)stuck_ms / 1000,
			 W.path[0] ? "report written to " : "no report file",
			 W.path);
	recorder_limits(rec, (size_t)config_int("hang.max_rows"),
			(size_t)HANG_REPORT_MAX * 64);
	if (recorder_begin(rec, err, sizeof(err)) == 0) {
		store_stmt_int(s, 1, W.hang_id);
		store_stmt_real(s, 2, W.hang_started);
		store_stmt_real(s, 3, now);
		store_stmt_real(s, 5, (double)stuck_ms / 1000);
		store_stmt_int(s, 13, W.changed);
		store_stmt_real(s, 14, now); /* ts: when it was seen */
		if (main) {
			store_stmt_int(s, 6, (int64_t)main->thread_id);
			store_stmt_int(s, 7, main->native_id);
		}
		if (main && main->nframes) {
			store_stmt_text(s, 8, main->frames[0].func);
			store_stmt_text(s, 9, main->frames[0].file);
			store_stmt_int(s, 10, main->frames[0].lineno);
		}
		if (W.path[0])
			store_stmt_text(s, 11, W.path);
		store_stmt_text(s, 12, W.report);
		if (recorder_add(rec, 200 + strlen(W.report), err, sizeof(err)))
			recorder_rollback(rec);
		else if (recorder_commit(rec, err, sizeof(err)))
			log_warn("hang: %s", err);
	}
	pystack_release(&ps);
}

/* Runs a bound UPDATE of the hang's row in a transaction of its own. */
static void update(struct store_stmt *s)
{
	char err[256];

	if (store_begin(store, err, sizeof(err)) == 0) {
		if (store_stmt_run(s, err, sizeof(err)))
			store_rollback(store);
		else
			store_commit(store, err, sizeof(err));
	}
}

/* The hang is over: its row and its file say when. */
static void resumed(int64_t stuck_ms)
{
	char line[128], when[32];
	double now = real_s();
	struct fdown f;

	crash_time_format((int64_t)now,
			  (int)((now - (double)(int64_t)now) * 1000), when);
	snprintf(line, sizeof(line), "resumed: %s after %.1f s\n", when,
		 (double)stuck_ms / 1000);
	if (W.path[0] &&
	    fdown_open_take(&f, W.path, O_WRONLY | O_APPEND, 0) == 0) {
		if (write(f.fd, line, strlen(line)) < 0) {
			/* the row still says it */
		}
		fdown_close(&f);
	}
	store_stmt_real(resume_stmt, 1, now);
	store_stmt_real(resume_stmt, 2, (double)stuck_ms / 1000);
	store_stmt_text(resume_stmt, 3, line);
	store_stmt_int(resume_stmt, 4, W.hang_id);
	update(resume_stmt);
	log_warn("hang: the main thread moves again after %.0f s",
		 (double)stuck_ms / 1000);
	W.hang_id = 0;
}

/* The hang goes on: its row says for how long so far. */
static void progress(int64_t stuck_ms)
{
	store_stmt_real(progress_stmt, 1, (double)stuck_ms / 1000);
	store_stmt_int(progress_stmt, 2, W.hang_id);
	update(progress_stmt);
}

/* ---- the watchdog -------------------------------------------------------- */

static void forget(void)
{
	W.have = 0;
	W.changed = 0;
	W.stuck_ms = 0;
}

static void look(int64_t timeout, int64_t period)
{
	const struct cpython_thread *main = NULL;
	uint64_t main_id = cpython.read.main_thread();
	int64_t now = agent_now_ms(), gap = now - W.last_ms;
	size_t nt = 0, n = 0;
	int trunc = 0, same;

	W.last_ms = now;
	if (cpython.read.threads(W.threads, PYSTACK_THREADS_MAX, &nt, NULL,
				 0)) {
		if (cpython.read.off_reason() && !W.said_off) {
			/* Set before the start-up check turned the reader
			 * off: said once. */
			log_warn("hang: the watchdog is idle: %s",
				 cpython.read.off_reason());
			W.said_off = 1;
		}
		forget();
		return;
	}
	for (size_t i = 0; i < nt; i++)
		if (W.threads[i].thread_id == main_id)
			main = &W.threads[i];
	if (!main || debugger_is_paused(main->native_id) ||
	    cpython.read.walk(main, W.frames, HANG_FRAMES_MAX, &n, &trunc, NULL,
			      0)) {
		/* No main thread, held by the debugger, or moving so fast
		 * that its frames changed while read: not stuck. */
		if (W.hang_id)
			resumed(W.stuck_ms);
		forget();
		return;
	}
	same = W.have && W.n == n;
	for (size_t i = 0; same && i < n; i++)
		same = W.codes[i] == W.frames[i].code &&
		       W.lines[i] == W.frames[i].lineno;
	if (!same) {
		if (W.hang_id)
			resumed(W.stuck_ms);
		for (size_t i = 0; i < n; i++) {
			W.codes[i] = W.frames[i].code;
			W.lines[i] = W.frames[i].lineno;
		}
		W.n = n;
		/* The first stack seen may have been there long before. */
		W.changed = W.have;
		W.have = 1;
		W.stuck_ms = 0;
		return;
	}
	/* Time we did not run (the process stopped) does not count. */
	W.stuck_ms += gap < 2 * period ? gap : 2 * period;
	if (!W.hang_id && W.stuck_ms >= timeout)
		record(W.stuck_ms);
	else if (W.hang_id)
		progress(W.stuck_ms);
}

static void *watchdog(void *arg)
{
	(void)arg;
	W.last_ms = agent_now_ms();
	forget();
	pthread_mutex_lock(&lock);
	while (!stop && timeout_ms > 0) {
		int64_t t = timeout_ms, period = t / 10, next;
		struct timespec dl;

		if (period < PERIOD_MIN_MS)
			period = PERIOD_MIN_MS;
		if (period > PERIOD_MAX_MS)
			period = PERIOD_MAX_MS;
		pthread_mutex_unlock(&lock);
		look(t, period);
		pthread_mutex_lock(&lock);
		next = agent_now_ms() + period;
		dl.tv_sec = (time_t)(next / 1000);
		dl.tv_nsec = (long)(next % 1000) * 1000000L;
		while (!stop && timeout_ms == t && agent_now_ms() < next)
			if (pthread_cond_timedwait(&cond, &lock, &dl) ==
			    ETIMEDOUT)
				break;
	}
	running = 0;
	exited = 1;
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Starts or stops the thread as the settings say.  Quick: called by the
 * settings listener, on whatever thread set them. */
static void apply(void)
{
	char text[CONFIG_VALUE_MAX];
	int64_t ms = 0;

	if (config_get("hang.timeout", text, sizeof(text)) == 0)
		hang_timeout_parse(text, &ms);
	pthread_mutex_lock(&lock);
	timeout_ms = ms;
	pthread_cond_broadcast(&cond);
	if (ms > 0 && !running && !stop && store) {
		if (exited) {
			pthread_join(thread, NULL);
			exited = 0;
		}
		if (agent_thread_start(&thread, "probing-hang", watchdog,
				       NULL) == 0)
			running = 1;
		else
			log_warn("hang: cannot start the watchdog thread");
	}
	pthread_mutex_unlock(&lock);
}

static void on_change(const char *name)
{
	(void)name;
	apply();
}

int hang_start(struct store *st, char *err, size_t errlen)
{
	static const struct recorder_opts o = {
		.schema = "process",
		.name = "hangs",
		.columns = "id INTEGER, started REAL, detected REAL, "
			   "resumed REAL, seconds REAL, thread_id INTEGER, "
			   "native_id INTEGER, func TEXT, file TEXT, "
			   "lineno INTEGER, path TEXT, report TEXT, "
			   "started_known INTEGER, ts REAL",
		.doc = "hangs of the main thread seen by the watchdog "
		       "(hang.timeout), with every thread's stacks",
		.max_rows = 1000,
		.max_bytes = (size_t)HANG_REPORT_MAX * 64,
	};
	pthread_condattr_t ca;
	int rc;

	if (!W.threads) {
		W.threads = malloc(PYSTACK_THREADS_MAX * sizeof(*W.threads));
		W.frames = malloc(HANG_FRAMES_MAX * sizeof(*W.frames));
		W.report = malloc(HANG_REPORT_MAX);
		if (!W.threads || !W.frames || !W.report) {
			snprintf(err, errlen, "hang: out of memory");
			return -ENOMEM;
		}
	}
	if (!rec) {
		rc = recorder_new(st, &o, &rec, err, errlen);
		if (rc)
			return rc;
		rc = store_stmt_new(st,
				    "UPDATE process.hangs SET resumed = ?1, "
				    "seconds = ?2, report = report || ?3 "
				    "WHERE id = ?4",
				    &resume_stmt, err, errlen);
		if (rc)
			return rc;
		rc = store_stmt_new(st,
				    "UPDATE process.hangs SET seconds = ?1 "
				    "WHERE id = ?2 AND resumed IS NULL",
				    &progress_stmt, err, errlen);
		if (rc)
			return rc;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	store = st;
	if (!listening && config_on_change("hang.", on_change)) {
		snprintf(err, errlen, "hang: no room for a settings listener");
		return -ENOSPC;
	}
	listening = 1;
	apply();
	return 0;
}

void hang_stop(void)
{
	pthread_mutex_lock(&lock);
	stop = 1;
	pthread_cond_broadcast(&cond);
	if (!running && !exited) {
		pthread_mutex_unlock(&lock);
		return;
	}
	pthread_mutex_unlock(&lock);
	agent_thread_join(thread, 1000); /* joined, or detached: gone */
	pthread_mutex_lock(&lock);
	running = exited = 0;
	pthread_mutex_unlock(&lock);
}

void hang_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	running = exited = 0;
	stop = 0;
	/* The parent's store (leaked in the child, as agent.c does): a
	 * child's agent makes its own. */
	store = NULL;
	rec = NULL;
	resume_stmt = progress_stmt = NULL;
	W.hang_id = 0;
	forget();
}
