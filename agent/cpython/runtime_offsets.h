/*
 * runtime_offsets: where the fields of _PyRuntime that the injector
 * (inject/layout.c, another process) reads lie, for each CPython version
 * this install has an agent for.  Computed at build time from each
 * interpreter's own internal headers: runtime_offsets.c is compiled once
 * per version (with Py_BUILD_CORE, PROBING_PY_TAG=311 ...) into the
 * injector, and the build writes the table of them (cpython_runtimes).
 * Here because everything that knows CPython's internals is in
 * agent/cpython.
 *
 * These fields sit at the start of _PyRuntimeState and do not move within
 * a minor version.  The injector finds the target's version first
 * (inject/layout.c) and trusts only that version's entry.
 */
#ifndef CPYTHON_RUNTIME_OFFSETS_H
#define CPYTHON_RUNTIME_OFFSETS_H

#include <stddef.h>

struct cpython_runtime_offsets {
	unsigned version;   /* PY_VERSION_HEX >> 16: 0x030b for 3.11 */
	size_t initialized; /* int: 1 once Py_Initialize() finished */
	size_t finalizing;  /* a pointer: not NULL once Py_Finalize() began */
};

/* The versions this install has an agent for, oldest first. */
extern const struct cpython_runtime_offsets *const cpython_runtimes[];
extern const size_t cpython_runtimes_n;

/* The entry for version (PY_VERSION_HEX >> 16), or NULL. */
static inline const struct cpython_runtime_offsets *
cpython_runtime_for(unsigned version)
{
	for (size_t i = 0; i < cpython_runtimes_n; i++)
		if (cpython_runtimes[i]->version == version)
			return cpython_runtimes[i];
	return NULL;
}

#endif
