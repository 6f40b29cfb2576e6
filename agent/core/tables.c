/*
 * tables: snapshot providers for the live tables.  Each runs on the
 * querying (worker) thread when a scan starts; see livetab.h.
 */
#include "tables.h"

#include <errno.h>
#include <stdio.h>

#include "config.h"
#include "livetab.h"
#include "python/pytasks.h"
#include "python/snapshot.h"
#include "store.h"

#define TRY(x)                       \
	do {                         \
		int rc_ = (x);       \
		if (rc_)             \
			return rc_;  \
	} while (0)

static int take(struct pystack *st, int locals, char *err, size_t errlen)
{
	struct pystack_opts o = {0};
	struct snapshot_gil gil;

	o.locals = locals;
	o.max_depth = (size_t)config_int("python.max_depth");
	o.repr_max = (size_t)config_int("python.repr_max");
	return snapshot_stacks(st, &o, 0, NULL, &gil, err, errlen);
}

/* locals as "name=value" lines */
static int add_locals(struct livetab_rows *rows, const struct pystack_frame *f)
{
	char buf[8192];
	size_t n = 0;

	if (!f->locals)
		return livetab_rows_null(rows);
	buf[0] = 0;
	for (size_t i = 0; i < f->nlocals && n < sizeof(buf) - 1; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s=%s",
				      i ? "\n" : "", f->locals[i].name,
				      f->locals[i].value ? f->locals[i].value
							 : "");
	return livetab_rows_text(rows, buf);
}

static int backtrace_rows(struct livetab_rows *rows, const struct pystack *st)
{
	for (size_t i = 0; i < st->nthreads; i++) {
		const struct pystack_thread *th = &st->threads[i];
		for (size_t d = 0; d < th->nframes; d++) {
			const struct pystack_frame *f = &th->frames[d];
			TRY(livetab_rows_begin(rows));
			TRY(livetab_rows_int(rows, (int64_t)th->thread_id));
			TRY(livetab_rows_text(rows, th->name));
			TRY(livetab_rows_int(rows, (int64_t)d));
			TRY(livetab_rows_text(rows, f->func));
			TRY(livetab_rows_text(rows, f->file));
			TRY(livetab_rows_int(rows, f->lineno));
			TRY(add_locals(rows, f));
		}
	}
	return 0;
}

static int backtrace_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			      size_t errlen)
{
	struct pystack st;
	int rc;

	(void)ctx;
	/* Column 6 (locals) means a repr of every local: only when read. */
	rc = take(&st, livetab_rows_wants(rows, 6), err, errlen);
	if (rc)
		return rc;
	rc = backtrace_rows(rows, &st);
	pystack_release(&st);
	if (rc)
		snprintf(err, errlen, "python.backtrace: too many rows");
	return rc;
}

static const struct livetab backtrace_tab = {
	.schema = "python",
	.name = "backtrace",
	.doc = "every thread's Python stack, taken when queried "
	       "(depth 0 = innermost frame)",
	.columns = "thread_id INTEGER, thread_name TEXT, depth INTEGER, "
		   "func TEXT, file TEXT, lineno INTEGER, locals TEXT",
	.snapshot = backtrace_snapshot,
};

static int threads_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			    size_t errlen)
{
	struct pystack st;
	int rc;

	(void)ctx;
	rc = take(&st, 0, err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < st.nthreads && !rc; i++) {
		const struct pystack_thread *th = &st.threads[i];
		if ((rc = livetab_rows_begin(rows)) ||
		    (rc = livetab_rows_int(rows, (int64_t)th->thread_id)) ||
		    (rc = livetab_rows_int(rows, th->native_id)) ||
		    (rc = livetab_rows_text(rows, th->name)) ||
		    (rc = th->daemon < 0 ? livetab_rows_null(rows)
					 : livetab_rows_int(rows, th->daemon)) ||
		    (rc = livetab_rows_int(rows, th->holds_gil)) ||
		    (rc = livetab_rows_text(rows, th->state)) ||
		    (rc = livetab_rows_int(rows, th->is_main)) ||
		    (rc = livetab_rows_int(rows, (int64_t)th->nframes)))
			break;
	}
	pystack_release(&st);
	if (rc)
		snprintf(err, errlen, "python.threads: out of memory");
	return rc;
}

static const struct livetab threads_tab = {
	.schema = "python",
	.name = "threads",
	.doc = "every Python thread now: ids, name, daemon, GIL, kernel state",
	.columns = "thread_id INTEGER, native_id INTEGER, name TEXT, "
		   "daemon INTEGER, holds_gil INTEGER, state TEXT, "
		   "is_main INTEGER, depth INTEGER",
	.snapshot = threads_snapshot,
};

