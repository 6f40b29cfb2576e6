/*
 * store: the agent's SQLite database (see store.h).
 *
 * Locking: the connection is opened in serialized mode; store_query,
 * store_exec, store_add_livetab and store_catalog_add hold the connection's
 * (recursive) mutex for their whole run, so the per-query state the progress
 * handler and the authorizer read (struct store.q) belongs to exactly one
 * call at a time.
 */
#include "store.h"
#include "errbuf.h"
#include "livetab.h"
#include "memtrim.h"
#include "recvfs.h"
#include "sqlfuncs.h"
#include "sqlhint.h"
#include "store_intern.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#define DEFAULT_ROWS 10000
#define MAX_ROWS 1000000
#define DEFAULT_TIMEOUT_MS 5000
#define MAX_TIMEOUT_MS 600000
#define DEFAULT_BYTES ((size_t)64 << 20)
#define MAX_BYTES ((size_t)1 << 30)
#define PROGRESS_OPS 1000
#define VALUE_MAX (64 << 20)  /* SQLITE_LIMIT_LENGTH */
#define SCRATCH_PAGES "65536" /* main and temp: 256 MiB of 4 KiB pages */
#define STORE_TRIM_BYTES ((sqlite3_int64)16 << 20) /* see give_memory_back */

static const char *const builtin_schemas[] = {
	"python", "process", "profile", "gpu", "app", "probing", "cluster"};

/* The state of the running call; valid while the db mutex is held. */
struct query_state {
	int restricted;	    /* store_query: apply the authorizer's rules */
	int read_only;	    /* and refuse every write, main and temp too */
	const char *denied; /* why the authorizer said no, or NULL */
	char why[128];	    /* a reason that names something */
	double deadline;    /* CLOCK_MONOTONIC ms; 0 = none */
	int timed_out;
};

struct store {
	sqlite3 *db;
	struct query_state q;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int progress_cb(void *arg)
{
	struct query_state *q = arg;

	if (q->deadline > 0 && now_ms() >= q->deadline) {
		q->timed_out = 1;
		return 1;
	}
	return 0;
}

static int is_builtin(const char *schema)
{
	if (!schema)
		return 0;
	for (size_t i = 0;
	     i < sizeof(builtin_schemas) / sizeof(*builtin_schemas); i++)
		if (sqlite3_stricmp(schema, builtin_schemas[i]) == 0)
			return 1;
	return 0;
}

/* PRAGMAs that take an argument yet only read. */
static int pragma_reads(const char *name)
{
	static const char *const ok[] = {
		"table_info",	     "table_xinfo",	"index_info",
		"index_xinfo",	     "index_list",	"foreign_key_list",
		"table_list",	     "integrity_check", "quick_check",
		"foreign_key_check",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++)
		if (sqlite3_stricmp(name, ok[i]) == 0)
			return 1;
	return 0;
}

/*
 * The SQL functions a query may call: SQLite's core, date and time, math,
 * window and JSON functions.  Everything else is refused, notably what
 * reaches raw pointers or the host (fts3_tokenizer, whose argument is a
 * function pointer; load_extension) and the full-text and R-tree
 * helpers, whose tables a query may not create anyway.
 */
static int function_allowed(const char *name)
{
	static const char *const ok[] = {
		"->", "->>", "abs", "acos", "acosh", "ago", "asin", "asinh", "atan",
		"atan2", "atanh", "avg", "ceil", "ceiling", "changes", "char",
		"coalesce", "cos", "cosh", "count", "cume_dist",
		"current_date", "current_time", "current_timestamp", "date",
		"datetime", "degrees", "dense_rank", "exp", "first_value",
		"floor", "format", "glob", "group_concat", "hex", "ifnull",
		"iif", "instr", "json", "json_array", "json_array_length",
		"json_each", "json_extract", "json_group_array",
		"json_group_object", "json_insert", "json_object",
		"json_patch", "json_quote", "json_remove", "json_replace",
		"json_set", "json_tree", "json_type", "json_valid",
		"julianday", "lag", "last_insert_rowid", "last_value", "lead",
		"length", "like", "likelihood", "likely", "ln", "log", "log10",
		"log2", "lower", "ltrim", "max", "min", "mod", "now", "nth_value",
		"ntile", "nullif", "percent_rank", "pi", "pow", "power",
		"printf", "quote", "radians", "random", "randomblob", "rank",
		"replace", "round", "row_number", "rtrim", "sign", "sin",
		"sinh", "soundex", "sqlite_source_id", "sqlite_version",
		"sqrt", "strftime", "substr", "substring", "sum", "tan",
		"tanh", "time", "total", "total_changes", "trim", "trunc",
		"typeof", "unicode", "unixepoch", "unlikely", "upper",
		"zeroblob",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(*ok); i++)
		if (sqlite3_stricmp(name, ok[i]) == 0)
			return 1;
	return 0;
}

/*
 * The rules of store_query (store.h); store_exec is trusted.  Reasons are
 * kept so the error says more than SQLite's "not authorized".
 */
static int authorizer(void *arg, int action, const char *a3, const char *a4,
		      const char *dbname, const char *inner)
{
	struct query_state *q = arg;
	const char *why = NULL;

	(void)inner;
	if (!q->restricted)
		return SQLITE_OK;
	switch (action) {
	case SQLITE_ATTACH:
		why = "ATTACH is not allowed in queries";
		break;
	case SQLITE_DETACH:
		why = "DETACH is not allowed in queries";
		break;
	case SQLITE_TRANSACTION:
	case SQLITE_SAVEPOINT:
		why = "transactions are not allowed in queries "
		      "(each query commits on its own)";
		break;
	case SQLITE_CREATE_TRIGGER:
	case SQLITE_CREATE_TEMP_TRIGGER:
		why = "triggers are not allowed";
		break;
	case SQLITE_FUNCTION:
		if (!a4 || !function_allowed(a4)) {
			snprintf(q->why, sizeof(q->why),
				 "the function %.64s() is not allowed in "
				 "queries",
				 a4 ? a4 : "?");
			why = q->why;
		}
		break;
	case SQLITE_CREATE_VTABLE:
	case SQLITE_DROP_VTABLE:
		why = "virtual tables cannot be created or dropped in queries";
		break;
	case SQLITE_PRAGMA:
		if (a4 && !pragma_reads(a3))
			why = "PRAGMAs that set a value are not allowed in "
			      "queries";
		break;
	case SQLITE_CREATE_TEMP_INDEX:
	case SQLITE_CREATE_TEMP_TABLE:
	case SQLITE_CREATE_TEMP_VIEW:
	case SQLITE_DROP_TEMP_INDEX:
	case SQLITE_DROP_TEMP_TABLE:
	case SQLITE_DROP_TEMP_VIEW:
	case SQLITE_DROP_TEMP_TRIGGER:
	case SQLITE_INSERT:
	case SQLITE_UPDATE:
	case SQLITE_DELETE:
	case SQLITE_CREATE_INDEX:
	case SQLITE_CREATE_TABLE:
	case SQLITE_CREATE_VIEW:
	case SQLITE_DROP_INDEX:
	case SQLITE_DROP_TABLE:
	case SQLITE_DROP_VIEW:
	case SQLITE_DROP_TRIGGER:
	case SQLITE_ALTER_TABLE:
		/* ALTER TABLE passes its schema as a3; the others as dbname. */
		if (q->read_only)
			why = "read-only mode: queries may not create or "
			      "write tables";
		else if (is_builtin(dbname) ||
		    (action == SQLITE_ALTER_TABLE && is_builtin(a3)))
			why = "the built-in schemas (python, process, profile, "
			      "gpu, app, probing, cluster) are read-only "
			      "(app's tables take rows from the program: "
			      "probing.table); write in main or temp";
		break;
	default:
		break;
	}
	if (why) {
		q->denied = why;
		return SQLITE_DENY;
	}
	return SQLITE_OK;
}

static int exec_locked(struct store *st, const char *sql, char *err,
		       size_t errlen)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		errbuf_set(err, errlen, "%s", sqlite3_errmsg(st->db));
		return rc == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
	}
	return 0;
}

