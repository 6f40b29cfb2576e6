/*
 * recording: the recorded tables copied to files, rows added and rows
 * changed in place, the store's trimming not followed, the disk's own
 * bounds, feeds, and a directory that cannot be written.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "recorder.h"
#include "recording.h"
#include "store.h"
#include "test.h"

static char dir[256];

/* One integer from a file of the recording, read as a reader would. */
static int64_t disk_int(const char *schema, const char *sql)
{
	char path[512];
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int64_t v = -1;

	recording_file(dir, schema, path, sizeof(path));
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
		    SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

static void add_rows(struct recorder *r, int from, int n, double ts)
{
	char err[256];

	CHECK(recorder_begin(r, err, sizeof(err)) == 0);
	for (int i = from; i < from + n; i++) {
		CHECK(store_stmt_real(recorder_stmt(r), 1, ts) == 0);
		CHECK(store_stmt_int(recorder_stmt(r), 2, i) == 0);
		CHECK(store_stmt_text(recorder_stmt(r), 3, "payload") == 0);
		CHECK(recorder_add(r, 30, err, sizeof(err)) == 0);
	}
	CHECK(recorder_commit(r, err, sizeof(err)) == 0);
}

static void exec(struct store *st, const char *sql)
{
	char err[256];

	CHECK(store_exec(st, sql, err, sizeof(err)) == 0);
}

static void test_rows_and_changes(void)
{
	struct recorder_opts o = {
		.schema = "process",
		.name = "series",
		.columns = "ts REAL, i INTEGER, s TEXT",
		.max_rows = 100,
	};
	struct recorder_opts k = {
		.schema = "profile",
		.name = "names",
		.columns = "id INTEGER PRIMARY KEY, name TEXT",
	};
	struct store *st = NULL;
	struct recorder *r = NULL, *kr = NULL;
	struct recording *rec = NULL;
	struct recording_stats s;
	char err[256];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(recorder_new(st, &o, &r, err, sizeof(err)) == 0);
	CHECK(recorder_new(st, &k, &kr, err, sizeof(err)) == 0);
	add_rows(r, 0, 50, 1000.0);
	CHECK(recording_open(st, dir, &rec, err, sizeof(err)) == 0);
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("process", "SELECT count(*) FROM series") == 50);
	CHECK(disk_int("process", "SELECT max(i) FROM series") == 49);
	/* The store trims to 90 of 100: the disk keeps them all. */
	add_rows(r, 50, 70, 2000.0);
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("process", "SELECT count(*) FROM series") == 120);
	CHECK(disk_int("process", "SELECT count(DISTINCT i) FROM series") ==
	      120);
	/* Changed in place: an UPDATE, and an interned id written again. */
	exec(st, "UPDATE process.series SET s = 'changed' WHERE i = 119");
	exec(st, "INSERT INTO profile.names VALUES (7, 'first')");
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("profile", "SELECT count(*) FROM names WHERE "
				  "name = 'first'") == 1);
	exec(st, "INSERT OR REPLACE INTO profile.names VALUES (7, 'second')");
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("process", "SELECT count(*) FROM series WHERE "
				  "s = 'changed' AND i = 119") == 1);
	CHECK(disk_int("profile", "SELECT count(*) FROM names") == 1);
	CHECK(disk_int("profile", "SELECT count(*) FROM names WHERE "
				  "id = 7 AND name = 'second'") == 1);
	/* A bounded flush leaves the rest for the next (the store's bound
	 * lifted: what it trims before a flush is not seen). */
	recorder_limits(r, 0, 0);
	add_rows(r, 120, 3000, 3000.0);
	CHECK(recording_flush(rec, 1024, err, sizeof(err)) == 0);
	CHECK(disk_int("process", "SELECT count(*) FROM series") == 120 + 1024);
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("process", "SELECT count(*) FROM series") == 3120);
	recording_stats(rec, &s);
	CHECK(s.tables == 2 && s.rows >= 3120 && s.lost == 0);

	/* Age: rows before ts 2500 go. */
	uint64_t bytes = 0;
	CHECK(recording_trim(rec, 2500.0, 0, &bytes, err, sizeof(err)) == 0);
	CHECK(disk_int("process", "SELECT count(*) FROM series") == 3000);
	CHECK(disk_int("process", "SELECT min(i) FROM series") == 120);
	CHECK(bytes > 0);
	/* Size: the oldest go until the files fit. */
	add_rows(r, 3120, 20000, 4000.0);
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	uint64_t before = 0;
	CHECK(recording_trim(rec, 0, 0, &before, err, sizeof(err)) == 0);
	CHECK(recording_trim(rec, 0, before / 2, &bytes, err, sizeof(err)) ==
	      0);
	CHECK(bytes <= before / 2);
	CHECK(disk_int("process", "SELECT max(i) FROM series") == 23119);
	int64_t left = disk_int("process", "SELECT count(*) FROM series");
	CHECK(left > 1000 && left < 23000);
	/* What is left is the newest, without a gap. */
	CHECK(disk_int("process", "SELECT max(i) - min(i) + 1 - count(*) "
				  "FROM series") == 0);
	/* Tables without ts are kept whole. */
	CHECK(disk_int("profile", "SELECT count(*) FROM names") == 1);

	/* Read back as a store: the same SQL as against the live one. */
	struct store *rd = NULL;
	struct store_result res = {0};
	CHECK(store_open_recording(dir, &rd, err, sizeof(err)) == 0);
	CHECK(rd && store_query(rd,
				"SELECT count(*), max(i) FROM process.series "
				"WHERE ts > ago('1000000000d')",
				NULL, &res, err, sizeof(err)) == 0);
	CHECK(res.nrows == 1 && res.cells[0].u.i == left &&
	      res.cells[1].u.i == 23119);
	store_result_release(&res);
	CHECK(store_query(rd,
			  "SELECT group_concat(schema || '.' || name || ':' "
			  "|| kind, ' ') FROM probing.tables",
			  NULL, &res, err, sizeof(err)) == 0);
	CHECK(res.nrows == 1);
	if (res.nrows == 1)
		CHECK_STR(res.cells[0].u.s.p,
			  "probing.tables:catalog process.series:recorded "
			  "profile.names:recorded");
	store_result_release(&res);
	/* Read-only: a write is refused, the file unchanged. */
	CHECK(store_query(rd, "DELETE FROM process.series", NULL, &res, err,
			  sizeof(err)) != 0);
	store_result_release(&res);
	CHECK(store_query(rd, "SELECT count(*) FROM python.backtrace", NULL,
			  &res, err, sizeof(err)) == STORE_ESQL);
	CHECK(strstr(err, "no such table") != NULL);
	store_result_release(&res);
	store_free(rd);
	CHECK(disk_int("process", "SELECT count(*) FROM series") == left);
	recording_close(rec);
	recorder_free(r);
	recorder_free(kr);
	store_free(st);
}

