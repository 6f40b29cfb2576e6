/*
 * sqlhint: an SQL error a person can act on.  SQLite's message, said to
 * be SQLite's, then a hint where one is known:
 *
 *   - INTERVAL (PostgreSQL's, in the original Probing's docs:
 *     `now() - interval '5 min'`): the SQLite form, ago('5 min') or
 *     now() - 300;
 *   - no such table: the table of that name in another schema
 *     (backtrace -> python.backtrace), the original's tables
 *     (memory_usage -> process.memory, ...), else the nearest name, and
 *     always where the list is (probing.tables);
 *   - no such function: the SQLite way for the ones people reach for
 *     (hour(), date_trunc(), to_timestamp(), ...), else the nearest;
 *   - no such column: timestamp -> ts (the recorded tables' time).
 */
#ifndef SQLHINT_H
#define SQLHINT_H

#include <stddef.h>

struct sqlite3;

/* Writes into err the message msg of SQLite about sql, with a hint.  db
 * (may be NULL) is read for the table catalog (probing.tables).
 * compiling: the statement did not compile (its SQL is wrong: said to be
 * SQLite's); else it failed while running (a live table's error, an
 * overflow: the message as it is, with a hint when one applies). */
void sqlhint_explain(struct sqlite3 *db, const char *sql, const char *msg,
		     int compiling, char *err, size_t errlen);

#endif
