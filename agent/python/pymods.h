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

/* sys.modules[name] (new reference); NULL (no exception set) when absent. */
PyObject *pymods_get(const char *name);

/* Is module name imported and done initialising (not half-way through its
 * own import)? */
int pymods_ready(const char *name);

/* module.path.to.attr (new reference) from sys.modules without importing;
 * NULL (no exception set) when any part is missing. */
PyObject *pymods_attr(const char *module, const char *path);

#endif
