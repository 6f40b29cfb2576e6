/*
 * recording: the recorded tables of a store, kept on disk as well, so
 * that they can be read after the process is gone.
 *
 * A recording is a directory holding one SQLite file per schema
 * (python.db, process.db, profile.db): a reader attaches each under its
 * schema's name, and the SQL that ran against the live agent runs against
 * the recording unchanged.  The store stays what it was (in memory, live
 * tables and all); recording_flush() copies into the files what the
 * recorded tables gained since the last flush:
 *
 *   - rows added (rowids past the last one copied), in chunks, and
 *   - rows changed in place (an UPDATE, or an INSERT OR REPLACE of an
 *     interned id), which an update hook on the store notes by rowid.
 *
 * Rows the store trims (its own bounds) stay on disk: the disk's bounds
 * are recording_trim()'s.  Tables are those listed in probing.tables as
 * "recorded" in schemas python, process and profile, looked up at every
 * flush; feeds (recording_add_feed) add tables that are not in the store.
 *
 * The files are open only during a flush or a trim (WAL mode,
 * synchronous=NORMAL): between them the process holds no descriptor of
 * ours that the program could close and reuse.  Reading the store holds
 * its mutex for one chunk at a time; writing the files holds nothing of
 * the store's, so queries never wait on the disk.
 *
 * Threads: recording_flush, recording_trim, recording_add_feed and
 * recording_close on one thread at a time (the agent's recording thread);
 * the update hook runs on whichever thread writes the store.
 */
#ifndef RECORDING_H
#define RECORDING_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct recording;

#define RECORDING_TABLES_MAX 32
#define RECORDING_FEEDS_MAX 4

/*
 * Starts recording st into dir, which must exist and be writable (its
 * files are made at the first flush).  Installs the update hook on st.
 * 0 with *out, or -ENOMEM / -EINVAL (dir too long) with err.
 */
int recording_open(struct store *st, const char *dir, struct recording **out,
		   char *err, size_t errlen);

/* Removes the hook and frees r (the files stay).  NULL is a no-op. */
void recording_close(struct recording *r);

/*
 * The free space the files leave on their file system: from the next
 * flush or trim on, a write that would grow a file into the last bytes
 * free fails as on a full disk (recvfs.h).  0 (the default): none.
 */
void recording_set_min_free(struct recording *r, uint64_t bytes);

/*
 * Copies what is new, at most max_rows rows per table (the rest next
 * time).  0; -EBUSY when a reader holds a file's lock (nothing lost: the
 * next flush copies it all); -ENOSPC when the disk is full or the
 * headroom reached (SQLITE_FULL; err has SQLite's word); or another error
 * with err: STORE_ESQL (SQLite's word) or -errno.  After an error
 * the files hold the flushes before it, whole, and what this one took is
 * taken again by the next; the caller decides whether to go on.
 */
int recording_flush(struct recording *r, size_t max_rows, char *err,
		    size_t errlen);

/*
 * A table kept on disk whose rows come from a function rather than the
 * store (python.comm_collective: a ring in C).  At each flush (when
 * pending() says so, or always when it is NULL) write() gives its rows:
 * for each, one value per column in order (recording_rows_int, _real,
 * _text, _null), then recording_rows_end(); it returns the rows given,
 * or -1 to stop the flush.  A row whose first column (an INTEGER PRIMARY
 * KEY) was given before replaces it: rows are given again as they
 * change.  columns is the CREATE TABLE column list.
 */
struct recording_rows;

struct recording_feed {
	const char *schema, *name, *columns;
	int (*write)(void *ctx, struct recording_rows *w);
	int (*pending)(void *ctx);
	/* The flush is over: ok, or what write() gave is not on disk and
	 * must be given again.  May be NULL. */
	void (*done)(void *ctx, int ok);
	void *ctx;
};

/* 0, or -ENOSPC (RECORDING_FEEDS_MAX). The feed must outlive r. */
int recording_add_feed(struct recording *r, const struct recording_feed *f);

/* The next value of the row being given (text NULL: SQL NULL).  0 or
 * -EINVAL (more values than columns). */
int recording_rows_int(struct recording_rows *w, int64_t v);
int recording_rows_real(struct recording_rows *w, double v);
int recording_rows_text(struct recording_rows *w, const char *v);
int recording_rows_null(struct recording_rows *w);
/* The row is complete: written.  0 or -EIO. */
int recording_rows_end(struct recording_rows *w);

/*
 * Disk bounds: deletes rows whose ts is before not_before (0: none), then,
 * while the files hold more than max_bytes (0: no bound), the oldest 10%
 * of each table with a ts column, and gives the space back.  *bytes is
 * the size after.  0, or STORE_ESQL / -errno with err (-ENOSPC as for
 * recording_flush).
 */
int recording_trim(struct recording *r, double not_before, uint64_t max_bytes,
		   uint64_t *bytes, char *err, size_t errlen);

struct recording_stats {
	uint64_t rows;	  /* rows written (added or changed) */
	uint64_t flushes; /* flushes that wrote something */
	uint64_t lost;	  /* changed rows not tracked (too many) */
	uint64_t trimmed; /* rows removed by recording_trim */
	double last_ms;	  /* time the last flush took */
	int tables;	  /* tables recorded */
};

void recording_stats(const struct recording *r, struct recording_stats *out);

/* The file of schema in dir ("<dir>/<schema>.db"); -ENAMETOOLONG. */
int recording_file(const char *dir, const char *schema, char *out,
		   size_t outlen);

#endif
