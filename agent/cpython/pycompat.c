/*
 * pycompat: what pycompat.h cannot define from the public API alone.
 */
#define Py_BUILD_CORE 1
#include "pycompat.h"

#if PY_VERSION_HEX < 0x030A0000
#include "internal/pycore_interp.h"
#include "internal/pycore_pystate.h"

/* 3.9: the collector's switch, as gc.enable() and gc.disable() set it,
 * without running Python (an import of gc would run the import system's
 * Python code, which a debugger stepping this thread would trace). */
int probing_compat_gc(int on)
{
	PyInterpreterState *interp = _PyInterpreterState_GET();
	int was = interp->gc.enabled;

	interp->gc.enabled = on;
	return was;
}
#endif