static int catalog_add_locked(struct store *st, const char *schema,
			      const char *name, const char *kind,
			      const char *doc, char *err, size_t errlen)
{
	sqlite3_stmt *stmt = NULL;
	int rc;

	rc = sqlite3_prepare_v2(
		st->db,
		"INSERT INTO probing.tables(schema, name, kind, "
		"doc) VALUES (?1, ?2, ?3, ?4)",
		-1, &stmt, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(stmt, 1, schema, -1, SQLITE_STATIC);
		sqlite3_bind_text(stmt, 2, name, -1, SQLITE_STATIC);
		sqlite3_bind_text(stmt, 3, kind ? kind : "recorded", -1,
				  SQLITE_STATIC);
		sqlite3_bind_text(stmt, 4, doc, -1, SQLITE_STATIC);
		rc = sqlite3_step(stmt);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc != SQLITE_OK)
		errbuf_set(err, errlen, "%s", sqlite3_errmsg(st->db));
	sqlite3_finalize(stmt);
	if (rc == SQLITE_NOMEM)
		return -ENOMEM;
	return rc == SQLITE_OK ? 0 : STORE_ESQL;
}

/*
 * fork(): SQLite's global mutexes (memory statistics, the page cache,
 * the unix VFS) are held for moments by whatever thread uses SQLite.  A
 * child forked in such a moment inherits the mutex locked by a thread it
 * does not have, and its first SQLite call (a restarted agent's store)
 * waits forever.  So the forking thread takes them all before the fork
 * and lets them go after it, in the parent and in the child.  The order
 * is the one SQLite nests them in (an outer one may be held while an
 * inner one is taken, never the reverse), so taking them cannot
 * deadlock with a thread that holds some.
 */
static const int fork_mutexes[] = {
	SQLITE_MUTEX_STATIC_MAIN, SQLITE_MUTEX_STATIC_OPEN,
	SQLITE_MUTEX_STATIC_PRNG, SQLITE_MUTEX_STATIC_VFS1,
	SQLITE_MUTEX_STATIC_VFS2, SQLITE_MUTEX_STATIC_VFS3,
	SQLITE_MUTEX_STATIC_LRU,  SQLITE_MUTEX_STATIC_PMEM,
	SQLITE_MUTEX_STATIC_MEM,
};
#define NFORK_MUTEXES (sizeof(fork_mutexes) / sizeof(fork_mutexes[0]))

static void fork_prepare(void)
{
	for (size_t i = 0; i < NFORK_MUTEXES; i++)
		sqlite3_mutex_enter(sqlite3_mutex_alloc(fork_mutexes[i]));
}

