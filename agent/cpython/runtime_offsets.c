/*
 * runtime_offsets: offsets into _PyRuntimeState, from the headers of one
 * Python version (PROBING_PY_TAG); see runtime_offsets.h.
 */
#include "runtime_offsets.h"

#include <Python.h>
#include <internal/pycore_runtime.h>

#if PY_VERSION_HEX < 0x03090000 || PY_VERSION_HEX >= 0x03100000
#error "runtime_offsets.c: Probing supports CPython 3.9 to 3.15"
#endif

#define CAT(a, b) a##b
#define NAME(tag) CAT(cpython_runtime_cp, tag)

const struct cpython_runtime_offsets NAME(PROBING_PY_TAG) = {
	.version = PY_VERSION_HEX >> 16,
	.initialized = offsetof(_PyRuntimeState, initialized),
	.finalizing = offsetof(_PyRuntimeState, _finalizing),
};