/* ids as "[1, 2]" (JSON: SQLite's json_each reads it). */
static int add_ids(struct livetab_rows *rows, const uint64_t *ids, size_t n)
{
	char buf[2048];
	size_t at = 0;

	buf[at++] = '[';
	for (size_t i = 0; i < n && at < sizeof(buf) - 24; i++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%llu",
				       i ? ", " : "", (unsigned long long)ids[i]);
	snprintf(buf + at, sizeof(buf) - at, "]");
	return livetab_rows_text(rows, buf);
}

/* The coroutine chain, one "func (file:line)" a line, innermost first. */
static int add_chain(struct livetab_rows *rows, const struct pytask *t)
{
	char buf[8192];
	size_t at = 0;

	buf[0] = '\0';
	for (size_t d = 0; d < t->nframes && at < sizeof(buf) - 1; d++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at,
				       "%s%s (%s:%d)", d ? "\n" : "",
				       t->frames[d].func, t->frames[d].file,
				       t->frames[d].line);
	return livetab_rows_text(rows, buf);
}

static int task_row(struct livetab_rows *rows, const struct pytask *t)
{
	const struct pytask_frame *top = t->nframes ? &t->frames[0] : NULL;

	TRY(livetab_rows_begin(rows));
	TRY(livetab_rows_int(rows, (int64_t)t->thread_id));
	TRY(livetab_rows_int(rows, (int64_t)t->loop));
	TRY(livetab_rows_int(rows, (int64_t)t->id));
	TRY(livetab_rows_text(rows, t->name));
	TRY(livetab_rows_text(rows, t->state));
	TRY(livetab_rows_text(rows, t->coro));
	TRY(livetab_rows_text(rows, top ? top->func : NULL));
	TRY(livetab_rows_text(rows, top ? top->file : NULL));
	TRY(top ? livetab_rows_int(rows, top->line) : livetab_rows_null(rows));
	TRY(add_chain(rows, t));
	TRY(livetab_rows_text(rows, t->awaits));
	TRY(add_ids(rows, t->awaits_tasks, t->nawaits));
	TRY(add_ids(rows, t->awaited_by, t->nawaited_by));
	TRY(t->waited_s < 0 ? livetab_rows_null(rows)
			    : livetab_rows_real(rows, t->waited_s));
	return 0;
}

static int tasks_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			  size_t errlen)
{
	struct pytasks ts;
	int rc;

	(void)ctx;
	rc = pytasks_take(&ts, (size_t)config_int("python.max_depth"), NULL,
			  err, errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < ts.n && !rc; i++)
		rc = task_row(rows, &ts.tasks[i]);
	pytasks_release(&ts);
	if (rc)
		snprintf(err, errlen, "python.tasks: too many rows");
	return rc;
}

static const struct livetab tasks_tab = {
	.schema = "python",
	.name = "tasks",
	.doc = "every asyncio task of every running event loop now: its "
	       "coroutine chain (innermost first), what it awaits, the tasks "
	       "it awaits and those awaiting it (JSON arrays of task_id), "
	       "and for how long it has waited (since the agent first saw it "
	       "wait on the same thing)",
	.columns = "thread_id INTEGER, loop INTEGER, task_id INTEGER, "
		   "name TEXT, state TEXT, coro TEXT, func TEXT, file TEXT, "
		   "lineno INTEGER, stack TEXT, awaits TEXT, awaits_tasks TEXT, "
		   "awaited_by TEXT, waited_s REAL",
	.snapshot = tasks_snapshot,
};

static int config_snapshot(void *ctx, struct livetab_rows *rows, char *err,
			   size_t errlen)
{
	char value[CONFIG_VALUE_MAX];
	const char *name, *doc;
	int rc = 0;

	(void)ctx;
	for (size_t i = 0; !rc && config_entry(i, &name, value, sizeof(value),
					       &doc) == 0; i++) {
		if ((rc = livetab_rows_begin(rows)) ||
		    (rc = livetab_rows_text(rows, name)) ||
		    (rc = livetab_rows_text(rows, value)) ||
		    (rc = livetab_rows_text(rows, doc)))
			break;
	}
	if (rc)
		snprintf(err, errlen, "probing.config: out of memory");
	return rc;
}

static const struct livetab config_tab = {
	.schema = "probing",
	.name = "config",
	.doc = "the agent's settings (change them with probing/config)",
	.columns = "name TEXT, value TEXT, doc TEXT",
	.snapshot = config_snapshot,
};

int tables_register(struct store *st, char *err, size_t errlen)
{
	static const struct livetab *const tabs[] = {
		&backtrace_tab, &threads_tab, &tasks_tab, &config_tab,
	};

	for (size_t i = 0; i < sizeof(tabs) / sizeof(tabs[0]); i++)
		TRY(store_add_livetab(st, tabs[i], NULL, err, errlen));
	return 0;
}
