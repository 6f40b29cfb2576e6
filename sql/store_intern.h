/*
 * store_intern: for the sql/ modules that use the store's SQLite
 * connection directly (recording.c); not for the agent's modules.
 */
#ifndef STORE_INTERN_H
#define STORE_INTERN_H

#include <sqlite3.h>

struct store;

/* The store's connection. */
sqlite3 *store_sqlite(struct store *st);

/* Enters the database mutex with the query rules (authorizer) off, as
 * store_exec does; returns what store_unlock puts back. */
int store_lock(struct store *st);
void store_unlock(struct store *st, int saved);

#endif
