/*
 * comm: settings, tables and the installation of the torch.distributed
 * recording.  See comm.h; the wrappers are in comm_wrap.c, the records in
 * comm_log.c.
 */
#include "comm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_ddp.h"
#include "comm_fr.h"
#include "comm_log.h"
#include "comm_wrap.h"
#include "core/config.h"
#include "core/log.h"
#include "core/record.h"
#include "livetab.h"
#include "memory/memory.h"
#include "python/gilcall.h"
#include "python/pyafter.h"
#include "python/pygil.h"
#include "python/pymods.h"
#include "recording.h"
#include "store.h"

#define WAIT_FAST_MS 100  /* waiting for torch.distributed: poll this often */
#define WAIT_SLOW_MS 1000 /* ... and after WAIT_FAST_FOR ms, this often */
#define WAIT_FAST_FOR 10000
#define STATUS_MS 1000 /* installed: refresh comm.status this often */
#define RAN_WAIT_MS 2000     /* ran(): a tick's install waited for, at most */
#define RAN_WAIT_STEP_MS 10
#define READ_TRIES 8   /* a record being written: read it again */

static struct comm_log log_;
static _Atomic int log_ready;
static _Atomic int changed;
static int installed, waiting, waited_ms, listening;
static int ddp_waiting; /* recording, DDP's module not imported yet */
/* Recording, the functional collectives' module not imported yet (torch
 * 2.x): looked for at each tick (STATUS_MS) for FUNCOL_FAST_TICKS ticks,
 * then every FUNCOL_SLOW_TICKS-th (each look takes the GIL; a program
 * that never imports it, plain DDP, pays one a minute). */
static int funcol_waiting;
static unsigned funcol_ticks;
#define FUNCOL_FAST_TICKS 60
#define FUNCOL_SLOW_TICKS 60
static char error_text[200];
/* Calls below it are on disk as they ended (the recording thread's);
 * feed_before: its value before the flush in progress. */
static uint64_t feed_next, feed_before;

static const char *const state_names[] = {"running", "done", "failed"};

static void on_change(const char *name)
{
	(void)name;
	atomic_store(&changed, 1);
	memory_wake();
}

int comm_pending(void)
{
	return atomic_load(&changed);
}

/* ---- the table --------------------------------------------------------- */

static int read_rec(uint64_t id, struct comm_rec *r)
{
	int rc = -EAGAIN;

	for (int i = 0; i < READ_TRIES && rc == -EAGAIN; i++)
		rc = comm_log_read(&log_, id, r);
	return rc;
}

/* The columns after id, of the live table and of the recorded one. */
#define COLUMNS_AFTER_ID                                                       \
	"ts REAL, rank INTEGER, pg TEXT, pg_ranks TEXT, op TEXT, seq "         \
	"INTEGER, "                                                            \
	"pg_seq INTEGER, shape TEXT, dtype TEXT, bytes INTEGER, async "        \
	"INTEGER, peer INTEGER, state TEXT, duration REAL, waited REAL, "      \
	"thread_id INTEGER, error TEXT, native_id INTEGER"

/* Where a row's values go: the live table's rows, or the recording's. */
struct sink {
	int (*num)(void *to, int64_t v);
	int (*real)(void *to, double v);
	int (*text)(void *to, const char *v); /* NULL: SQL NULL */
	int (*null)(void *to);
	void *to;
};