static void fork_done(void)
{
	for (size_t i = NFORK_MUTEXES; i-- > 0;)
		sqlite3_mutex_leave(sqlite3_mutex_alloc(fork_mutexes[i]));
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_register(void)
{
	pthread_atfork(fork_prepare, fork_done, fork_done);
}

/* A connection with the store's rules: no extensions, DEFENSIVE, the
 * authorizer and Probing's functions; main and temp bounded. */
static int open_conn(struct store **out, char *err, size_t errlen)
{
	struct store *st;
	int rc;

	*out = NULL;
	if (!sqlite3_threadsafe()) {
		errbuf_set(err, errlen, "SQLite was built without thread safety");
		return STORE_ESQL;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = sqlite3_open_v2(":memory:", &st->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_URI,
			     NULL);
	if (rc != SQLITE_OK) {
		errbuf_set(err, errlen, "%s",
			st->db ? sqlite3_errmsg(st->db) : "out of memory");
		rc = rc == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
		goto fail;
	}
	/* SQLite is initialised now: its static mutexes exist. */
	pthread_once(&fork_once, fork_register);
	if (!sqlite3_db_mutex(st->db)) {
		/* Someone set SQLITE_CONFIG_SINGLETHREAD in this process. */
		errbuf_set(err, errlen, "SQLite is in single-thread mode");
		rc = STORE_ESQL;
		goto fail;
	}
	sqlite3_db_config(st->db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0,
			  NULL);
	sqlite3_db_config(st->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	/* fts3_tokenizer(name, ptr) takes a raw function pointer. */
	sqlite3_db_config(st->db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0,
			  NULL);
	sqlite3_db_config(st->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, VALUE_MAX);
	rc = exec_locked(st,
			 "PRAGMA temp_store = MEMORY;"
			 "PRAGMA main.max_page_count = " SCRATCH_PAGES ";"
			 "PRAGMA temp.max_page_count = " SCRATCH_PAGES ";",
			 err, errlen);
	if (rc)
		goto fail;
	/* The bounded like(), instr(), replace(), trim() ask the running
	 * query's deadline (sqlfuncs.h): one call of SQLite's own may run
	 * past it, as the progress handler only runs between instructions. */
	if (sqlfuncs_register(st->db) != SQLITE_OK ||
	    sqlfuncs_register_bounded(st->db, progress_cb, &st->q) !=
		    SQLITE_OK) {
		errbuf_set(err, errlen, "%s", sqlite3_errmsg(st->db));
		rc = STORE_ESQL;
		goto fail;
	}
	*out = st;
	return 0;
fail:
	sqlite3_close_v2(st->db);
	free(st);
	return rc;
}

/* The catalog, and the authorizer from now on. */
static int finish(struct store *st, char *err, size_t errlen)
{
	int rc = exec_locked(st,
			     "CREATE TABLE probing.tables(schema TEXT, name "
			     "TEXT, kind TEXT, doc TEXT);",
			     err, errlen);

	if (!rc)
		rc = catalog_add_locked(st, "probing", "tables", "catalog",
					"every table Probing provides", err,
					errlen);
	if (!rc)
		sqlite3_set_authorizer(st->db, authorizer, &st->q);
	return rc;
}

int store_new(struct store **out, char *err, size_t errlen)
{
	struct store *st;
	int rc = open_conn(&st, err, errlen);

	*out = NULL;
	if (rc)
		return rc;
	rc = exec_locked(st,
			 "ATTACH ':memory:' AS python;"
			 "ATTACH ':memory:' AS process;"
			 "ATTACH ':memory:' AS profile;"
			 "ATTACH ':memory:' AS gpu;"
			 "ATTACH ':memory:' AS app;"
			 "ATTACH ':memory:' AS probing;"
			 "ATTACH ':memory:' AS cluster;",
			 err, errlen);
	if (!rc)
		rc = finish(st, err, errlen);
	if (rc) {
		store_free(st);
		return rc;
	}
	*out = st;
	return 0;
}

/* Attaches one file of a recording as schema, read-only (read-write
 * when its WAL has no index to read it by: SQLite then rebuilds it), or
 * an empty schema when there is no file. */
static int attach_recorded(struct store *st, const char *dir,
			   const char *schema, char *err, size_t errlen)
{
	char path[4200];
	int rc = STORE_ESQL;

	snprintf(path, sizeof(path), "%s/%s.db", dir, schema);
	if (access(path, F_OK) < 0) {
		char *sql =
			sqlite3_mprintf("ATTACH ':memory:' AS \"%w\"", schema);

		rc = sql ? exec_locked(st, sql, err, errlen) : -ENOMEM;
		sqlite3_free(sql);
		return rc;
	}
	for (size_t m = 0; m < 2 && rc; m++) {
		char *uri = recvfs_uri(path, m ? "mode=rw" : "mode=ro");
		char *sql = uri ? sqlite3_mprintf("ATTACH %Q AS \"%w\"", uri,
						  schema)
				: NULL;

		rc = sql ? exec_locked(st, sql, err, errlen) : -ENOMEM;
		sqlite3_free(sql);
		free(uri);
		/* A file that is not SQLite's says so at its first read. */
		if (!rc) {
			sql = sqlite3_mprintf("SELECT count(*) FROM "
					      "\"%w\".sqlite_master",
					      schema);
			rc = sql ? exec_locked(st, sql, err, errlen) : -ENOMEM;
			sqlite3_free(sql);
			if (rc) {
				sql = sqlite3_mprintf("DETACH \"%w\"", schema);
				if (sql)
					sqlite3_exec(st->db, sql, NULL, NULL,
						     NULL);
				sqlite3_free(sql);
			}
		}
	}
	if (rc)
		errbuf_set(err, errlen, "%s: %s", path, sqlite3_errmsg(st->db));
	return rc;
}

int store_open_recording(const char *dir, struct store **out, char *err,
			 size_t errlen)
{
	static const char *const schemas[] = {"python", "process", "profile",
					      "gpu", "app"};
	const size_t nschemas = sizeof(schemas) / sizeof(schemas[0]);
	struct store *st;
	sqlite3_stmt *q = NULL;
	int rc = open_conn(&st, err, errlen);

	*out = NULL;
	if (rc)
		return rc;
	for (size_t i = 0; i < nschemas && !rc; i++)
		rc = attach_recorded(st, dir, schemas[i], err, errlen);
	if (!rc)
		rc = exec_locked(st,
				 "ATTACH ':memory:' AS probing;"
				 "ATTACH ':memory:' AS cluster;",
				 err, errlen);
	if (!rc)
		rc = finish(st, err, errlen);
	/* Every table of the files, in the catalog. */
	for (size_t i = 0; i < nschemas && !rc; i++) {
		char *sql = sqlite3_mprintf(
			"SELECT name FROM \"%w\".sqlite_master WHERE type = "
			"'table' ORDER BY name",
			schemas[i]);

		rc = sql && sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) ==
					     SQLITE_OK
			     ? 0
			     : STORE_ESQL;
		sqlite3_free(sql);
		while (!rc && sqlite3_step(q) == SQLITE_ROW)
			rc = catalog_add_locked(
				st, schemas[i],
				(const char *)sqlite3_column_text(q, 0), NULL,
				NULL, err, errlen);
		sqlite3_finalize(q);
		q = NULL;
	}
	if (rc) {
		store_free(st);
		return rc;
	}
	*out = st;
	return 0;
}

/* Attaches a rank's file of schema as "global_src" (read-only). */
static int attach_src(struct store *st, const char *dir, const char *schema,
		      char *err, size_t errlen)
{
	char path[4200], *uri, *sql;
	int rc;

	snprintf(path, sizeof(path), "%s/%s.db", dir, schema);
	if (access(path, R_OK) < 0) {
		errbuf_set(err, errlen, "no %s.db", schema);
		return -ENOENT;
	}
	uri = recvfs_uri(path, "mode=ro");
	sql = uri ? sqlite3_mprintf("ATTACH %Q AS global_src", uri) : NULL;
	rc = sql ? exec_locked(st, sql, err, errlen) : -ENOMEM;
	sqlite3_free(sql);
	free(uri);
	return rc;
}

int store_gather_recorded(struct store *st, const char *name,
			  const char *schema, const char *table,
			  const struct store_source *src, size_t n,
			  size_t max_rows, char *notes, size_t noteslen,
			  char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	int saved, made = 0, rc = 0;
	size_t nl = 0;

	if (noteslen)
		notes[0] = 0;
	sqlite3_mutex_enter(mu);
	saved = st->q.restricted;
	st->q.restricted = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		char why[256], *sql;
		int one, attached;

		one = attach_src(st, src[i].dir, schema, why, sizeof(why));
		attached = one == 0;
		/* The first rank that has it gives the columns. */
		if (!one && !made) {
			sql = sqlite3_mprintf(
				"CREATE TEMP TABLE \"%w\" AS "
				"SELECT 0 AS _rank, '' AS _host, "
				"* FROM global_src.\"%w\" WHERE 0",
				name, table);
			one = sql ? exec_locked(st, sql, why, sizeof(why))
				  : -ENOMEM;
			sqlite3_free(sql);
		}
		if (!one) {
			sql = sqlite3_mprintf(
				"INSERT INTO temp.\"%w\" SELECT "
				"%lld, %Q, * FROM global_src.\"%w\" "
				"LIMIT %lld",
				name, (long long)src[i].rank, src[i].host,
				table, (long long)max_rows);
			one = sql ? exec_locked(st, sql, why, sizeof(why))
				  : -ENOMEM;
			sqlite3_free(sql);
			made |= one == 0;
		}
		if (attached)
			sqlite3_exec(st->db, "DETACH global_src", NULL, NULL,
				     NULL);
		if (one == -ENOMEM)
			rc = -ENOMEM;
		else if (one && nl < noteslen)
			nl += (size_t)snprintf(notes + nl, noteslen - nl,
					       "%sglobal.%s.%s: rank %lld: %s",
					       nl ? "\n" : "", schema, table,
					       (long long)src[i].rank, why);
	}
	if (!rc && !made) {
		errbuf_set(err, errlen,
			   "global.%s.%s: no rank's recording has "
			   "it",
			   schema, table);
		rc = STORE_ESQL;
	}
	st->q.restricted = saved;
	sqlite3_mutex_leave(mu);
	return rc;
}

void store_free(struct store *st)
{
	if (!st)
		return;
	sqlite3_close_v2(st->db);
	free(st);
}

int store_add_livetab(struct store *st, const struct livetab *tab, void *ctx,
		      char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	int saved, rc;

	if (!tab || !tab->schema || !tab->name) {
		errbuf_set(err, errlen, "livetab: incomplete table description");
		return -EINVAL;
	}
	sqlite3_mutex_enter(mu);
	saved = st->q.restricted;
	st->q.restricted = 0;
	/* Registering again would replace the module of the existing table. */
	if (sqlite3_table_column_metadata(st->db, tab->schema, tab->name, NULL,
					  NULL, NULL, NULL, NULL,
					  NULL) == SQLITE_OK) {
		errbuf_set(err, errlen, "table %s.%s already exists", tab->schema,
			tab->name);
		rc = STORE_ESQL;
		goto out;
	}
	rc = livetab_register(st->db, tab, ctx, err, errlen);
	if (rc) {
		if (rc == -EINVAL)
			rc = STORE_ESQL;
		goto out;
	}
	rc = catalog_add_locked(st, tab->schema, tab->name, "live", tab->doc,
				err, errlen);
	if (rc) {
		char *sql = sqlite3_mprintf("DROP TABLE \"%w\".\"%w\"",
					    tab->schema, tab->name);

		if (sql)
			sqlite3_exec(st->db, sql, NULL, NULL, NULL);
		sqlite3_free(sql);
	}
out:
	st->q.restricted = saved;
	sqlite3_mutex_leave(mu);
	return rc;
}

int store_exec(struct store *st, const char *sql, char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	int saved, rc;

	sqlite3_mutex_enter(mu);
	saved = st->q.restricted; /* a snapshot may call in mid-query */
	st->q.restricted = 0;
	rc = exec_locked(st, sql, err, errlen);
	st->q.restricted = saved;
	sqlite3_mutex_leave(mu);
	return rc;
}

int store_catalog_add(struct store *st, const char *schema, const char *name,
		      const char *kind, const char *doc)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	int rc;

	if (!schema || !name)
		return STORE_ESQL;
	sqlite3_mutex_enter(mu);
	rc = catalog_add_locked(st, schema, name, kind, doc, NULL, 0);
	sqlite3_mutex_leave(mu);
	return rc;
}

