/*
 * recording: the recorded tables on disk.  See recording.h.
 *
 * Each table keeps a mark: the rows up to it (by rowid) have been read
 * for the disk.  The mark moves while the store's mutex is held, and the
 * update hook runs under that mutex too, so a row changed at or below
 * the mark is always noted (dirty) and one above it is always read
 * later: nothing falls between the two.
 */
#include "recording.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "errbuf.h"
#include "recvfs.h"
#include "store.h"
#include "store_intern.h"

#define CHUNK_ROWS 1024	    /* rows read from the store per mutex hold */
#define DIRTY_MAX 4096	    /* changed rows noted per table between flushes */
#define CHECKPOINT_EVERY 30 /* flushes between WAL checkpoints */
#define BUSY_MS 2000	    /* a reader holding a lock on a file */
#define TRIM_ROUNDS 10	    /* 10% of the rows at a time */

static const char *const schemas[] = {"python", "process", "profile", "gpu",
				      "app"};
#define NSCHEMAS (sizeof(schemas) / sizeof(schemas[0]))

struct rtable {
	char schema[16];
	char name[64];
	char *ddl;	/* CREATE TABLE IF NOT EXISTS "schema".name(...);
			 * sqlite3_malloc'd, as insert */
	char *insert;	/* INSERT OR REPLACE INTO ... (?1 is the rowid) */
	int ncols;	/* columns (the rowid not counted) */
	int has_ts;	/* a column named ts: trimmed by age and size */
	int on_disk;	/* made in its file */
	int64_t mark;	/* rows up to this rowid are read (mu) */
	int64_t *dirty; /* rowids at or below mark changed since (mu) */
	size_t ndirty;
	int64_t begin_mark; /* mark when the flush began: put back if it fails
			     */
	int64_t *inflight;  /* dirty rowids taken by the flush (put back too) */
	size_t ninflight;
	sqlite3_stmt *read_new; /* store: rows past ?1, at most ?2 */
	sqlite3_stmt *read_one; /* store: the row ?1 */
	sqlite3_stmt *ins;	/* disk, during a flush */
};

struct rfeed {
	const struct recording_feed *f;
	int on_disk;
	sqlite3_stmt *ins;
};

