/*
 * sqlfuncs: the SQL functions Probing adds to SQLite's, for the time
 * windows people write.
 *
 *   now()        the wall clock, seconds since the Unix epoch (REAL), the
 *                unit of the recorded tables' times (profile.samples.ts,
 *                process.memory.ts)
 *   ago(D)       now() - D, D a duration: a number of seconds, or text
 *                with a unit ('500ms', '30s', '5m', '5 min', '2h', '1d');
 *                a bad D is an error that says what is wanted
 *
 * `WHERE ts > ago('5m')` reads as "the last five minutes".  Neither is
 * deterministic: each call reads the clock (one clock_gettime).
 */
#ifndef SQLFUNCS_H
#define SQLFUNCS_H

struct sqlite3;

/* Registers them on db: 0, or an SQLite error code. */
int sqlfuncs_register(struct sqlite3 *db);

/*
 * Bounded versions of the core functions whose one call can take
 * quadratic time or worse on long strings, registered on db in place of
 * SQLite's.  SQLite's progress handler runs between virtual-machine
 * instructions only: a single like() of a 1 MB string against a
 * 50,000-byte pattern, or an instr()/replace() of a long needle in a long
 * haystack, is one instruction that ran for minutes past the query's
 * time cap, with the database mutex held.
 *
 *   like(P, X), like(P, X, E), glob(P, X): SQLite's semantics (ASCII
 *       case folding for LIKE, E the escape, GLOB's * ? [...]); the
 *       match backtracks to the last wildcard only (O(|P|*|X|) at
 *       worst, not exponential), and asks expired(arg) every
 *       SQLFUNCS_CHECK_STEPS steps: when it says 1 the call fails
 *       ("interrupted") and so does the statement.
 *   instr(X, Y), replace(X, Y, Z): memmem (linear); replace's result
 *       is checked against SQLITE_LIMIT_LENGTH before it is built.
 *   trim(X, Y), ltrim(X, Y), rtrim(X, Y): Y's characters looked up in
 *       a sorted table (O(|X| log |Y|), not O(|X|*|Y|)).
 *
 * expired(arg) is called on the thread running the statement, with the
 * database mutex held.  0, or an SQLite error code.
 */
#define SQLFUNCS_CHECK_STEPS 65536
int sqlfuncs_register_bounded(struct sqlite3 *db, int (*expired)(void *),
			      void *arg);

/* Seconds in a duration as ago() reads it: 0 with *out set, or -1. */
int sqlfuncs_duration(const char *text, double *out);

#endif
