/*
 * tables: the agent's live tables — python.backtrace, python.threads,
 * probing.config — registered in the store at start-up.
 */
#ifndef TABLES_H
#define TABLES_H

#include <stddef.h>

struct store;

int tables_register(struct store *st, char *err, size_t errlen);

#endif