/* The columns of comm_tab (and of the recorded table), in order. */
static int put_row(const struct sink *k, const struct comm_rec *r, double now)
{
	const struct comm_group *g = comm_log_group_at(&log_, r->group);
	int rank = r->rank >= 0 ? r->rank : comm_wrap_rank();
	int ended = r->state != COMM_RUNNING;
	int rc;

#define V(x)                                                                   \
	do {                                                                   \
		if ((rc = (x)))                                                \
			return rc;                                             \
	} while (0)
#define NUM_OR_NULL(c, v) ((c) ? k->num(k->to, (v)) : k->null(k->to))
	V(k->num(k->to, (int64_t)r->id));
	V(k->real(k->to, r->ts));
	V(NUM_OR_NULL(rank >= 0, rank));
	V(k->text(k->to, g ? g->name : NULL));
	V(k->text(k->to, g ? g->ranks : NULL));
	V(k->text(k->to, comm_wrap_op_name(r->op)));
	V(NUM_OR_NULL(r->seq > 0, r->seq));
	V(NUM_OR_NULL(r->pg_seq > 0, r->pg_seq));
	V(k->text(k->to, r->shape[0] ? r->shape : NULL));
	V(k->text(k->to, r->dtype[0] ? r->dtype : NULL));
	V(NUM_OR_NULL(r->bytes >= 0, r->bytes));
	V(k->num(k->to, r->async));
	V(NUM_OR_NULL(r->peer >= 0, r->peer));
	V(k->text(k->to, r->state >= 0 && r->state <= COMM_FAILED
				 ? state_names[r->state]
				 : "?"));
	V(ended && r->t1 > 0 ? k->real(k->to, r->t1 - r->t0) : k->null(k->to));
	V(!ended ? k->real(k->to, now - r->t0) : k->null(k->to));
	V(k->num(k->to, r->thread));
	V(k->text(k->to, r->error[0] ? r->error : NULL));
	V(NUM_OR_NULL(r->native > 0, r->native));
#undef NUM_OR_NULL
#undef V
	return 0;
}

static int lt_num(void *to, int64_t v)
{
	return livetab_rows_int(to, v);
}

static int lt_real(void *to, double v)
{
	return livetab_rows_real(to, v);
}

static int lt_text(void *to, const char *v)
{
	return livetab_rows_text(to, v);
}

static int lt_null(void *to)
{
	return livetab_rows_null(to);
}

static int add_row(struct livetab_rows *rows, const struct comm_rec *r,
		   double now)
{
	const struct sink k = {lt_num, lt_real, lt_text, lt_null, rows};
	int rc = livetab_rows_begin(rows);

	return rc ? rc : put_row(&k, r, now);
}

static int comm_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			 size_t errlen)
{
	uint64_t first, end;
	struct comm_rec r;
	double now = comm_log_clock();
	int rc = 0;

	(void)ctx;
	if (!atomic_load(&log_ready))
		return 0;
	comm_log_span(&log_, &first, &end);
	for (uint64_t id = first; id < end && !rc; id++)
		if (read_rec(id, &r) == 0)
			rc = add_row(rows, &r, now);
	if (rc)
		snprintf(err, errlen, "python.comm_collective: %s",
			 rc == -E2BIG ? "too many rows" : "out of memory");
	return rc;
}

static const struct livetab comm_tab = {
	.schema = "python",
	.name = "comm_collective",
	.doc = "torch.distributed collectives and point-to-point calls, "
	       "from their start (state running/done/failed; seconds)",
	.columns = "id INTEGER, " COLUMNS_AFTER_ID,
	.snapshot = comm_snapshot,
};

/* ---- python.comm_groups: torch's own count per group --------------------
 *
 * A rank that skipped a collective and went on into one made in C++
 * (DDP's broadcast of its buffers) has no record of it: its last
 * recorded call is behind the others' while it is ahead.  torch numbers
 * every call it starts on a group, whichever language made it; that
 * number, read now (with the GIL: a GIL thread's job), tells them apart.
 * The groups are those the recorded calls named.
 */

struct groups_call {
	struct gilcall c; /* first */
	size_t n;
	const char *names[COMM_GROUPS_MAX];
	int64_t last[COMM_GROUPS_MAX];
};

static void groups_run(struct gilcall *c)
{
	struct groups_call *g = (struct groups_call *)c;

	comm_wrap_torch_last(g->names, g->n, g->last);
}

static void groups_release(struct gilcall *c)
{
	free(c);
}

