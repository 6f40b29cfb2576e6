/*
 * runtime_offsets: offsets into _PyRuntimeState, from the headers of the
 * Python this is built against; see runtime_offsets.h.
 */
#include "runtime_offsets.h"

#include <Python.h>
#include <internal/pycore_runtime.h>

#if PY_VERSION_HEX < 0x030b0000 || PY_VERSION_HEX >= 0x030c0000
#error "runtime_offsets.c: the injector reads CPython 3.11's _PyRuntime"
#endif

const unsigned inject_py_version = PY_VERSION_HEX >> 16;
const size_t inject_py_off_initialized = offsetof(_PyRuntimeState, initialized);
const size_t inject_py_off_finalizing = offsetof(_PyRuntimeState, _finalizing);
