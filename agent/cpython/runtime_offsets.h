/*
 * runtime_offsets: where the fields of CPython 3.11's _PyRuntime that the
 * injector (inject/layout.c, another process) reads lie, computed at
 * build time from the interpreter's own internal headers
 * (runtime_offsets.c is compiled with -DPy_BUILD_CORE into the injector).
 * Here because everything that knows CPython's internals is in
 * agent/cpython.
 *
 * These fields sit at the start of _PyRuntimeState and have not moved
 * within 3.11.x.  The injector checks the target's Py_Version (3.11)
 * before it trusts them.
 */
#ifndef CPYTHON_RUNTIME_OFFSETS_H
#define CPYTHON_RUNTIME_OFFSETS_H

#include <stddef.h>

/* The version the offsets are for (PY_VERSION_HEX >> 16: 0x030b). */
extern const unsigned inject_py_version;
/* int _PyRuntime.initialized: 1 once Py_Initialize() finished. */
extern const size_t inject_py_off_initialized;
/* PyThreadState *_PyRuntime._finalizing: not NULL once Py_Finalize()
 * began. */
extern const size_t inject_py_off_finalizing;

#endif