sqlite3 *store_sqlite(struct store *st)
{
	return st->db;
}

int store_lock(struct store *st)
{
	int saved;

	sqlite3_mutex_enter(sqlite3_db_mutex(st->db));
	saved = st->q.restricted;
	st->q.restricted = 0;
	return saved;
}

void store_unlock(struct store *st, int saved)
{
	st->q.restricted = saved;
	sqlite3_mutex_leave(sqlite3_db_mutex(st->db));
}

const char *store_type_name(enum store_type t)
{
	switch (t) {
	case STORE_NULL:
		return "NULL";
	case STORE_INT:
		return "INTEGER";
	case STORE_REAL:
		return "REAL";
	case STORE_TEXT:
		return "TEXT";
	case STORE_BLOB:
		return "BLOB";
	}
	return "?";
}

static void value_release(struct store_value *v)
{
	if (v->type == STORE_TEXT || v->type == STORE_BLOB)
		free(v->u.s.p);
	v->type = STORE_NULL;
}

void store_result_release(struct store_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->ncols; i++) {
		free(res->cols[i].name);
		free(res->cols[i].decltype);
	}
	free(res->cols);
	for (size_t i = 0; i < res->nrows * res->ncols; i++)
		value_release(&res->cells[i]);
	free(res->cells);
	memset(res, 0, sizeof(*res));
}