static int groups_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			   size_t errlen)
{
	struct groups_call *g;
	char why[256];
	int asked, ran = 0, rc = 0;

	(void)ctx;
	if (!atomic_load(&log_ready))
		return 0;
	g = calloc(1, sizeof(*g));
	if (!g) {
		snprintf(err, errlen, "python.comm_groups: out of memory");
		return -ENOMEM;
	}
	g->c.run = groups_run;
	g->c.release = groups_release;
	g->c.what = "python.comm_groups: torch's sequence numbers";
	/* Entries below the count never change (comm_log.h). */
	g->n = (size_t)comm_log_groups(&log_);
	for (size_t i = 0; i < g->n; i++)
		g->names[i] = comm_log_group_at(&log_, (int)i)->name;
	asked = g->n && livetab_rows_wants(rows, 2);
	if (asked)
		ran = gilcall_run(&g->c, 1000, NULL, why, sizeof(why)) == 0;
	/* Without the GIL in time: the groups, their numbers NULL. */
	for (size_t i = 0; i < g->n && !rc; i++) {
		const struct comm_group *grp = comm_log_group_at(&log_, (int)i);

		if (!(rc = livetab_rows_begin(rows)) &&
		    !(rc = livetab_rows_text(rows, grp->name)) &&
		    !(rc = livetab_rows_text(rows, grp->ranks)))
			rc = ran && g->last[i] > 0
				     ? livetab_rows_int(rows, g->last[i])
				     : livetab_rows_null(rows);
	}
	if (asked)
		gilcall_done(&g->c);
	else
		free(g);
	if (rc)
		snprintf(err, errlen, "python.comm_groups: out of memory");
	return rc;
}

static const struct livetab groups_tab = {
	.schema = "python",
	.name = "comm_groups",
	.doc = "the process groups of the recorded calls, with torch's "
	       "number of the last call started on each in this process, "
	       "from Python or C++ (comparable with comm_collective.pg_seq; "
	       "NULL when torch has none or the GIL did not come in "
	       "python.gil_timeout_ms)",
	.columns = "pg TEXT, pg_ranks TEXT, torch_last_seq INTEGER",
	.snapshot = groups_snapshot,
};

/* ---- python.comm_flight_recorder: torch's own (comm_fr.h) -------------- */

struct fr_call {
	struct gilcall c; /* first */
	int rc;
	char *json;
	char err[256];
};

static void fr_run(struct gilcall *c)
{
	struct fr_call *f = (struct fr_call *)c;

	f->rc = comm_fr_dump(&f->json, f->err, sizeof(f->err));
}

static void fr_release(struct gilcall *c)
{
	free(((struct fr_call *)c)->json);
	free(c);
}

static int fr_snapshot(void *ctx, struct livetab_rows *rows, char *err,
		       size_t errlen)
{
	struct fr_call *f = calloc(1, sizeof(*f));
	char why[256];
	int rc;

	(void)ctx;
	if (!f) {
		snprintf(err, errlen, "python.comm_flight_recorder: out of memory");
		return -ENOMEM;
	}
	f->c.run = fr_run;
	f->c.release = fr_release;
	f->c.what = "python.comm_flight_recorder: torch's dump";
	/* f's results only once the call ended: else it may still run. */
	rc = gilcall_run(&f->c, 5000, NULL, why, sizeof(why));
	if (!rc && (rc = f->rc))
		snprintf(why, sizeof(why), "%s", f->err);
	else if (!rc && f->json)
		rc = comm_fr_rows(f->json, rows, why, sizeof(why));
	if (rc)
		snprintf(err, errlen, "python.comm_flight_recorder: %s", why);
	gilcall_done(&f->c);
	return rc;
}

static const struct livetab fr_tab = {
	.schema = "python",
	.name = "comm_flight_recorder",
	.doc = "torch's Flight Recorder (torch >= 2.5 where built): its last "
	       "calls on every process group, those made in C++ too, with "
	       "torch's sequence numbers and op names; empty unless "
	       "TORCH_FR_BUFFER_SIZE (TORCH_NCCL_TRACE_BUFFER_SIZE for NCCL) "
	       "was set when the group was made",
	.columns = COMM_FR_COLUMNS,
	.snapshot = fr_snapshot,
};

