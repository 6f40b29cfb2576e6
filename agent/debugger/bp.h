/*
 * bp: one breakpoint — what the client asked for (condition, hit
 * condition, log message), compiled when it is set, and what happens when
 * a thread reaches it: the condition evaluated in the frame, the hit
 * counted, the log message formatted.
 *
 * The breakpoint table (breakpoints.h) embeds struct bp in its arrays and
 * owns the id, line and verified fields; this module fills and evaluates
 * the rest.
 *
 * Threads and locks: every function runs with the GIL held.  Functions
 * that run Python code (the user's expressions) say so: such code may let
 * other threads run and change the table meanwhile, which is why
 * bp_consider() takes the table's generation counter.
 */
#ifndef BP_H
#define BP_H

#include <stddef.h>

#include "breakpoints.h"

struct _object;

enum bp_hit_op { HIT_NONE, HIT_EQ, HIT_GE, HIT_GT, HIT_LE, HIT_LT, HIT_MOD };

struct bp {
	int id;
	int line;     /* effective line (0: function breakpoint) */
	int req_line; /* the line asked for */
	int verified;
	char *name; /* function breakpoints */
	char *cond_text, *hit_text, *log_text;
	struct _object *cond;	   /* compiled condition, or NULL */
	struct _object *log_parts; /* list of str and code objects, or NULL */
	enum bp_hit_op hit_op;
	long hit_n;
	long hits;
};

/*
 * Fills b's condition, hit condition and log message from s (b's id, line
 * and name are the caller's); compiles the condition and the log
 * message's expressions (no user code runs).  Returns 0, or -EINVAL with
 * msg (b then stays unverified but valid: bp_release() it as any), or
 * -ENOMEM.
 */
int bp_fill(struct bp *b, const struct bp_spec *s, char *msg, size_t msglen);

/* Frees what b owns and zeroes it. */
void bp_release(struct bp *b);

/*
 * A thread reached b, with frame namespaces g and l: evaluates the
 * condition, counts the hit, formats the log message, and records in hit
 * whether to stop (b's id) and what to log.  Runs the user's code.  b is
 * not touched after Python code ran unless *gen (the table's generation,
 * bumped by every change) is unchanged.
 */
void bp_consider(struct bp *b, struct _object *g, struct _object *l,
		 struct bp_hit *hit, const unsigned *gen);

/* "Type: message" of the raised Python exception (malloc'd, at most
 * BP_LOG_MAX bytes), or NULL; clears it. */
char *bp_error_text(void);

#endif