/* Skips whitespace, ';' and comments; true when nothing else is left. */
static int only_trailer(const char *p)
{
	while (*p) {
		if (*p == ';' || *p == ' ' || *p == '\t' || *p == '\n' ||
		    *p == '\r' || *p == '\f' || *p == '\v') {
			p++;
		} else if (p[0] == '-' && p[1] == '-') {
			while (*p && *p != '\n')
				p++;
		} else if (p[0] == '/' && p[1] == '*') {
			const char *e = strstr(p + 2, "*/");

			if (!e)
				return 1; /* SQLite too ends a comment at EOF */
			p = e + 2;
		} else {
			return 0;
		}
	}
	return 1;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static int take_columns(sqlite3_stmt *stmt, struct store_result *res)
{
	int n = sqlite3_column_count(stmt);

	if (n <= 0)
		return 0;
	res->cols = calloc((size_t)n, sizeof(*res->cols));
	if (!res->cols)
		return -ENOMEM;
	res->ncols = (size_t)n;
	for (int i = 0; i < n; i++) {
		res->cols[i].name = dup_or_empty(sqlite3_column_name(stmt, i));
		res->cols[i].decltype =
			dup_or_empty(sqlite3_column_decltype(stmt, i));
		if (!res->cols[i].name || !res->cols[i].decltype)
			return -ENOMEM;
	}
	return 0;
}

/* The bytes of s[0..len) as a JSON string (cJSON's escapes: two
 * characters for '"', '\\' and \b \f \n \r \t, six for the other
 * controls), quotes included. */
static size_t json_text_len(const unsigned char *s, size_t len)
{
	size_t n = len + 2;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\' || c == '\b' || c == '\f' ||
		    c == '\n' || c == '\r' || c == '\t')
			n += 1;
		else if (c < 0x20)
			n += 5;
	}
	return n;
}