/* ---- the recording (sql/recording.h's feed) ----------------------------- */

#define FEED_WINDOW 4096 /* calls given again while one before them runs */

static int rec_num(void *to, int64_t v)
{
	return recording_rows_int(to, v);
}

static int rec_real(void *to, double v)
{
	return recording_rows_real(to, v);
}

static int rec_text(void *to, const char *v)
{
	return recording_rows_text(to, v);
}

static int rec_null(void *to)
{
	return recording_rows_null(to);
}

static int feed_pending(void *ctx)
{
	uint64_t first, end;

	(void)ctx;
	if (!atomic_load(&log_ready))
		return 0;
	comm_log_span(&log_, &first, &end);
	return end > feed_next;
}

/* The calls since the last flush, and those still running before them
 * (their rows given again until they end; at most FEED_WINDOW back). */
static int feed_write(void *ctx, struct recording_rows *w)
{
	const struct sink k = {rec_num, rec_real, rec_text, rec_null, w};
	uint64_t first, end, start, next;
	double now = comm_log_clock();
	struct comm_rec r;
	int n = 0;

	(void)ctx;
	feed_before = feed_next;
	comm_log_span(&log_, &first, &end);
	start = feed_next > first ? feed_next : first;
	if (end - start > FEED_WINDOW)
		start = end - FEED_WINDOW;
	next = end;
	for (uint64_t id = start; id < end; id++) {
		if (read_rec(id, &r))
			continue;
		if (r.state == COMM_RUNNING && next == end)
			next = id;
		if (put_row(&k, &r, now) || recording_rows_end(w))
			return -1;
		n++;
	}
	feed_next = next;
	return n;
}

/* The flush failed: its calls are given again. */
static void feed_done(void *ctx, int ok)
{
	(void)ctx;
	if (!ok)
		feed_next = feed_before;
}

static const struct recording_feed comm_feed = {
	.schema = "python",
	.name = "comm_collective",
	.columns = "id INTEGER PRIMARY KEY, " COLUMNS_AFTER_ID,
	.write = feed_write,
	.pending = feed_pending,
	.done = feed_done,
};

/* The original Probing's comm_metrics, as a view. */
static const char metrics_view[] =
	"CREATE VIEW IF NOT EXISTS python.comm_metrics AS SELECT ts, op, pg, "
	"seq, CASE WHEN op IN ('recv', 'irecv') THEN peer ELSE rank END "
	"AS src_rank, CASE WHEN op IN ('recv', 'irecv') THEN rank ELSE peer "
	"END AS dst_rank, bytes, duration AS latency, "
	"CASE WHEN duration > 0 THEN bytes / duration END AS bandwidth, state "
	"FROM comm_collective";

int comm_init(struct store *st, char *err, size_t errlen)
{
	int rc = store_add_livetab(st, &comm_tab, NULL, err, errlen);

	if (!rc)
		rc = store_add_livetab(st, &groups_tab, NULL, err, errlen);
	if (!rc)
		rc = store_add_livetab(st, &fr_tab, NULL, err, errlen);
	if (!rc)
		rc = store_exec(st, metrics_view, err, errlen);
	if (!rc)
		rc = store_catalog_add(
			st, "python", "comm_metrics", "view",
			"python.comm_collective as the original Probing's "
			"comm_metrics (latency s, bandwidth bytes/s)");
	if (!rc)
		rc = record_add_feed(&comm_feed);
	if (rc) {
		if (rc == -ENOSPC)
			snprintf(err, errlen,
				 "comm: no room for a recording "
				 "feed");
		return rc;
	}
	/* Once per process: listeners outlive a fork, agents do not. */
	if (!listening && config_on_change("comm.", on_change)) {
		snprintf(err, errlen, "comm: no room for a config listener");
		return -ENOSPC;
	}
	listening = 1;
	atomic_store(&changed, 1);
	return 0;
}