struct recording {
	struct store *st;
	sqlite3 *mem;
	char dir[4096];
	pthread_mutex_t mu; /* tables' marks and dirty rows */
	struct rtable *t[RECORDING_TABLES_MAX];
	int nt;
	struct rfeed feeds[RECORDING_FEEDS_MAX];
	int nfeeds;
	sqlite3 *disk; /* open during a flush or a trim */
	int in_txn;
	unsigned flushes_since_ckpt;
	uint64_t min_free; /* recvfs.h's headroom, bytes; 0: none */
	struct recording_stats stats;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* An SQLite result as ours: out of memory, the disk full (wherever it
 * happened: attaching a schema's file fills it as a flush does), or
 * STORE_ESQL. */
static int sql_rc(int rc)
{
	return rc == SQLITE_NOMEM	       ? -ENOMEM
	       : (rc & 0xff) == SQLITE_FULL ? -ENOSPC
					    : STORE_ESQL;
}

int recording_file(const char *dir, const char *schema, char *out,
		   size_t outlen)
{
	int n = snprintf(out, outlen, "%s/%s.db", dir, schema);

	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

/* ---- the update hook (any thread writing the store; its mutex held) ---- */

static void on_update(void *arg, int op, const char *db, const char *tab,
		      sqlite3_int64 rowid)
{
	struct recording *r = arg;

	if (op == SQLITE_DELETE) /* the store's own bounds: kept on disk */
		return;
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->nt; i++) {
		struct rtable *t = r->t[i];

		if (strcmp(t->name, tab) || strcmp(t->schema, db))
			continue;
		if (rowid > t->mark)
			break; /* read with the new rows */
		if (t->ndirty && t->dirty[t->ndirty - 1] == rowid)
			break;
		if (t->ndirty < DIRTY_MAX)
			t->dirty[t->ndirty++] = rowid;
		else
			r->stats.lost++;
		break;
	}
	pthread_mutex_unlock(&r->mu);
}

/* ---- open and close ------------------------------------------------------ */

int recording_open(struct store *st, const char *dir, struct recording **out,
		   char *err, size_t errlen)
{
	struct recording *r;
	int saved;

	*out = NULL;
	if (strlen(dir) + 32 >= sizeof(r->dir)) {
		errbuf_set(err, errlen, "the directory's name is too long");
		return -EINVAL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->st = st;
	r->mem = store_sqlite(st);
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	pthread_mutex_init(&r->mu, NULL);
	saved = store_lock(st);
	sqlite3_update_hook(r->mem, on_update, r);
	store_unlock(st, saved);
	*out = r;
	return 0;
}

static void table_free(struct rtable *t)
{
	if (!t)
		return;
	sqlite3_finalize(t->read_new);
	sqlite3_finalize(t->read_one);
	sqlite3_free(t->ddl);
	sqlite3_free(t->insert);
	free(t->dirty);
	free(t->inflight);
	free(t);
}

static void disk_close(struct recording *r)
{
	for (int i = 0; i < r->nt; i++) {
		sqlite3_finalize(r->t[i]->ins);
		r->t[i]->ins = NULL;
	}
	for (int i = 0; i < r->nfeeds; i++) {
		sqlite3_finalize(r->feeds[i].ins);
		r->feeds[i].ins = NULL;
	}
	if (r->disk) {
		if (r->in_txn)
			sqlite3_exec(r->disk, "ROLLBACK", NULL, NULL, NULL);
		sqlite3_close(r->disk);
	}
	r->disk = NULL;
	r->in_txn = 0;
}

void recording_close(struct recording *r)
{
	int saved;

	if (!r)
		return;
	disk_close(r);
	saved = store_lock(r->st);
	sqlite3_update_hook(r->mem, NULL, NULL);
	for (int i = 0; i < r->nt; i++)
		table_free(r->t[i]); /* its statements are the store's */
	store_unlock(r->st, saved);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* ---- the tables -----------------------------------------------------------
 */

/* Runs sql on db; STORE_ESQL with the file's word on failure. */
static int disk_exec(struct recording *r, const char *sql, char *err,
		     size_t errlen)
{
	char *msg = NULL;
	int rc = sqlite3_exec(r->disk, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		errbuf_set(err, errlen, "%s", msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return sql_rc(rc);
	}
	return 0;
}

/*
 * What the table schema.name of the store is like: its CREATE statement
 * (made to name the schema and not fail when the table is there), its
 * columns, and the two reads.  Store lock held.
 */
static int describe(struct recording *r, struct rtable *t, char *err,
		    size_t errlen)
{
	sqlite3_stmt *q = NULL;
	char *sql = NULL, *cols = NULL, *params = NULL;
	const char *ddl;
	int rc;

	sql = sqlite3_mprintf("SELECT sql FROM \"%w\".sqlite_master WHERE "
			      "type = 'table' AND name = %Q",
			      t->schema, t->name);
	rc = sql ? sqlite3_prepare_v2(r->mem, sql, -1, &q, NULL) : SQLITE_NOMEM;
	sqlite3_free(sql);
	if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW &&
	    (ddl = (const char *)sqlite3_column_text(q, 0)) &&
	    !strncmp(ddl, "CREATE TABLE ", 13))
		t->ddl = sqlite3_mprintf("CREATE TABLE IF NOT EXISTS "
					 "\"%w\".%s",
					 t->schema, ddl + 13);
	sqlite3_finalize(q);
	q = NULL;
	if (!t->ddl) {
		errbuf_set(err, errlen, "%s.%s: no CREATE TABLE to copy",
			   t->schema, t->name);
		return STORE_ESQL;
	}
	/* Its columns, and whether one is the rowid. */
	sql = sqlite3_mprintf("PRAGMA \"%w\".table_info(%Q)", t->schema,
			      t->name);
	rc = sql ? sqlite3_prepare_v2(r->mem, sql, -1, &q, NULL) : SQLITE_NOMEM;
	sqlite3_free(sql);
	cols = sqlite3_mprintf("");
	params = sqlite3_mprintf("");
	int alias = 0, npk = 0;
	while (rc == SQLITE_OK && cols && params &&
	       sqlite3_step(q) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(q, 1);
		const char *type = (const char *)sqlite3_column_text(q, 2);
		char *c2, *p2;

		if (!name)
			continue;
		if (sqlite3_column_int(q, 5)) {
			npk++;
			alias = type && !strcasecmp(type, "INTEGER");
		}
		if (!strcmp(name, "ts"))
			t->has_ts = 1;
		t->ncols++;
		c2 = sqlite3_mprintf("%s%s\"%w\"", cols, *cols ? ", " : "",
				     name);
		p2 = sqlite3_mprintf("%s, ?%d", params, t->ncols + 1);
		sqlite3_free(cols);
		sqlite3_free(params);
		cols = c2;
		params = p2;
	}
	sqlite3_finalize(q);
	if (npk != 1)
		alias = 0;
	if (!cols || !params || !t->ncols) {
		sqlite3_free(cols);
		sqlite3_free(params);
		errbuf_set(err, errlen, "%s.%s: columns unreadable", t->schema,
			   t->name);
		return STORE_ESQL;
	}
	/* ?1 is the rowid: a column of its own, or the key column. */
	if (alias)
		t->insert =
			sqlite3_mprintf("INSERT OR REPLACE INTO "
					"\"%w\".\"%w\"(%s) VALUES (%s)",
					t->schema, t->name, cols, params + 2);
	else
		t->insert = sqlite3_mprintf("INSERT OR REPLACE INTO "
					    "\"%w\".\"%w\"(_rowid_, %s) "
					    "VALUES (?1%s)",
					    t->schema, t->name, cols, params);
	sqlite3_free(cols);
	sqlite3_free(params);
	sql = sqlite3_mprintf("SELECT _rowid_, * FROM \"%w\".\"%w\" WHERE "
			      "_rowid_ > ?1 ORDER BY _rowid_ LIMIT ?2",
			      t->schema, t->name);
	rc = sql ? sqlite3_prepare_v3(r->mem, sql, -1,
				      SQLITE_PREPARE_PERSISTENT, &t->read_new,
				      NULL)
		 : SQLITE_NOMEM;
	sqlite3_free(sql);
	if (rc == SQLITE_OK) {
		sql = sqlite3_mprintf("SELECT _rowid_, * FROM \"%w\".\"%w\" "
				      "WHERE _rowid_ = ?1",
				      t->schema, t->name);
		rc = sql ? sqlite3_prepare_v3(r->mem, sql, -1,
					      SQLITE_PREPARE_PERSISTENT,
					      &t->read_one, NULL)
			 : SQLITE_NOMEM;
		sqlite3_free(sql);
	}
	if (rc != SQLITE_OK || !t->insert) {
		errbuf_set(err, errlen, "%s.%s: %s", t->schema, t->name,
			   sqlite3_errmsg(r->mem));
		return sql_rc(rc);
	}
	return 0;
}

static int known(struct recording *r, const char *schema, const char *name)
{
	for (int i = 0; i < r->nt; i++)
		if (!strcmp(r->t[i]->schema, schema) &&
		    !strcmp(r->t[i]->name, name))
			return 1;
	return 0;
}

/* Picks up the recorded tables made since the last look.  Store lock
 * held; a table that cannot be described is left out (said in err). */
static void find_tables(struct recording *r, char *err, size_t errlen)
{
	sqlite3_stmt *q = NULL;

	if (sqlite3_prepare_v2(r->mem,
			       "SELECT schema, name FROM probing.tables "
			       "WHERE kind = 'recorded' AND schema IN "
			       "('python', 'process', 'profile', 'app')",
			       -1, &q, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(q) == SQLITE_ROW && r->nt < RECORDING_TABLES_MAX) {
		const char *schema = (const char *)sqlite3_column_text(q, 0);
		const char *name = (const char *)sqlite3_column_text(q, 1);
		struct rtable *t;

		if (!schema || !name || known(r, schema, name) ||
		    strlen(schema) >= sizeof(t->schema) ||
		    strlen(name) >= sizeof(t->name))
			continue;
		t = calloc(1, sizeof(*t));
		if (t) {
			t->dirty = malloc(DIRTY_MAX * sizeof(*t->dirty));
			t->inflight = malloc(DIRTY_MAX * sizeof(*t->inflight));
		}
		if (!t || !t->dirty || !t->inflight) {
			table_free(t);
			break;
		}
		snprintf(t->schema, sizeof(t->schema), "%s", schema);
		snprintf(t->name, sizeof(t->name), "%s", name);
		if (describe(r, t, err, errlen)) {
			table_free(t);
			continue;
		}
		pthread_mutex_lock(&r->mu);
		r->t[r->nt++] = t;
		pthread_mutex_unlock(&r->mu);
		r->stats.tables = r->nt + r->nfeeds;
	}
	sqlite3_finalize(q);
}

/* ---- the files ---------------------------------------------------------- */

/* Opens the files (each schema's, made when new) and begins one
 * transaction over them. */
static int disk_open(struct recording *r, char *err, size_t errlen)
{
	char path[4200], query[128];
	int rc;

	if (r->disk)
		return 0;
	if (recvfs_register() != SQLITE_OK) {
		errbuf_set(err, errlen,
			   "the SQLite VFS %s could not be "
			   "registered",
			   RECVFS_NAME);
		return STORE_ESQL;
	}
	rc = sqlite3_open_v2(":memory:", &r->disk,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI,
			     NULL);
	if (rc != SQLITE_OK) {
		errbuf_set(err, errlen, "%s", sqlite3_errstr(rc));
		disk_close(r);
		return sql_rc(rc);
	}
	/* The WAL is checkpointed every CHECKPOINT_EVERY flushes, not at
	 * every close; nothing is kept in temporary files. */
	sqlite3_db_config(r->disk, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_db_config(r->disk, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_busy_timeout(r->disk, BUSY_MS);
	/* Exclusive locking for every file attached below, before it is
	 * read: a WAL file needs it without shared memory. */
	rc = disk_exec(r,
		       "PRAGMA temp_store = MEMORY;"
		       "PRAGMA locking_mode = EXCLUSIVE;",
		       err, errlen);
	for (size_t i = 0; i < NSCHEMAS && !rc; i++) {
		char *sql, *uri;

		if (recording_file(r->dir, schemas[i], path, sizeof(path))) {
			errbuf_set(err, errlen, "path too long");
			disk_close(r);
			return -ENAMETOOLONG;
		}
		/* The files through owned descriptors (recvfs.h); WAL in
		 * exclusive locking mode: its index in this connection's
		 * memory, no shared-memory file.  auto_vacuum applies to a
		 * new file only (before its first table): trimmed space can
		 * then be given back. */
		snprintf(query, sizeof(query), "vfs=%s&min_free=%llu",
			 RECVFS_NAME, (unsigned long long)r->min_free);
		uri = recvfs_uri(path, query);
		sql = uri ? sqlite3_mprintf(
				    "ATTACH %Q AS \"%w\";"
				    "PRAGMA \"%w\".auto_vacuum = INCREMENTAL;"
				    "PRAGMA \"%w\".journal_mode = WAL;"
				    "PRAGMA \"%w\".synchronous = NORMAL;",
				    uri, schemas[i], schemas[i], schemas[i],
				    schemas[i])
			  : NULL;
		free(uri);
		rc = sql ? disk_exec(r, sql, err, errlen) : -ENOMEM;
		sqlite3_free(sql);
	}
	if (rc) {
		disk_close(r);
		return rc;
	}
	rc = disk_exec(r, "BEGIN", err, errlen);
	if (rc) {
		disk_close(r);
		return rc;
	}
	r->in_txn = 1;
	return 0;
}

static int disk_prepare(struct recording *r, const char *sql,
			sqlite3_stmt **out, char *err, size_t errlen)
{
	int rc = sqlite3_prepare_v2(r->disk, sql, -1, out, NULL);

	if (rc != SQLITE_OK)
		errbuf_set(err, errlen, "%s", sqlite3_errmsg(r->disk));
	return rc == SQLITE_OK ? 0 : sql_rc(rc);
}

/* The table in its file, and its insert. */
static int table_ready(struct recording *r, struct rtable *t, char *err,
		       size_t errlen)
{
	int rc = disk_open(r, err, errlen);

	if (!rc && !t->on_disk) {
		rc = disk_exec(r, t->ddl, err, errlen);
		t->on_disk = !rc;
	}
	if (!rc && !t->ins)
		rc = disk_prepare(r, t->insert, &t->ins, err, errlen);
	return rc;
}

/* Writes the values of one row (vals[0] is the rowid). */
static int write_row(struct recording *r, struct rtable *t,
		     sqlite3_value **vals, char *err, size_t errlen)
{
	int rc;

	for (int c = 0; c <= t->ncols; c++)
		sqlite3_bind_value(t->ins, c + 1, vals[c]);
	rc = sqlite3_step(t->ins);
	sqlite3_reset(t->ins);
	if (rc != SQLITE_DONE) {
		errbuf_set(err, errlen, "%s.%s: %s", t->schema, t->name,
			   sqlite3_errmsg(r->disk));
		return sql_rc(rc);
	}
	r->stats.rows++;
	return 0;
}

static void free_values(sqlite3_value **vals, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sqlite3_value_free(vals[i]);
}

/*
 * Reads up to CHUNK_ROWS rows of t past its mark (store lock held for
 * the read only) into vals, moving the mark; *n rows.
 */
static int read_chunk(struct recording *r, struct rtable *t,
		      sqlite3_value **vals, size_t *n, char *err, size_t errlen)
{
	int saved = store_lock(r->st), rc;
	size_t w = (size_t)t->ncols + 1;
	int64_t last = t->mark;

	*n = 0;
	sqlite3_bind_int64(t->read_new, 1, t->mark);
	sqlite3_bind_int(t->read_new, 2, CHUNK_ROWS);
	while ((rc = sqlite3_step(t->read_new)) == SQLITE_ROW) {
		sqlite3_value **row = vals + *n * w;
		size_t c;

		for (c = 0; c < w; c++) {
			row[c] = sqlite3_value_dup(
				sqlite3_column_value(t->read_new, (int)c));
			if (!row[c])
				break;
		}
		if (c < w) {
			free_values(row, c);
			rc = SQLITE_NOMEM;
			break;
		}
		last = sqlite3_column_int64(t->read_new, 0);
		(*n)++;
	}
	if (rc != SQLITE_DONE)
		errbuf_set(err, errlen, "%s.%s: %s", t->schema, t->name,
			   sqlite3_errmsg(r->mem));
	sqlite3_reset(t->read_new);
	pthread_mutex_lock(&r->mu);
	t->mark = last;
	pthread_mutex_unlock(&r->mu);
	store_unlock(r->st, saved);
	return rc == SQLITE_DONE ? 0 : sql_rc(rc);
}

/* The rows of t past its mark, at most max_rows. */
static int flush_new(struct recording *r, struct rtable *t, size_t max_rows,
		     char *err, size_t errlen)
{
	size_t w = (size_t)t->ncols + 1, done = 0, n;
	sqlite3_value **vals = malloc(CHUNK_ROWS * w * sizeof(*vals));
	int rc = 0;

	if (!vals) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	while (!rc && done < max_rows) {
		rc = read_chunk(r, t, vals, &n, err, errlen);
		if (!rc && n)
			rc = table_ready(r, t, err, errlen);
		for (size_t i = 0; i < n && !rc; i++)
			rc = write_row(r, t, vals + i * w, err, errlen);
		free_values(vals, n * w);
		done += n;
		if (n < CHUNK_ROWS)
			break;
	}
	free(vals);
	return rc;
}

/* The rows of t changed in place since the last flush. */
static int flush_dirty(struct recording *r, struct rtable *t, char *err,
		       size_t errlen)
{
	size_t w = (size_t)t->ncols + 1, n, first;
	int64_t *ids;
	sqlite3_value **vals;
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	n = t->ndirty;
	pthread_mutex_unlock(&r->mu);
	if (!n)
		return 0;
	vals = malloc(w * sizeof(*vals));
	if (!vals) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Taken into inflight: given back if the flush fails. */
	pthread_mutex_lock(&r->mu);
	first = t->ninflight;
	n = t->ndirty;
	if (n > DIRTY_MAX - first) {
		r->stats.lost += n - (DIRTY_MAX - first);
		n = DIRTY_MAX - first;
	}
	memcpy(t->inflight + first, t->dirty, n * sizeof(*t->dirty));
	t->ninflight += n;
	t->ndirty = 0;
	pthread_mutex_unlock(&r->mu);
	ids = t->inflight + first;
	for (size_t i = 0; i < n && !rc; i++) {
		int saved = store_lock(r->st), got = 0, step;

		sqlite3_bind_int64(t->read_one, 1, ids[i]);
		step = sqlite3_step(t->read_one);
		if (step == SQLITE_ROW) {
			size_t c;

			for (c = 0; c < w; c++) {
				vals[c] =
					sqlite3_value_dup(sqlite3_column_value(
						t->read_one, (int)c));
				if (!vals[c])
					break;
			}
			got = c == w;
			if (!got)
				free_values(vals, c);
		}
		sqlite3_reset(t->read_one);
		store_unlock(r->st, saved);
		if (!got)
			continue; /* gone since (the store's bounds) */
		rc = table_ready(r, t, err, errlen);
		if (!rc)
			rc = write_row(r, t, vals, err, errlen);
		free_values(vals, w);
	}
	free(vals);
	return rc;
}

/* ---- feeds ------------------------------------------------------------- */

int recording_add_feed(struct recording *r, const struct recording_feed *f)
{
	if (r->nfeeds >= RECORDING_FEEDS_MAX)
		return -ENOSPC;
	r->feeds[r->nfeeds++] = (struct rfeed){.f = f};
	r->stats.tables = r->nt + r->nfeeds;
	return 0;
}

struct recording_rows {
	struct recording *r;
	sqlite3_stmt *ins;
	int col;
};

static int bound(int rc)
{
	return rc == SQLITE_OK ? 0 : -EINVAL;
}

int recording_rows_int(struct recording_rows *w, int64_t v)
{
	return bound(sqlite3_bind_int64(w->ins, ++w->col, v));
}

int recording_rows_real(struct recording_rows *w, double v)
{
	return bound(sqlite3_bind_double(w->ins, ++w->col, v));
}

int recording_rows_text(struct recording_rows *w, const char *v)
{
	if (!v)
		return recording_rows_null(w);
	return bound(
		sqlite3_bind_text(w->ins, ++w->col, v, -1, SQLITE_TRANSIENT));
}

int recording_rows_null(struct recording_rows *w)
{
	return bound(sqlite3_bind_null(w->ins, ++w->col));
}

int recording_rows_end(struct recording_rows *w)
{
	int rc = sqlite3_step(w->ins);

	sqlite3_reset(w->ins);
	sqlite3_clear_bindings(w->ins);
	w->col = 0;
	if (rc != SQLITE_DONE)
		return -EIO;
	w->r->stats.rows++;
	return 0;
}

static int feed_ready(struct recording *r, struct rfeed *fd, char *err,
		      size_t errlen)
{
	const struct recording_feed *f = fd->f;
	sqlite3_stmt *q = NULL;
	char *sql, *params = NULL;
	int rc = disk_open(r, err, errlen), n = 0;

	if (rc || fd->ins)
		return rc;
	sql = sqlite3_mprintf("CREATE TABLE IF NOT EXISTS \"%w\".\"%w\"(%s)",
			      f->schema, f->name, f->columns);
	rc = sql ? disk_exec(r, sql, err, errlen) : -ENOMEM;
	sqlite3_free(sql);
	if (rc)
		return rc;
	sql = sqlite3_mprintf("PRAGMA \"%w\".table_info(%Q)", f->schema,
			      f->name);
	rc = sql ? disk_prepare(r, sql, &q, err, errlen) : -ENOMEM;
	sqlite3_free(sql);
	while (!rc && sqlite3_step(q) == SQLITE_ROW)
		n++;
	sqlite3_finalize(q);
	if (rc)
		return rc;
	params = sqlite3_mprintf("?");
	for (int i = 1; i < n && params; i++) {
		char *p2 = sqlite3_mprintf("%s, ?", params);

		sqlite3_free(params);
		params = p2;
	}
	sql = params ? sqlite3_mprintf("INSERT OR REPLACE INTO \"%w\".\"%w\" "
				       "VALUES (%s)",
				       f->schema, f->name, params)
		     : NULL;
	sqlite3_free(params);
	rc = sql ? disk_prepare(r, sql, &fd->ins, err, errlen) : -ENOMEM;
	sqlite3_free(sql);
	fd->on_disk = !rc;
	return rc;
}

static int flush_feed(struct recording *r, struct rfeed *fd, char *err,
		      size_t errlen)
{
	struct recording_rows w = {r, NULL, 0};
	int rc;

	if (fd->f->pending && !fd->f->pending(fd->f->ctx))
		return 0;
	rc = feed_ready(r, fd, err, errlen);
	if (rc)
		return rc;
	w.ins = fd->ins;
	if (fd->f->write(fd->f->ctx, &w) < 0) {
		errbuf_set(err, errlen, "%s.%s: %s", fd->f->schema, fd->f->name,
			   sqlite3_errmsg(r->disk));
		return STORE_ESQL;
	}
	return 0;
}

/* ---- flush and trim ------------------------------------------------------ */

static int disk_commit(struct recording *r, char *err, size_t errlen)
{
	int rc = 0;

	if (!r->disk)
		return 0;
	if (r->in_txn) {
		rc = disk_exec(r, "COMMIT", err, errlen);
		if (!rc)
			r->in_txn = 0;
	}
	if (!rc && ++r->flushes_since_ckpt >= CHECKPOINT_EVERY) {
		r->flushes_since_ckpt = 0;
		for (size_t i = 0; i < NSCHEMAS && !rc; i++) {
			char *sql = sqlite3_mprintf(
				"PRAGMA \"%w\".wal_checkpoint(TRUNCATE)",
				schemas[i]);

			rc = sql ? disk_exec(r, sql, err, errlen) : -ENOMEM;
			sqlite3_free(sql);
		}
	}
	return rc;
}

/* The flush is over: its taken rows are on disk (ok), or are put back
 * to be read again by the next one. */
static void flush_done(struct recording *r, int ok)
{
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->nt; i++) {
		struct rtable *t = r->t[i];

		if (!ok) {
			t->mark = t->begin_mark;
			for (size_t k = 0; k < t->ninflight; k++) {
				if (t->ndirty < DIRTY_MAX)
					t->dirty[t->ndirty++] = t->inflight[k];
				else
					r->stats.lost++;
			}
		}
		t->ninflight = 0;
	}
	pthread_mutex_unlock(&r->mu);
	for (int i = 0; i < r->nfeeds; i++)
		if (r->feeds[i].f->done)
			r->feeds[i].f->done(r->feeds[i].f->ctx, ok);
}

int recording_flush(struct recording *r, size_t max_rows, char *err,
		    size_t errlen)
{
	double t0 = now_ms();
	uint64_t rows0 = r->stats.rows;
	int saved, rc = 0, busy = 0, full = 0;

	saved = store_lock(r->st);
	find_tables(r, err, errlen);
	store_unlock(r->st, saved);
	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->nt; i++)
		r->t[i]->begin_mark = r->t[i]->mark;
	pthread_mutex_unlock(&r->mu);
	for (int i = 0; i < r->nt && !rc; i++) {
		rc = flush_new(r, r->t[i], max_rows ? max_rows : SIZE_MAX, err,
			       errlen);
		if (!rc)
			rc = flush_dirty(r, r->t[i], err, errlen);
	}
	for (int i = 0; i < r->nfeeds && !rc; i++)
		rc = flush_feed(r, &r->feeds[i], err, errlen);
	if (!rc)
		rc = disk_commit(r, err, errlen);
	if (rc && r->disk) {
		int code = sqlite3_errcode(r->disk) & 0xff;

		busy = code == SQLITE_BUSY || code == SQLITE_LOCKED;
		full = code == SQLITE_FULL;
	}
	disk_close(r);
	flush_done(r, rc == 0);
	if (r->stats.rows != rows0 && !rc)
		r->stats.flushes++;
	r->stats.last_ms = now_ms() - t0;
	return busy ? -EBUSY : full ? -ENOSPC : rc;
}

/* Bytes the file of schema holds in use, and its WAL's. */
static int schema_bytes(struct recording *r, const char *schema, uint64_t *out,
			char *err, size_t errlen)
{
	sqlite3_stmt *q = NULL;
	int64_t v[3] = {0, 0, 0};
	static const char *const what[] = {"page_count", "freelist_count",
					   "page_size"};
	char path[4200];
	struct stat sb;

	for (int k = 0; k < 3; k++) {
		char *sql =
			sqlite3_mprintf("PRAGMA \"%w\".%s", schema, what[k]);
		int rc = sql ? disk_prepare(r, sql, &q, err, errlen) : -ENOMEM;

		sqlite3_free(sql);
		if (rc)
			return rc;
		if (sqlite3_step(q) == SQLITE_ROW)
			v[k] = sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
	}
	*out = (uint64_t)(v[0] > v[1] ? v[0] - v[1] : 0) * (uint64_t)v[2];
	if (recording_file(r->dir, schema, path, sizeof(path)) == 0 &&
	    strlen(path) + 4 < sizeof(path)) {
		strcat(path, "-wal");
		if (stat(path, &sb) == 0)
			*out += (uint64_t)sb.st_size;
	}
	return 0;
}

static int total_bytes(struct recording *r, uint64_t *out, char *err,
		       size_t errlen)
{
	*out = 0;
	for (size_t i = 0; i < NSCHEMAS; i++) {
		uint64_t b = 0;
		int rc = schema_bytes(r, schemas[i], &b, err, errlen);

		if (rc)
			return rc;
		*out += b;
	}
	return 0;
}

/* Runs a DELETE on the table of t; counts what went. */
static int trim_sql(struct recording *r, struct rtable *t, const char *where,
		    double arg, char *err, size_t errlen)
{
	sqlite3_stmt *q = NULL;
	char *sql = sqlite3_mprintf("DELETE FROM \"%w\".\"%w\" WHERE %s",
				    t->schema, t->name, where);
	int rc = sql ? disk_prepare(r, sql, &q, err, errlen) : -ENOMEM;

	sqlite3_free(sql);
	if (rc)
		return rc;
	sqlite3_bind_double(q, 1, arg);
	rc = sqlite3_step(q);
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE) {
		errbuf_set(err, errlen, "%s.%s: %s", t->schema, t->name,
			   sqlite3_errmsg(r->disk));
		return sql_rc(rc);
	}
	r->stats.trimmed += (uint64_t)sqlite3_changes(r->disk);
	return 0;
}

/* The oldest tenth of t's rows. */
static int trim_oldest(struct recording *r, struct rtable *t, char *err,
		       size_t errlen)
{
	char *where = sqlite3_mprintf(
		"_rowid_ < (SELECT min(_rowid_) + (max(_rowid_) - "
		"min(_rowid_)) / 10 + 1 FROM \"%w\".\"%w\")",
		t->schema, t->name);
	int rc = where ? trim_sql(r, t, where, 0, err, errlen) : -ENOMEM;

	sqlite3_free(where);
	return rc;
}

int recording_trim(struct recording *r, double not_before, uint64_t max_bytes,
		   uint64_t *bytes, char *err, size_t errlen)
{
	uint64_t size = 0;
	int rc = disk_open(r, err, errlen);

	for (int i = 0; i < r->nt && !rc && not_before > 0; i++)
		if (r->t[i]->on_disk && r->t[i]->has_ts)
			rc = trim_sql(r, r->t[i], "ts < ?1", not_before, err,
				      errlen);
	if (!rc)
		rc = disk_commit(r, err, errlen);
	if (!rc)
		rc = total_bytes(r, &size, err, errlen);
	for (int round = 0;
	     !rc && max_bytes && size > max_bytes && round < TRIM_ROUNDS;
	     round++) {
		rc = disk_exec(r, "BEGIN", err, errlen);
		r->in_txn = !rc;
		for (int i = 0; i < r->nt && !rc; i++)
			if (r->t[i]->on_disk && r->t[i]->has_ts)
				rc = trim_oldest(r, r->t[i], err, errlen);
		if (!rc)
			rc = disk_commit(r, err, errlen);
		/* Freed pages go back to the file system. */
		for (size_t s = 0; s < NSCHEMAS && !rc; s++) {
			char *sql = sqlite3_mprintf(
				"PRAGMA \"%w\".incremental_vacuum;"
				"PRAGMA \"%w\".wal_checkpoint(TRUNCATE)",
				schemas[s], schemas[s]);

			rc = sql ? disk_exec(r, sql, err, errlen) : -ENOMEM;
			sqlite3_free(sql);
		}
		if (!rc)
			rc = total_bytes(r, &size, err, errlen);
	}
	if (rc && r->disk && (sqlite3_errcode(r->disk) & 0xff) == SQLITE_FULL)
		rc = -ENOSPC;
	disk_close(r);
	if (bytes)
		*bytes = size;
	return rc;
}

void recording_set_min_free(struct recording *r, uint64_t bytes)
{
	r->min_free = bytes;
}

void recording_stats(const struct recording *r, struct recording_stats *out)
{
	*out = r->stats;
}