/* What a TEXT or BLOB value counts against max_bytes: its copy, or in
 * JSON mode the larger of that and its JSON (resultjson.h: blobs in
 * hex). */
static size_t value_cost(int json, int type, const void *src, size_t len)
{
	size_t j;

	if (!json)
		return len + 1;
	j = type == SQLITE_BLOB ? 2 * len + 2 : json_text_len(src, len);
	return j > len + 1 ? j : len + 1;
}

/* Copies the current row into res; *bytes counts what the result holds.
 * A row that fails is not added. */
static int take_row(sqlite3_stmt *stmt, struct store_result *res,
		    size_t *capcells, size_t *bytes, size_t max_bytes, int json)
{
	/* In JSON mode a cell also costs its separator and a number's
	 * longest text beyond struct store_value's size. */
	size_t per_cell = sizeof(struct store_value) + (json ? 2 : 0);
	size_t n = res->ncols, base = res->nrows * n;
	size_t need = base + n;
	size_t cost;
	int rc = 0;

	if (n == 0) {
		res->nrows++;
		return 0;
	}
	if (*bytes + n * per_cell > max_bytes)
		return STORE_EFULL;
	*bytes += n * per_cell;
	if (need > *capcells) {
		size_t ncap = *capcells ? *capcells * 2 : 64 * n;
		struct store_value *p;

		if (ncap < need)
			ncap = need;
		p = realloc(res->cells, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		res->cells = p;
		*capcells = ncap;
	}
	memset(&res->cells[base], 0, n * sizeof(*res->cells));
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct store_value *v = &res->cells[base + i];
		int t = sqlite3_column_type(stmt, (int)i);
		const void *src;
		size_t len;

		switch (t) {
		case SQLITE_INTEGER:
			v->type = STORE_INT;
			v->u.i = sqlite3_column_int64(stmt, (int)i);
			break;
		case SQLITE_FLOAT:
			v->type = STORE_REAL;
			v->u.d = sqlite3_column_double(stmt, (int)i);
			break;
		case SQLITE_TEXT:
		case SQLITE_BLOB:
			src = t == SQLITE_TEXT
				      ? (const void *)sqlite3_column_text(
						stmt, (int)i)
				      : sqlite3_column_blob(stmt, (int)i);
			len = (size_t)sqlite3_column_bytes(stmt, (int)i);
			if (!src && (t == SQLITE_TEXT || len > 0)) {
				rc = -ENOMEM;
				break;
			}
			cost = value_cost(json, t, src, len);
			if (*bytes + cost > max_bytes) {
				rc = STORE_EFULL;
				break;
			}
			v->u.s.p = malloc(len + 1);
			if (!v->u.s.p) {
				rc = -ENOMEM;
				break;
			}
			if (len)
				memcpy(v->u.s.p, src, len);
			v->u.s.p[len] = '\0';
			v->u.s.len = len;
			v->type = t == SQLITE_TEXT ? STORE_TEXT : STORE_BLOB;
			*bytes += cost;
			break;
		default:
			v->type = STORE_NULL;
			break;
		}
	}
	if (rc) {
		for (size_t i = 0; i < n; i++)
			value_release(&res->cells[base + i]);
		return rc;
	}
	res->nrows++;
	return 0;
}

static int query_locked(struct store *st, const char *sql,
			const struct store_limits *lim,
			struct store_result *res, int *wrote, char *err,
			size_t errlen)
{
	int json = lim && lim->json;
	size_t max_rows = lim && lim->max_rows ? lim->max_rows : DEFAULT_ROWS;
	size_t max_bytes =
		lim && lim->max_bytes ? lim->max_bytes : DEFAULT_BYTES;
	int timeout = lim && lim->timeout_ms > 0 ? lim->timeout_ms
						 : DEFAULT_TIMEOUT_MS;
	sqlite3_stmt *stmt = NULL;
	const char *tail = NULL;
	size_t capcells = 0, bytes = 0;
	int rc, src;

	if (max_rows > MAX_ROWS)
		max_rows = MAX_ROWS;
	if (max_bytes > MAX_BYTES)
		max_bytes = MAX_BYTES;
	if (timeout > MAX_TIMEOUT_MS)
		timeout = MAX_TIMEOUT_MS;

	src = sqlite3_prepare_v2(st->db, sql, -1, &stmt, &tail);
	if (src != SQLITE_OK) {
		if (src == SQLITE_AUTH && st->q.denied)
			errbuf_set(err, errlen, "not authorized: %s",
				st->q.denied);
		else if (st->q.timed_out)
			goto timeout;
		else
			sqlhint_explain(st->db, sql, sqlite3_errmsg(st->db), 1,
					err, errlen);
		return src == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
	}
	if (!stmt) {
		errbuf_set(err, errlen, "empty statement");
		return STORE_ESQL;
	}
	if (tail && !only_trailer(tail)) {
		errbuf_set(err, errlen, "only one statement allowed");
		rc = STORE_ESQL;
		goto out;
	}
	/* 1: read-only; 2: writes (scratch tables) — what may have taken
	 * memory worth giving back when it is over or fails. */
	*wrote = sqlite3_stmt_readonly(stmt) ? 1 : 2;
	rc = take_columns(stmt, res);
	if (rc)
		goto nomem;
	for (;;) {
		src = sqlite3_step(stmt);
		if (src != SQLITE_ROW)
			break;
		if (res->nrows >= max_rows) {
			res->truncated = 1;
			src = SQLITE_DONE;
			break;
		}
		rc = take_row(stmt, res, &capcells, &bytes, max_bytes, json);
		if (rc == STORE_EFULL) {
			res->truncated = 1;
			errbuf_set(err, errlen,
				"result larger than %zu bytes; "
				"select fewer rows or columns",
				max_bytes);
			goto out;
		}
		if (rc)
			goto nomem;
	}
	if (src != SQLITE_DONE) {
		if (st->q.timed_out)
			goto timeout;
		if (src == SQLITE_AUTH && st->q.denied) /* VACUUM INTO */
			errbuf_set(err, errlen, "not authorized: %s",
				st->q.denied);
		else if (src == SQLITE_TOOBIG &&
			 sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, -1) <
				 VALUE_MAX) /* the caller's max_value */
			errbuf_set(
				err, errlen,
				"string or blob too big: a value longer "
				"than %d bytes (the most one value of a "
				"query may be here)",
				sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, -1));
		else
			sqlhint_explain(st->db, sql, sqlite3_errmsg(st->db), 0,
					err, errlen);
		rc = src == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
		goto out;
	}
	rc = 0;
	goto out;
