/*
 * pyviews: the Python half of the variables view, embedded.
 *
 * agent/python/pyviews.py (how values are shown: containers in pages, tensors,
 * modules and arrays, completions, exception details) is compiled into
 * the library at build time and executed, the first time it is needed,
 * into a private module that is not in sys.modules.  Its functions take
 * and return plain objects; see the file for their contracts.
 *
 * Caller holds the GIL.
 */
#ifndef PYVIEWS_H
#define PYVIEWS_H

struct _object;

/* A new reference to the function called name, or NULL with an
 * exception set (the source failed to load: a bug). */
struct _object *pyviews_get(const char *name);

/* In a forked child: the module object belongs to the same interpreter
 * and stays usable; nothing to do.  After the interpreter is finalised it
 * must not be used. */

#endif
