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

/* Seconds in a duration as ago() reads it: 0 with *out set, or -1. */
int sqlfuncs_duration(const char *text, double *out);

#endif