timeout:
	res->truncated = 1;
	errbuf_set(err, errlen, "query stopped after %d ms", timeout);
	rc = STORE_ETIMEOUT;
	goto out;
nomem:
	errbuf_set(err, errlen, "out of memory");
	rc = -ENOMEM;
out:
	sqlite3_finalize(stmt);
	return rc;
}

/*
 * After a statement that failed or wrote (scratch tables made, filled,
 * dropped): SQLite's pages that are free go back to malloc, and malloc's
 * free pages go back to the system.  Each agent thread has its own
 * malloc arena (glibc): a failed 256 MiB CREATE TABLE ... AS left 256 MiB
 * free in the arena of the worker that ran it, which no other thread
 * reuses — four workers, a gigabyte kept for the life of the process.
 * The database mutex held (for sqlite3_db_release_memory).  SQLite's
 * high-water mark is reset here, so it measures the statements since the
 * last one that failed or wrote.
 */
static void give_memory_back(struct store *st)
{
	sqlite3_int64 cur, high;

	sqlite3_db_release_memory(st->db);
	/* malloc's pages only after a statement that used a lot (memtrim.h:
	 * a trim walks the program's heap too). */
	if (sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &cur, &high, 1) ==
		    SQLITE_OK &&
	    high >= STORE_TRIM_BYTES)
		memtrim_ask();
}

int store_query(struct store *st, const char *sql,
		const struct store_limits *lim, struct store_result *res,
		char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	struct query_state saved;
	double start;
	int timeout = lim && lim->timeout_ms > 0 ? lim->timeout_ms
						 : DEFAULT_TIMEOUT_MS;
	int value_max =
		lim && lim->max_value > 0 && lim->max_value < (size_t)VALUE_MAX
			? (int)lim->max_value
			: VALUE_MAX;
	int rc, wrote = 0, prev_len; /* wrote: see query_locked */

	memset(res, 0, sizeof(*res));
	if (!sql) {
		errbuf_set(err, errlen, "no SQL");
		return STORE_ESQL;
	}
	if (timeout > MAX_TIMEOUT_MS)
		timeout = MAX_TIMEOUT_MS;
	/* The time cap counts from the call, waiting for the mutex too: a
	 * query queued behind others stops at its own deadline. */
	start = now_ms();
	sqlite3_mutex_enter(mu);
	saved = st->q;
	st->q.restricted = 1;
	st->q.read_only = lim && lim->read_only;
	st->q.denied = NULL;
	st->q.timed_out = 0;
	st->q.deadline = start + timeout;
	/* A value longer than the caller can take is refused before it is
	 * built (randomblob(6e7): SQLite's copy, ours, the hex of it). */
	prev_len = sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, value_max);
	sqlite3_progress_handler(st->db, PROGRESS_OPS, progress_cb, &st->q);
	rc = query_locked(st, sql, lim, res, &wrote, err, errlen);
	if (saved.deadline > 0) /* nested in an outer query's snapshot */
		sqlite3_progress_handler(st->db, PROGRESS_OPS, progress_cb,
					 &st->q);
	else
		sqlite3_progress_handler(st->db, 0, NULL, NULL);
	sqlite3_limit(st->db, SQLITE_LIMIT_LENGTH, prev_len);
	st->q = saved;
	/* Only a statement that ran: a refused or malformed one took
	 * nothing, and costs no trim. */
	if ((rc && wrote) || wrote == 2)
		give_memory_back(st);
	res->elapsed_ms = now_ms() - start;
	sqlite3_mutex_leave(mu);
	return rc;
}

/*
 * Prepared statements (store.h).  Every call enters the (recursive)
 * database mutex, so one between store_begin and store_commit nests.
 */

struct store_stmt {
	struct store *st;
	sqlite3_stmt *stmt;
};

int store_stmt_new(struct store *st, const char *sql, struct store_stmt **out,
		   char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	struct store_stmt *s;
	int saved, rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->st = st;
	sqlite3_mutex_enter(mu);
	saved = st->q.restricted;
	st->q.restricted = 0;
	rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
				&s->stmt, NULL);
	st->q.restricted = saved;
	if (rc != SQLITE_OK || !s->stmt)
		errbuf_set(err, errlen, "%s",
			rc == SQLITE_OK ? "empty statement"
					: sqlite3_errmsg(st->db));
	sqlite3_mutex_leave(mu);
	if (rc != SQLITE_OK || !s->stmt) {
		sqlite3_finalize(s->stmt);
		free(s);
		return rc == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
	}
	*out = s;
	return 0;
}