/* ---- applying the settings (GIL thread) -------------------------------- */

struct apply {
	int want, ddp;
	int busy; /* not applied: ran() was installing */
	int rc, ddp_rc;
	int funcol_waiting;
	char err[200];
};

/* One at a time; static because a GIL call that overruns its hard limit
 * goes on after pygil_run returned. */
static struct apply A;
static _Atomic int A_busy;

/* Taken by the install's one maker at a time: apply_fn (a GIL thread) or
 * ran (the program's thread); both hold the GIL, but the Python the
 * install calls may let it go. */
static _Atomic int installing;

/* Set on the GIL thread while apply_fn runs: a ran() there (torch run by
 * a look of apply_fn's) must not wait for itself. */
static _Thread_local int in_apply;

void comm_atfork_child(void)
{
	if (atomic_load(&log_ready))
		comm_log_forget(&log_);
	feed_next = 0; /* the child's recording has none of them */
	/* The parent's apply or install, whichever thread ran it, is not
	 * the child's. */
	atomic_store(&A_busy, 0);
	atomic_store(&installing, 0);
}

/* torch has just run, in the program's thread that imports it (GIL held):
 * the install now, before the program's next line can make a DDP model;
 * the tick's apply() then finds it made. */
static void ran(void)
{
	struct timespec start, t;
	char err[200];
	int idle = 0;

	if (!config_bool("comm.record") || in_apply)
		return;
	/* A tick's apply_fn meanwhile (one that began before torch was in
	 * sys.modules; later ones leave torch's import to this): waited
	 * for with the GIL let go, then this install.  Returning at once
	 * left a model made on the next line without its hook, when that
	 * apply_fn had waited in a look into torch for the import to end,
	 * then raced the program to install (seen under ASan). */
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!atomic_compare_exchange_strong(&installing, &idle, 1)) {
		idle = 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - start.tv_sec) * 1000 +
			    (t.tv_nsec - start.tv_nsec) / 1000000 >=
		    RAN_WAIT_MS)
			return; /* left to the poll */
		pygil_nap(RAN_WAIT_STEP_MS);
	}
	if (config_bool("comm.record") && /* not turned off meanwhile */
	    !comm_wrap_install(&log_, err, sizeof(err)) &&
	    config_bool("comm.ddp"))
		comm_ddp_install(err, sizeof(err));
	atomic_store(&installing, 0);
	on_change(NULL);
}

static void apply_fn(void *arg)
{
	struct apply *a = arg;
	int idle = 0;

	a->rc = 0;
	in_apply = 1;
	if (!atomic_compare_exchange_strong(&installing, &idle, 1)) {
		a->busy = 1; /* ran() is installing: again at the next tick */
	} else if (a->want && pymods_importing("torch")) {
		/* Being imported: ran() installs as it ends.  Not from here:
		 * torch.compiler is not there yet, and a look into torch
		 * (pymods_get) waits for its import, whose thread waits in
		 * ran() for this. */
		a->rc = -EAGAIN;
		pyafter_watch("torch", ran);
	} else if (!a->want) {
		pyafter_unwatch();
		comm_ddp_remove();
		comm_wrap_remove();
	} else {
		a->rc = comm_wrap_install(&log_, a->err, sizeof(a->err));
		if (!a->rc && a->ddp)
			a->ddp_rc = comm_ddp_install(a->err, sizeof(a->err));
		else if (!a->rc)
			comm_ddp_remove();
		a->funcol_waiting = !a->rc && comm_wrap_funcol_waiting();
		/* Waiting for a module: watched for as well as looked for.
		 * The package torch (pyafter.h): when it has run,
		 * torch.distributed and DDP's module have (it imports them),
		 * and so has torch.compiler, which the wrappers' shims look
		 * for (torch.distributed itself runs half-way through torch's
		 * import, before it). */
		if (a->rc == -EAGAIN || (a->ddp && a->ddp_rc == -EAGAIN))
			pyafter_watch("torch", ran);
		else
			pyafter_unwatch();
	}
	if (!a->busy)
		atomic_store(&installing, 0);
	in_apply = 0;
	atomic_store(&A_busy, 0);
}

