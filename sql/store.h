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
};

/* Opens the database and attaches the schemas.  Returns 0 and a new store,
 * or -errno / STORE_ESQL with err. */
int store_new(struct store **out, char *err, size_t errlen);
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
 * Queries may read everything and write in schemas main and temp (scratch
 * space for analysis).  Refused with a message: ATTACH, DETACH, writes and
 * DDL in the built-in schemas, triggers, BEGIN/COMMIT/SAVEPOINT, PRAGMAs
 * that set a value, load_extension().  The whole query, snapshots
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

/* Frees what res holds and zeroes it; safe to call twice. */
void store_result_release(struct store_result *res);

const char *store_type_name(enum store_type t);

#endif
