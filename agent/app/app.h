/*
 * app: the program's own rows.  Tables a program defines and appends to
 * from Python (`@probing.table`), and the markers it sets
 * (`probing.span()`, `probing.step()`), as recorded tables of the schema
 * `app`: queried with SQL as the agent's own, recorded with them
 * (data.dir), bounded as they are (app.max_rows, app.max_mb per table).
 *
 *   app.spans(ts, end_ts, duration, name, depth, step, native_id, rank)
 *   app.steps(step, ts, end_ts, duration, native_id, rank)
 *   app.<name>(<the dataclass's fields>, ts unless a field is so named)
 *
 * The program's thread never waits for the store: app_py_append encodes
 * the row into a record of a bounded ring (APP_ROW_MAX bytes: longer text
 * is cut at a character boundary, and counted) and returns; a ring that
 * is full drops the row and counts it.  The recorder thread (memory.c)
 * drains the ring every APP_TICK_MS, and a query drains it first
 * (app_drain), so that a program reads back what it appended.
 *
 * Threads: the app_py_* functions run in the program's threads with the
 * GIL held (which makes them the ring's one producer at a time); the
 * free-threaded build without the GIL does not load the agent.
 * app_drain and app_tick on any agent thread (one at a time: a lock).
 */
#ifndef APP_H
#define APP_H

#include "cpython/pycompat.h"
#include <stddef.h>

struct store;

#define APP_TABLES_MAX 64  /* tables a process may define, markers included */
#define APP_ROW_MAX 2048   /* bytes of one encoded row */
#define APP_RING_ROWS 2048 /* rows waiting for the recorder, at most */
#define APP_TICK_MS 100

/* Makes app.spans and app.steps (their recorders come with the first
 * drain).  0, or -errno with err. */
int app_init(struct store *st, char *err, size_t errlen);

/* Writes what waits in the ring into the tables (creating those not
 * made yet).  Returns the rows written. */
size_t app_drain(void);

/* The recorder thread's turn: drains; the ms until the next turn, or -1
 * while nothing was ever defined or appended. */
int app_tick(void);

/* Something new to drain soon (a table defined). */
int app_pending(void);

/* At interpreter exit (the recorder thread is gone): the last rows. */
void app_stop(void);

/* A forked child: the parent's rows and recorders are not its own (the
 * definitions stay: the program's classes do). */
void app_atfork_child(void);

/* The Python face (probing._probing, for agent/pkg/probing/app.py):
 *   _app_define(name, ((column, type), ...), doc) -> table id
 *   _app_append(id, (value, ...)) -> None
 *   _app_stats() -> {"appended", "dropped", "cut", "written", "errors",
 *                    "error"}
 * Errors raise ValueError / TypeError / OverflowError with what to fix. */
PyObject *app_py_define(PyObject *self, PyObject *args);
PyObject *app_py_append(PyObject *self, PyObject *args);
PyObject *app_py_stats(PyObject *self, PyObject *unused);

#endif
