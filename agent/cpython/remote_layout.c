/*
 * remote_layout: the positions of the fields PEP 768 needs in
 * _Py_DebugOffsets, from the headers of one Python version
 * (PROBING_PY_TAG); see remote_layout.h.
 */
#include "remote_layout.h"

#include <Python.h>
#include <internal/pycore_ceval.h>
#include <internal/pycore_runtime.h>

#if PY_VERSION_HEX < 0x030e0000
#error "remote_layout.c: PEP 768 is CPython 3.14's"
#endif

#define CAT(a, b) a##b
#define NAME(tag) CAT(inject_remote_layout_cp, tag)
#define AT(field) offsetof(_Py_DebugOffsets, field)

_Static_assert(offsetof(_PyRuntimeState, debug_offsets) == 0,
	       "_Py_DebugOffsets opens _PyRuntimeState");
_Static_assert(AT(version) == INJECT_REMOTE_AT_VERSION, "version");
_Static_assert(AT(free_threaded) == INJECT_REMOTE_AT_FREE_THREADED,
	       "free_threaded");
_Static_assert(sizeof(_Py_DebugOffsets) <= INJECT_REMOTE_SIZE_MAX, "size");
_Static_assert(_PY_EVAL_PLEASE_STOP_BIT < 0x100, "an event bit");

const struct inject_remote_layout NAME(PROBING_PY_TAG) = {
	.hex = PY_VERSION_HEX,
	.size = sizeof(_Py_DebugOffsets),
	.at =
		{
			[INJECT_RF_RUNTIME_SIZE] = AT(runtime_state.size),
			[INJECT_RF_INTERPRETERS_HEAD] =
				AT(runtime_state.interpreters_head),
			[INJECT_RF_INTERP_SIZE] = AT(interpreter_state.size),
			[INJECT_RF_INTERP_ID] = AT(interpreter_state.id),
			[INJECT_RF_INTERP_NEXT] = AT(interpreter_state.next),
			[INJECT_RF_THREADS_MAIN] =
				AT(interpreter_state.threads_main),
			[INJECT_RF_TSTATE_SIZE] = AT(thread_state.size),
			[INJECT_RF_TSTATE_NATIVE_ID] =
				AT(thread_state.native_thread_id),
			[INJECT_RF_EVAL_BREAKER] =
				AT(debugger_support.eval_breaker),
			[INJECT_RF_SUPPORT] =
				AT(debugger_support.remote_debugger_support),
			[INJECT_RF_ENABLED] =
				AT(debugger_support.remote_debugging_enabled),
			[INJECT_RF_PENDING_CALL] =
				AT(debugger_support.debugger_pending_call),
			[INJECT_RF_SCRIPT_PATH] =
				AT(debugger_support.debugger_script_path),
			[INJECT_RF_SCRIPT_PATH_SIZE] =
				AT(debugger_support.debugger_script_path_size),
		},
	.stop_bit = _PY_EVAL_PLEASE_STOP_BIT,
};