/* A flush that fails (here: its file replaced by a directory) loses
 * nothing: the next one copies what it had taken, and the rows changed
 * meanwhile too. */
static void test_failed_flush_loses_nothing(void)
{
	struct recorder_opts o = {
		.schema = "process",
		.name = "series",
		.columns = "ts REAL, i INTEGER, s TEXT",
	};
	struct store *st = NULL;
	struct recorder *r = NULL;
	struct recording *rec = NULL;
	char err[256], path[512], moved[560];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(recorder_new(st, &o, &r, err, sizeof(err)) == 0);
	CHECK(recording_open(st, dir, &rec, err, sizeof(err)) == 0);
	add_rows(r, 0, 10, 1.0);
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	recording_file(dir, "process", path, sizeof(path));
	snprintf(moved, sizeof(moved), "%s.away", path);
	CHECK(rename(path, moved) == 0);
	CHECK(mkdir(path, 0700) == 0);
	add_rows(r, 10, 10, 1.0);
	exec(st, "UPDATE process.series SET s = 'changed' WHERE i = 3");
	CHECK(recording_flush(rec, 0, err, sizeof(err)) != 0);
	CHECK(rmdir(path) == 0);
	CHECK(rename(moved, path) == 0);
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("process", "SELECT count(*) FROM series") == 20);
	CHECK(disk_int("process", "SELECT count(*) FROM series WHERE "
				  "s = 'changed' AND i = 3") == 1);
	recording_close(rec);
	recorder_free(r);
	store_free(st);
}

