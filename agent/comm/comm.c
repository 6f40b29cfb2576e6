/*
 * comm: settings, tables and the installation of the torch.distributed
 * recording.  See comm.h; the wrappers are in comm_wrap.c, the records in
 * comm_log.c.
 */
#include "comm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "comm_ddp.h"
#include "comm_log.h"
#include "comm_wrap.h"
#include "core/config.h"
#include "core/log.h"
#include "core/record.h"
#include "livetab.h"
#include "memory/memory.h"
#include "python/pygil.h"
#include "recording.h"
#include "store.h"

#define WAIT_FAST_MS 100  /* waiting for torch.distributed: poll this often */
#define WAIT_SLOW_MS 1000 /* ... and after WAIT_FAST_FOR ms, this often */
#define WAIT_FAST_FOR 10000
#define STATUS_MS 1000 /* installed: refresh comm.status this often */
#define READ_TRIES 8   /* a record being written: read it again */

static struct comm_log log_;
static _Atomic int log_ready;
static _Atomic int changed;
static int installed, waiting, waited_ms, listening;
static int ddp_waiting; /* recording, DDP's module not imported yet */
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

void comm_atfork_child(void)
{
	if (atomic_load(&log_ready))
		comm_log_forget(&log_);
	feed_next = 0; /* the child's recording has none of them */
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
	"thread_id INTEGER, error TEXT"

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
	int rc, ddp_rc;
	char err[200];
};

/* One at a time; static because a GIL call that overruns its hard limit
 * goes on after pygil_run returned. */
static struct apply A;
static _Atomic int A_busy;

static void apply_fn(void *arg)
{
	struct apply *a = arg;

	a->rc = 0;
	if (!a->want) {
		comm_ddp_remove();
		comm_wrap_remove();
	} else {
		a->rc = comm_wrap_install(&log_, a->err, sizeof(a->err));
		if (!a->rc && a->ddp)
			a->ddp_rc = comm_ddp_install(a->err, sizeof(a->err));
		else if (!a->rc)
			comm_ddp_remove();
	}
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
	if (rc) {
		if (rc != -ESHUTDOWN)
			atomic_store(&changed, 1);
		return;
	}
	waiting = A.want && A.rc == -EAGAIN;
	installed = A.want && A.rc == 0;
	ddp_waiting = installed && A.ddp && A.ddp_rc == -EAGAIN;
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

	if (atomic_exchange(&changed, 0) || waiting || ddp_waiting)
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
