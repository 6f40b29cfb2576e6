/*
 * cluster_global: the `global` schema — SQL across every rank of the job
 * in one statement.
 *
 *   SELECT _rank, op, seq FROM global.python.comm_collective
 *   WHERE state = 'running' ORDER BY _rank
 *
 * Each global.<schema>.<table> a query names becomes, for that query, a
 * temporary table of the rows of <schema>.<table> on every node of
 * cluster.nodes, tagged with _rank and _host (the node list's): this
 * agent's own rows read here, the others' asked for at once
 * (probing/query `SELECT <columns> FROM <schema>.<table>`, cluster_ask.h,
 * the query's row cap and time limit each).  Only the columns whose names
 * the query mentions are asked for (all of them when it has a '*'): a
 * live table computes only what is read (python.backtrace's locals are
 * reprs of the program's objects).  The query then runs here over
 * those tables — joins, groups and orders across ranks, the merge step
 * of `cluster query --merge` without a second query.  The tables are
 * dropped when it ends.
 *
 * Nodes that do not answer leave the answer partial: a note each says
 * which rank and why, and so does a node that sent only part of its rows.
 * Without a node list (not in a job) global.X.Y is this process's rows.
 *
 * Names: <schema> and <table> plain identifiers (letters, digits, _),
 * `global` in any case; inside quotes and comments nothing is replaced.
 *
 * Threads: a request worker; it waits for the nodes (in threads of its
 * own) for at most the time limit.
 */
#ifndef CLUSTER_GLOBAL_H
#define CLUSTER_GLOBAL_H

#include <stddef.h>

#include "cJSON.h"

struct store;

#define GLOBAL_TABLES_MAX 8   /* distinct global tables in one query */
#define GLOBAL_NODES_MAX 4096 /* nodes asked at once, at most */
#define GLOBAL_THREADS 32     /* nodes asked in parallel */
#define GLOBAL_COLS_TEXT 4096 /* the select list asked for */

struct global_query {
	char *sql; /* the query with the tables' names in */
	char names[GLOBAL_TABLES_MAX][64]; /* temp tables made */
	int ntables;
};

/*
 * When sql names global tables: fills them (as above), puts the query to
 * run in q->sql, notes (strings) in notes and the ranks that did not
 * answer (numbers, each once) in missing, and returns 1; returns 0
 * when it names none (q untouched), or a negative error with err.
 * max_rows and timeout_ms: the query's (each node's rows, and the time
 * for all the nodes).  Every return of 1 is followed by global_done.
 */
int global_prepare(struct store *st, const char *sql, int max_rows,
		   int timeout_ms, struct global_query *q, cJSON *notes,
		   cJSON *missing, char *err, size_t errlen);

/* Drops the tables and frees q's text. */
void global_done(struct store *st, struct global_query *q);

#endif
