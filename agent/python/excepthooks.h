/*
 * excepthooks: a call before an uncaught exception ends a thread or the
 * program, without tracing anything — wrappers around sys.excepthook and
 * threading.excepthook that call back, then call the hook found there.
 *
 * The hooks are installed with excepthooks_set(fn) and put back with
 * excepthooks_set(NULL), unless the program replaced ours meanwhile (then
 * its hook stays).  The callback runs in the thread that is ending, with
 * the GIL, before the traceback is printed; it may release the GIL.
 *
 * Threads: GIL held for every function.
 */
#ifndef EXCEPTHOOKS_H
#define EXCEPTHOOKS_H

struct _object;

/* value: the exception (borrowed), tb: its traceback (borrowed). */
typedef void (*excepthooks_fn)(struct _object *value, struct _object *tb);

/* Installs (fn) or removes (NULL) the wrappers.  Never raises. */
void excepthooks_set(excepthooks_fn fn);

#endif