/* A feed: rows from a function, written again as they change. */
static int feed_state;

static int feed_write(void *ctx, struct recording_rows *w)
{
	(void)ctx;
	for (int id = 1; id <= 3; id++) {
		if (recording_rows_int(w, id) ||
		    recording_rows_text(w, feed_state ? "done" : "running") ||
		    recording_rows_end(w))
			return -1;
	}
	/* A value past the columns is refused. */
	CHECK(recording_rows_int(w, 1) == 0 && recording_rows_int(w, 2) == 0 &&
	      recording_rows_int(w, 3) == -EINVAL);
	return 3;
}

static int feed_pending(void *ctx)
{
	(void)ctx;
	return feed_state < 2;
}

static void test_feed(void)
{
	static const struct recording_feed f = {
		.schema = "python",
		.name = "calls",
		.columns = "id INTEGER PRIMARY KEY, state TEXT",
		.write = feed_write,
		.pending = feed_pending,
	};
	struct store *st = NULL;
	struct recording *rec = NULL;
	char err[256];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(recording_open(st, dir, &rec, err, sizeof(err)) == 0);
	CHECK(recording_add_feed(rec, &f) == 0);
	feed_state = 0;
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("python", "SELECT count(*) FROM calls WHERE "
				 "state = 'running'") == 3);
	feed_state = 1;
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	CHECK(disk_int("python", "SELECT count(*) FROM calls") == 3);
	CHECK(disk_int("python", "SELECT count(*) FROM calls WHERE "
				 "state = 'done'") == 3);
	feed_state = 2; /* nothing pending: not called */
	CHECK(recording_flush(rec, 0, err, sizeof(err)) == 0);
	recording_close(rec);
	store_free(st);
}

/* A directory that cannot be written: the flush fails, saying why, and
 * the store goes on. */
static void test_unwritable(void)
{
	struct recorder_opts o = {
		.schema = "process",
		.name = "series",
		.columns = "ts REAL, i INTEGER, s TEXT",
	};
	struct store *st = NULL;
	struct recorder *r = NULL;
	struct recording *rec = NULL;
	char err[256] = "", bad[300];

	snprintf(bad, sizeof(bad), "%s/missing/deeper", dir);
	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(recorder_new(st, &o, &r, err, sizeof(err)) == 0);
	CHECK(recording_open(st, bad, &rec, err, sizeof(err)) == 0);
	add_rows(r, 0, 5, 1.0);
	CHECK(recording_flush(rec, 0, err, sizeof(err)) != 0);
	CHECK(strstr(err, "unable to open") != NULL);
	add_rows(r, 5, 5, 1.0);
	recording_close(rec);
	recorder_free(r);
	store_free(st);
}

static void make_dir(void)
{
	snprintf(dir, sizeof(dir), "/tmp/probing-test-recording-%d",
		 (int)getpid());
	CHECK(mkdir(dir, 0700) == 0);
}

static void empty_dir(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s/*", dir);
	CHECK(system(cmd) == 0);
}

static void remove_dir(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
}

TEST_MAIN(make_dir, test_rows_and_changes, empty_dir,
	  test_failed_flush_loses_nothing, empty_dir, test_feed,
	  test_unwritable, remove_dir)
