/*
 * store: the agent's SQLite database.
 *
 * One in-memory database per agent, with the schemas `python`, `process`,
 * `profile`, `probing` attached (each its own in-memory database).  Live
 * tables are virtual tables (see livetab.h) created in those schemas.
 *
 * Threads: a store may be used from any thread; SQLite's serialized mode
 * makes one statement run at a time.  store_query() never calls back into
 * anything but the live tables' snapshot functions.
 */
#ifndef STORE_H
#define STORE_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct livetab;

/* Project error codes (negative). */
enum {
	STORE_ESQL = -2000,      /* SQLite rejected the statement: see err */
	STORE_ETIMEOUT = -2001,  /* query ran past its time cap */
	STORE_EFULL = -2002,     /* result past its byte cap */
};

enum store_type { STORE_NULL = 0, STORE_INT, STORE_REAL, STORE_TEXT, STORE_BLOB };

struct store_value {
	enum store_type type;
	union {
		int64_t i;
		double d;
		struct { char *p; size_t len; } s;  /* TEXT (NUL-terminated) and BLOB; owned */
	} u;
};

struct store_column {
	char *name;        /* owned */
	char *decltype;    /* owned; declared type or "" */
};

/* A query's result: ncols columns, nrows rows of values, row-major. */
struct store_result {
	struct store_column *cols;
	size_t ncols;
	struct store_value *cells;   /* nrows * ncols */
	size_t nrows;
	int truncated;               /* more rows than max_rows */
	double elapsed_ms;
};

/* Limits of one query; values past the hard maxima are clamped to them. */
struct store_limits {
	size_t max_rows;     /* 0 = default 10000; at most 1000000 */
	int timeout_ms;      /* <= 0 = default 5000; at most 600000; the
			      * progress handler stops it */
	size_t max_bytes;    /* 0 = default 64 MiB; at most 1 GiB: text/blob
			      * bytes (+1 per TEXT/BLOB for the NUL) plus
			      * sizeof(struct store_value) per cell */
	int read_only;       /* refuse every write and DDL, main and temp
			      * too (a read-only session's query) */
	size_t max_value;    /* 0 = 64 MiB, the most: the longest string or
			      * blob the statement may make or read
			      * (SQLITE_LIMIT_LENGTH while it runs) */
	int json;            /* count TEXT and BLOB values against
			      * max_bytes at their size in resultjson's
			      * JSON when that is more (blobs in hex, text
			      * escaped), and 2 more bytes per cell: a
			      * result under max_bytes is a reply under
			      * max_bytes plus its frame */
};

/* Opens the database and attaches the schemas.  Returns 0 and a new store,
 * or -errno / STORE_ESQL with err.  The first call also makes fork()
 * wait for SQLite's global mutexes (store.c), so that a child never
 * inherits one locked and can open a store of its own. */
int store_new(struct store **out, char *err, size_t errlen);
/*
 * Opens a recording (a directory of sql/recording.h) for reading: its
 * files attached read-only under their schemas' names (an empty schema
 * for a file it does not have), probing.tables listing their tables.
 * store_query answers as the agent's store does; the live tables are not
 * there.  0 with *out, or -ENOMEM / STORE_ESQL with err.
 */
int store_open_recording(const char *dir, struct store **out, char *err,
			 size_t errlen);

/*
 * For a reader of a finished job's recordings (the `global` schema):
 * makes temp table name of table schema.table of each recording
 * src[i].dir, its rows tagged _rank and _host, at most max_rows of each.
 * A recording without the table is left out and said in notes (lines).
 * 0, or STORE_ESQL (none has it) / -ENOMEM with err.
 */
struct store_source {
	const char *dir;
	int64_t rank;
	const char *host;
};

int store_gather_recorded(struct store *st, const char *name,
			  const char *schema, const char *table,
			  const struct store_source *src, size_t n,
			  size_t max_rows, char *notes, size_t noteslen,
			  char *err, size_t errlen);

/* Closes the database.  No other thread may be using st.  NULL is a no-op. */
void store_free(struct store *st);

/*
 * Creates a live table: registers tab's module and runs CREATE VIRTUAL
 * TABLE <schema>.<name>.  tab must outlive the store (static const).
 * Also lists it in probing.tables.
 */
int store_add_livetab(struct store *st, const struct livetab *tab, void *ctx,
		      char *err, size_t errlen);

/*
 * Runs one SQL statement (a trailing ';', whitespace and comments allowed; a
 * second statement is an error).  Fills res (caller releases with
 * store_result_release, also after failure).  Returns 0, STORE_ESQL with
 * SQLite's message, STORE_ETIMEOUT, STORE_EFULL, or -ENOMEM.  After
 * STORE_ETIMEOUT or STORE_EFULL, res holds the columns and the whole rows
 * collected before the cap, with truncated = 1.
 *
 * The time cap counts from the call (the wait for the database mutex
 * included) and holds inside single calls too: SQLite's progress handler
 * stops the statement between instructions, and like(), glob(),
 * instr(), replace() and trim() are bounded versions (sqlfuncs.h) that
 * ask the deadline themselves.  After a statement that fails or writes,
 * the memory it freed goes back to the system (sqlite3_db_release_memory,
 * malloc_trim): scratch tables that failed keep nothing.
 *
 * Queries may read everything and write in schemas main and temp (scratch
 * space for analysis) unless lim->read_only.  Refused with a message:
 * ATTACH, DETACH, writes and DDL in the built-in schemas, triggers,
 * virtual tables created or dropped, BEGIN/COMMIT/SAVEPOINT, PRAGMAs that
 * set a value, and every function but SQLite's core, date/time, math,
 * window and JSON ones (no load_extension(), no fts3_tokenizer(): the
 * FTS3 tokenizer pointer and untrusted schemas are also switched off, and
 * the database is DEFENSIVE).  The whole query, snapshots
 * included, holds the database mutex: other threads' calls wait.
 */