static void apply(void)
{
	struct pygil_limits lim = {.start_ms = 200, .run_ms = 5000};
	int rc;

	if (atomic_load(&A_busy)) {
		atomic_store(&changed, 1);
		return;
	}
	memset(&A, 0, sizeof(A));
	A.want = config_bool("comm.record");
	A.ddp = config_bool("comm.ddp");
	if (A.want && !atomic_load(&log_ready)) {
		rc = comm_log_init(&log_, (size_t)config_int("comm.max_rows"));
		if (rc) {
			snprintf(error_text, sizeof(error_text),
				 "no memory for %lld records",
				 (long long)config_int("comm.max_rows"));
			return;
		}
		atomic_store(&log_ready, 1);
	}
	if (!A.want && !installed && !waiting)
		return;
	atomic_store(&A_busy, 1);
	rc = pygil_run(apply_fn, &A, &lim, NULL);
	if (rc == -EINPROGRESS) {
		atomic_store(&changed, 1);
		return;
	}
	atomic_store(&A_busy, 0);
	if (rc || A.busy) {
		if (rc != -ESHUTDOWN)
			atomic_store(&changed, 1);
		return;
	}
	waiting = A.want && A.rc == -EAGAIN;
	installed = A.want && A.rc == 0;
	ddp_waiting = installed && A.ddp && A.ddp_rc == -EAGAIN;
	funcol_waiting = installed && A.funcol_waiting;
	if (!funcol_waiting)
		funcol_ticks = 0;
	error_text[0] = '\0';
	if (A.want && A.rc && A.rc != -EAGAIN) {
		snprintf(error_text, sizeof(error_text), "%s", A.err);
		log_warn("torch.distributed calls not recorded: %s", A.err);
	} else if (installed && A.ddp && A.ddp_rc && A.ddp_rc != -EAGAIN) {
		log_warn("DDP's all-reduces not recorded: %s", A.err);
	}
	if (!waiting)
		waited_ms = 0;
}

static void set_status(void)
{
	char text[CONFIG_VALUE_MAX];
	uint64_t first = 0, end = 0, running = 0;

	if (atomic_load(&log_ready)) {
		comm_log_span(&log_, &first, &end);
		running = comm_log_running(&log_);
	}
	if (installed)
		snprintf(text, sizeof(text),
			 "on: %d functions of torch.distributed wrapped%s, "
			 "%llu calls recorded (%llu kept), %llu running",
			 comm_wrap_count(),
			 comm_ddp_count() ? ", DDP all-reduces recorded" : "",
			 (unsigned long long)(end ? end - 1 : 0),
			 (unsigned long long)(end - first),
			 (unsigned long long)running);
	else if (waiting)
		snprintf(text, sizeof(text),
			 "waiting for torch.distributed to be imported");
	else if (error_text[0] && config_bool("comm.record"))
		snprintf(text, sizeof(text), "error: %s", error_text);
	else
		snprintf(text, sizeof(text), "off");
	config_set_info("comm.status", text);
}

int comm_tick(void)
{
	int interval;

	if (funcol_waiting)
		funcol_ticks++;
	if (atomic_exchange(&changed, 0) || waiting || ddp_waiting ||
	    (funcol_waiting && (funcol_ticks < FUNCOL_FAST_TICKS ||
				funcol_ticks % FUNCOL_SLOW_TICKS == 0)))
		apply();
	set_status();
	if (waiting || ddp_waiting) {
		interval =
			waited_ms < WAIT_FAST_FOR ? WAIT_FAST_MS : WAIT_SLOW_MS;
		waited_ms += interval;
		return interval;
	}
	if (atomic_load(&changed))
		return WAIT_FAST_MS;
	return installed ? STATUS_MS : -1;
}