void store_stmt_free(struct store_stmt *s)
{
	if (!s)
		return;
	sqlite3_finalize(s->stmt);
	free(s);
}

static int bind_rc(int rc)
{
	if (rc == SQLITE_OK)
		return 0;
	return rc == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
}

int store_stmt_int(struct store_stmt *s, int i, int64_t v)
{
	return bind_rc(sqlite3_bind_int64(s->stmt, i, v));
}

int store_stmt_real(struct store_stmt *s, int i, double v)
{
	return bind_rc(sqlite3_bind_double(s->stmt, i, v));
}

int store_stmt_text(struct store_stmt *s, int i, const char *v)
{
	if (!v)
		return store_stmt_null(s, i);
	return bind_rc(sqlite3_bind_text(s->stmt, i, v, -1, SQLITE_TRANSIENT));
}

int store_stmt_text_len(struct store_stmt *s, int i, const char *v,
		       size_t len)
{
	if (len > INT32_MAX)
		return -EINVAL;
	return bind_rc(sqlite3_bind_text(s->stmt, i, v, (int)len,
					 SQLITE_TRANSIENT));
}

int store_stmt_blob(struct store_stmt *s, int i, const void *v, size_t len)
{
	if (len > INT32_MAX)
		return -EINVAL;
	return bind_rc(sqlite3_bind_blob(s->stmt, i, v, (int)len,
					 SQLITE_TRANSIENT));
}

int store_stmt_null(struct store_stmt *s, int i)
{
	return bind_rc(sqlite3_bind_null(s->stmt, i));
}

/* Steps s to its end; *first gets the first row's first column. */
static int stmt_step(struct store_stmt *s, int64_t *first, char *err,
		     size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(s->st->db);
	int saved, rc, row = 0;

	sqlite3_mutex_enter(mu);
	saved = s->st->q.restricted;
	s->st->q.restricted = 0; /* a re-prepare runs the authorizer */
	while ((rc = sqlite3_step(s->stmt)) == SQLITE_ROW) {
		if (first && !row++)
			*first = sqlite3_column_int64(s->stmt, 0);
	}
	if (rc != SQLITE_DONE)
		errbuf_set(err, errlen, "%s", sqlite3_errmsg(s->st->db));
	sqlite3_reset(s->stmt);
	sqlite3_clear_bindings(s->stmt);
	s->st->q.restricted = saved;
	sqlite3_mutex_leave(mu);
	if (rc == SQLITE_DONE)
		return 0;
	return rc == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
}

int store_stmt_run(struct store_stmt *s, char *err, size_t errlen)
{
	return stmt_step(s, NULL, err, errlen);
}

int store_stmt_int_result(struct store_stmt *s, int64_t *out, char *err,
			  size_t errlen)
{
	*out = 0;
	return stmt_step(s, out, err, errlen);
}

int store_begin(struct store *st, char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	int rc;

	sqlite3_mutex_enter(mu);
	rc = store_exec(st, "BEGIN", err, errlen);
	if (rc)
		sqlite3_mutex_leave(mu);
	return rc;
}

int store_commit(struct store *st, char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
	int rc = store_exec(st, "COMMIT", err, errlen);

	if (rc)
		store_exec(st, "ROLLBACK", NULL, 0);
	sqlite3_mutex_leave(mu);
	return rc;
}

void store_rollback(struct store *st)
{
	store_exec(st, "ROLLBACK", NULL, 0);
	sqlite3_mutex_leave(sqlite3_db_mutex(st->db));
}

int store_stmt_step(struct store_stmt *s, char *err, size_t errlen)
{
	sqlite3_mutex *mu = sqlite3_db_mutex(s->st->db);
	int saved, rc;

	sqlite3_mutex_enter(mu);
	saved = s->st->q.restricted;
	s->st->q.restricted = 0;
	rc = sqlite3_step(s->stmt);
	if (rc != SQLITE_ROW) {
		if (rc != SQLITE_DONE)
			errbuf_set(err, errlen, "%s", sqlite3_errmsg(s->st->db));
		sqlite3_reset(s->stmt);
		sqlite3_clear_bindings(s->stmt);
	}
	s->st->q.restricted = saved;
	sqlite3_mutex_leave(mu);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return rc == SQLITE_NOMEM ? -ENOMEM : STORE_ESQL;
}

void store_stmt_reset(struct store_stmt *s)
{
	sqlite3_reset(s->stmt);
	sqlite3_clear_bindings(s->stmt);
}

int64_t store_stmt_col_int(struct store_stmt *s, int col)
{
	return sqlite3_column_int64(s->stmt, col);
}

double store_stmt_col_real(struct store_stmt *s, int col)
{
	return sqlite3_column_double(s->stmt, col);
}

const char *store_stmt_col_text(struct store_stmt *s, int col)
{
	return (const char *)sqlite3_column_text(s->stmt, col);
}

int store_stmt_col_null(struct store_stmt *s, int col)
{
	return sqlite3_column_type(s->stmt, col) == SQLITE_NULL;
}
