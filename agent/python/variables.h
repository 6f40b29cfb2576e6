/*
 * variables: DAP variable references — handles on Python values of paused
 * threads — and the values they show (through pyviews).
 *
 * A reference names a value the client may expand: a frame's locals or
 * globals, or any value shown with children (containers, objects,
 * tensors, modules, arrays, their statistics).  References are valid for
 * one debugger epoch (debugger.h): every resume makes the older ones
 * stale, and the first call that notices drops them all.  At most
 * VARIABLES_HANDLES_MAX exist at once; past that, values are shown
 * without children.  A reference is (epoch % 1024) << 20 | slot, so a
 * stale one is refused, never mistaken for another value.
 *
 * Threads and locks: the table is guarded by the GIL; every function but
 * variables_release() needs it.  Functions that run Python code (reprs,
 * the views, the client's expressions) say so; they may be interrupted by
 * pygil's run deadline (KeyboardInterrupt), which comes back as an error.
 */
#ifndef VARIABLES_H
#define VARIABLES_H

#include <stddef.h>
#include <stdint.h>

#define VARIABLES_HANDLES_MAX 65536
#define VARIABLES_REPR_MAX 1024 /* chars of a value shown */
#define VARIABLES_EXPR_MAX 1024 /* chars of an evaluateName */

struct _object;
struct _frame;

struct variable {
	char *name; /* owned */
	char *value;
	char *type;
	char *evaluate_name; /* NULL when the value cannot be named */
	int64_t ref;	     /* variablesReference, 0: no children */
	int64_t named;	     /* namedVariables (0: not said) */
	int64_t indexed;     /* indexedVariables: pages of children */
};

enum variables_filter {
	VARIABLES_ALL = 0,
	VARIABLES_NAMED,
	VARIABLES_INDEXED,
};

/* A reference to frame's locals (globals 0) or globals (1); 0 when the
 * table is full.  The frame is kept for setVariable and evaluation. */
int64_t variables_scope_ref(struct _frame *frame, int globals);

/*
 * Fills out for value obj (borrowed) shown as name, with a reference
 * when it has children (remembering frame, may be NULL, and
 * evaluate_name, may be NULL).  Runs Python code (repr, views).  Returns
 * 0 or -ENOMEM.
 */
int variables_describe(struct _object *obj, const char *name,
		       const char *evaluate_name, struct _frame *frame,
		       struct variable *out);

/*
 * The children of ref, from start, at most count (0: a page of up to
 * pyviews' PAGE_MAX).  Runs Python code.  Returns 0 with *out (n items,
 * free with variables_release), or -ESTALE / -ENOENT (unknown or stale
 * reference), -EINTR (interrupted), -EIO (the value raised) with err.
 */
int variables_list(int64_t ref, enum variables_filter filter, int64_t start,
		   int64_t count, struct variable **out, size_t *n, char *err,
		   size_t errlen);

/*
 * Sets child name of ref to the value of expression expr, evaluated in
 * the namespace of the reference's frame (or __main__).  Writes locals
 * back into the frame.  Runs Python code.  Returns 0 with out filled, or
 * -ENOENT / -ESTALE / -EINVAL (the expression or the assignment raised,
 * the message in err).
 */
int variables_set(int64_t ref, const char *name, const char *expr,
		  struct variable *out, char *err, size_t errlen);

/* Frees items (no GIL needed). */
void variable_release(struct variable *v);
void variables_release(struct variable *v, size_t n);

/* Drops every handle. */
void variables_reset(void);

/* Drops every handle if the debugger's epoch moved on. */
void variables_reset_stale(void);

#endif