int store_query(struct store *st, const char *sql,
		const struct store_limits *lim, struct store_result *res,
		char *err, size_t errlen);

/* Runs SQL with no result (schema set-up, inserts by recorders).  Several
 * statements allowed; trusted: no time cap and none of store_query's
 * refusals.  Returns 0 or STORE_ESQL with SQLite's message. */
int store_exec(struct store *st, const char *sql, char *err, size_t errlen);

/* Registers a recorded (ordinary) table in the catalog, probing.tables.
 * kind NULL means "recorded"; doc may be NULL.  Returns 0 or STORE_ESQL. */
int store_catalog_add(struct store *st, const char *schema, const char *name,
		      const char *kind, const char *doc);

/*
 * Prepared statements for recorders: trusted like store_exec (none of
 * store_query's refusals, no time cap).  Prepare once, then bind and run
 * many times; a batch goes between store_begin() and store_commit(), one
 * transaction, so that readers see whole batches and inserts are cheap.
 *
 *   store_stmt_new(st, "INSERT INTO profile.samples VALUES (?1, ?2)", &s,
 *                  err, sizeof(err));
 *   store_begin(st, err, sizeof(err));
 *   for (...) { store_stmt_int(s, 1, ts); store_stmt_text(s, 2, name);
 *               store_stmt_run(s, err, sizeof(err)); }
 *   store_commit(st, err, sizeof(err));
 *
 * Parameters are numbered from 1.  A statement belongs to its store and
 * is freed before it (store_stmt_free).  Threads: as the store; between
 * store_begin and store_commit/store_rollback the calling thread holds
 * the database mutex, so other threads' calls wait: keep batches short.
 */
struct store_stmt;

/* Prepares one statement.  Returns 0 with *out, or STORE_ESQL / -ENOMEM
 * with err. */
int store_stmt_new(struct store *st, const char *sql, struct store_stmt **out,
		   char *err, size_t errlen);
/* NULL is a no-op. */
void store_stmt_free(struct store_stmt *s);

/* Bind parameter i (1-based).  Text is copied.  0 or STORE_ESQL (no such
 * parameter) / -ENOMEM. */
int store_stmt_int(struct store_stmt *s, int i, int64_t v);
int store_stmt_real(struct store_stmt *s, int i, double v);
int store_stmt_text(struct store_stmt *s, int i, const char *v);
int store_stmt_null(struct store_stmt *s, int i);
/* len bytes of UTF-8 (NULs kept), or of a blob; copied. */
int store_stmt_text_len(struct store_stmt *s, int i, const char *v,
		       size_t len);
int store_stmt_blob(struct store_stmt *s, int i, const void *v, size_t len);

/* Runs the statement to its end (rows it returns are ignored), then
 * resets it and clears its bindings.  0 or STORE_ESQL / -ENOMEM with
 * err. */
int store_stmt_run(struct store_stmt *s, char *err, size_t errlen);

/* Runs the statement and gives the first column of its first row as an
 * integer in *out (0 when there is no row); resets it.  0 or STORE_ESQL /
 * -ENOMEM with err. */
int store_stmt_int_result(struct store_stmt *s, int64_t *out, char *err,
			  size_t errlen);

/*
 * Reading rows: steps s to its next row.  Returns 1 with a row (read its
 * columns with store_stmt_col_*), 0 at the end, or STORE_ESQL / -ENOMEM
 * with err; at the end or on error the statement is reset and its
 * bindings cleared.  store_stmt_reset() ends a read early.  For a
 * consistent read of several statements, run them between store_begin()
 * and store_commit() (other threads then wait).  Columns are 0-based;
 * text stays valid until the next step or reset (NULL for SQL NULL).
 */
int store_stmt_step(struct store_stmt *s, char *err, size_t errlen);
void store_stmt_reset(struct store_stmt *s);
int64_t store_stmt_col_int(struct store_stmt *s, int col);
double store_stmt_col_real(struct store_stmt *s, int col);
const char *store_stmt_col_text(struct store_stmt *s, int col);
int store_stmt_col_null(struct store_stmt *s, int col);

/* Takes the database mutex and begins a transaction.  0 or STORE_ESQL
 * (then the mutex is not held). */
int store_begin(struct store *st, char *err, size_t errlen);
/* Commits and lets go of the mutex.  On failure the transaction is rolled
 * back; the mutex is let go in every case.  0 or STORE_ESQL with err. */
int store_commit(struct store *st, char *err, size_t errlen);
/* Rolls back and lets go of the mutex. */
void store_rollback(struct store *st);

/* Frees what res holds and zeroes it; safe to call twice. */
void store_result_release(struct store_result *res);

const char *store_type_name(enum store_type t);

#endif
