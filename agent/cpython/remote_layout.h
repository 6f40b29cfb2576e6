/*
 * remote_layout: where, inside CPython's _Py_DebugOffsets, lie the fields
 * that PEP 768's remote execution needs (remote_exec.h), for each CPython
 * 3.14+ this install has an agent for.
 *
 * _Py_DebugOffsets is the first member of _PyRuntimeState: a cookie
 * ("xdebugpy"), the version (PY_VERSION_HEX), then the offsets of the
 * interpreter's own structures, which the target itself fills in.  Those
 * values are read from the target; only the positions of the fields
 * within _Py_DebugOffsets, which change from one minor version to the
 * next (3.15 added fields in its middle), come from here.
 * remote_layout.c is compiled once per version with that version's
 * internal headers (Py_BUILD_CORE, PROBING_PY_TAG=314 ...) into the
 * injector, as runtime_offsets.c is; inject/CMakeLists.txt writes the
 * table of them (inject_remote_layouts).  Here because everything that
 * knows CPython's internals is in agent/cpython.
 *
 * The cookie and the version sit at the same place in every version
 * (bytes 0-7 and 8-15), which is how a reader picks the layout before
 * trusting anything else.
 */
#ifndef CPYTHON_REMOTE_LAYOUT_H
#define CPYTHON_REMOTE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define INJECT_REMOTE_COOKIE "xdebugpy"	  /* _Py_Debug_Cookie, 8 bytes */
#define INJECT_REMOTE_AT_VERSION 8	  /* uint64_t version: PY_VERSION_HEX */
#define INJECT_REMOTE_AT_FREE_THREADED 16 /* uint64_t free_threaded */
#define INJECT_REMOTE_SIZE_MAX 4096 /* sizeof(_Py_DebugOffsets), at most */

/* The uint64_t fields of _Py_DebugOffsets read (their names there). */
enum inject_remote_field {
	INJECT_RF_RUNTIME_SIZE,	     /* runtime_state.size */
	INJECT_RF_INTERPRETERS_HEAD, /* runtime_state.interpreters_head */
	INJECT_RF_INTERP_SIZE,	     /* interpreter_state.size */
	INJECT_RF_INTERP_ID,	     /* interpreter_state.id */
	INJECT_RF_INTERP_NEXT,	     /* interpreter_state.next */
	INJECT_RF_THREADS_MAIN,	     /* interpreter_state.threads_main */
	INJECT_RF_TSTATE_SIZE,	     /* thread_state.size */
	INJECT_RF_TSTATE_NATIVE_ID,  /* thread_state.native_thread_id */
	INJECT_RF_EVAL_BREAKER,	     /* debugger_support.eval_breaker */
	INJECT_RF_SUPPORT,	     /* .remote_debugger_support */
	INJECT_RF_ENABLED,	     /* .remote_debugging_enabled */
	INJECT_RF_PENDING_CALL,	     /* .debugger_pending_call */
	INJECT_RF_SCRIPT_PATH,	     /* .debugger_script_path */
	INJECT_RF_SCRIPT_PATH_SIZE,  /* .debugger_script_path_size */
	INJECT_RF_COUNT
};

struct inject_remote_layout {
	unsigned hex;  /* PY_VERSION_HEX of the headers it was made from */
	uint32_t size; /* sizeof(_Py_DebugOffsets) */
	/* Where each field lies in _Py_DebugOffsets (bytes). */
	uint32_t at[INJECT_RF_COUNT];
	/* The eval breaker's bit that makes a thread call
	 * _Py_HandlePending at its next check: _PY_EVAL_PLEASE_STOP_BIT.
	 * It lies in the low byte (the event bits; the instrumentation
	 * version is above them). */
	uint32_t stop_bit;
};

/* The versions this install has a layout for (those >= 3.14 among the
 * agents it has), oldest first. */
extern const struct inject_remote_layout *const inject_remote_layouts[];
extern const size_t inject_remote_layouts_n;

/* The layout for a target whose _Py_DebugOffsets.version is hex, or NULL:
 * the same major and minor version, and, where either is a pre-release
 * (alpha, beta, candidate: offsets may change from one to the next),
 * exactly the same version.  As CPython's own remote debugging decides. */
static inline const struct inject_remote_layout *
inject_remote_layout_for(uint64_t hex)
{
	for (size_t i = 0; i < inject_remote_layouts_n; i++) {
		const struct inject_remote_layout *l = inject_remote_layouts[i];

		if ((hex >> 16) != (l->hex >> 16))
			continue;
		if (((hex & 0xf0) != 0xf0 || (l->hex & 0xf0) != 0xf0) &&
		    hex != l->hex)
			continue;
		return l;
	}
	return NULL;
}

#endif
