/*
 * pymods: the process's modules, looked up without importing anything.
 *
 * The agent never imports a module the program has not imported itself:
 * it waits for the program to do it and finds the module in sys.modules.
 *
 * Threads: with the GIL held.
 */
#ifndef PYMODS_H
#define PYMODS_H

#include "cpython/pycompat.h"

/* sys.modules[name] (new reference); NULL (no exception set) when absent,
 * not a module, or a module whose attribute lookup is code of the
 * program's (a class with __getattr__ or __getattribute__: a lazy one,
 * importlib.util.LazyLoader's, runs its import when it is read).  A
 * module another thread is importing is waited for (CPython's
 * PyImport_GetModule takes the module's import lock). */
PyObject *pymods_get(const char *name);

/* Is module name imported and done initialising (not half-way through its
 * own import)? */
int pymods_ready(const char *name);

/* Is module name half-way through its import, in whichever thread, or
 * a lazy module whose import is still to come?  Never waits for that
 * import (pymods_get, and so the others here, wait for
 * the import's lock when another thread runs it: an agent call must not,
 * when that thread may wait for the call). */
int pymods_importing(const char *name);

/* module.path.to.attr (new reference) from sys.modules without importing;
 * NULL (no exception set) when any part is missing.  Of a module whose
 * lookup is the program's code (above), the first step is read from its
 * dict (a lazy module's has what its code made, once that has run). */
PyObject *pymods_attr(const char *module, const char *path);

#endif
