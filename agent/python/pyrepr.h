/*
 * pyrepr: reprs whose work is bounded, not only their length.
 *
 * PyObject_Repr() of a built-in container builds the whole text before a
 * caller can cut it, in C, with the GIL held and no way to interrupt it: a
 * 512 MiB bytearray local took every thread 13.8 s and 4 GB, a 50M-item
 * list 4.3 s.  pyrepr_bounded() writes the reprs of the built-in types
 * itself, piece by piece, and stops once max characters are written (as
 * reprlib does, to a length rather than to item counts), so its work is of
 * the order of max whatever the object's size:
 *   - list, tuple, dict, set, frozenset (and subclasses that keep the
 *     built-in repr): element by element, nested at most PYREPR_DEPTH
 *     levels ("[...]" below), a container met again inside itself as
 *     CPython shows it ("[...]");
 *   - str, bytes, bytearray: the first max characters or bytes only;
 *   - int: in full up to PYREPR_INT_BITS bits, "<int of N bits>" beyond
 *     (the conversion is quadratic where the interpreter's digit limit is
 *     off).
 * Any other object's own __repr__ runs (a program's code: pygil's run
 * deadline interrupts it when it is Python), but not when it reports a
 * size (len()) over PYREPR_LEN_MAX and is no array type (one with
 * `shape` and `dtype`, whose repr summarises): then "<Type of N items>".
 * The text is the same as repr() wherever nothing is cut, nested at most
 * PYREPR_DEPTH deep, and no set changed while it was shown (then the
 * repr fails, where CPython shows a copy).  What is not bounded: a
 * container of another type under PYREPR_LEN_MAX items (a deque, an
 * OrderedDict) runs its own __repr__, which builds whole reprs of its
 * items, a huge bytearray among them too.  An interrupt of the caller's
 * deadline raised in any code of the program's is never cleared here.
 *
 * Caller holds the GIL.
 */
#ifndef PYREPR_H
#define PYREPR_H

#define PYREPR_DEPTH 6		/* nesting shown, as reprlib's maxlevel */
#define PYREPR_INT_BITS 33000	/* ~10,000 decimal digits */
#define PYREPR_LEN_MAX 100000	/* items of an object whose __repr__ runs */

struct _object; /* PyObject */

/*
 * The repr of obj in at most max characters (max >= 4); a repr cut short
 * ends in "...".  Returns a new reference to a str, or NULL with the
 * exception raised by a __repr__ (or MemoryError) set.
 */
struct _object *pyrepr_bounded(struct _object *obj, long max);

/* A str's UTF-8, malloc'd; "?" when obj is NULL, no str or cannot be
 * encoded (a lone surrogate), the error cleared.  NULL only when out of
 * memory.  GIL held. */
char *pyrepr_utf8_dup(struct _object *obj);

#endif
