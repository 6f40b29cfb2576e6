/*
 * pyembed: runs a Python source embedded in the library (agent/python/NAME.py,
 * made C arrays at build time) in a private module that is not in
 * sys.modules.
 *
 * Caller holds the GIL.
 */
#ifndef PYEMBED_H
#define PYEMBED_H

struct _object;

/* A new module called name with src executed in it (file names it in
 * tracebacks), or NULL with an exception set. */
struct _object *pyembed_load(const char *name, const char *src,
			     const char *file);

#endif
