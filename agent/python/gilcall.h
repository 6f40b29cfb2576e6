/*
 * gilcall: a request's work with the GIL, shared safely between the
 * worker that asked and the GIL thread that runs it.
 *
 * pygil_run() may stop waiting for a call that runs user code (a repr, an
 * expression) past its hard limit while the call goes on; whatever the
 * call touches must then outlive the waiting caller.  A gilcall is
 * reference counted by both sides and freed by the last one: embed
 * struct gilcall first in a heap struct that carries the arguments and
 * the results (plain C data: no Python object crosses back).
 *
 * What it runs decides the GIL threads it may use (pygil.h: places):
 * c->kind, PYGIL_REPR when 0 (reprs of the program's objects), or
 * PYGIL_CODE for code of the client's choosing; c->what names it in the
 * messages about calls that do not end (NULL: by its kind).
 *
 * Threads: gilcall_run() from any thread but a GIL thread; run() on a GIL
 * thread with the GIL; release() on whichever side lets go last, without
 * the GIL.
 */
#ifndef GILCALL_H
#define GILCALL_H

#include <stddef.h>

struct gilcall {
	void (*run)(struct gilcall *c);	    /* with the GIL */
	void (*release)(struct gilcall *c); /* frees c and its results */
	int kind;			    /* enum pygil_kind; 0: PYGIL_REPR */
	const char *what;		    /* in words, or NULL (copied) */
	int refs;			    /* private */
};

/*
 * Runs c->run with the GIL: waits at most python.gil_timeout_ms for it,
 * interrupts the run after run_ms (0: never) or when *cancel is set
 * (cancel may be NULL).  Returns 0 when run ended (its results may be
 * read), else -ETIMEDOUT (with the thread holding the GIL in err),
 * -EBUSY (every GIL thread runs an earlier call, or every place of its
 * kind is held by one: err names them), -EINPROGRESS (it did
 * not stop when interrupted), -ECANCELED, -EAGAIN, -ESHUTDOWN with err.  In
 * every case the caller then calls gilcall_done(c) once and must not touch c
 * afterwards.
 */
int gilcall_run(struct gilcall *c, int run_ms, volatile int *cancel, char *err,
		size_t errlen);

/* Runs fn(arg) with the GIL, for the agent's own code (never
 * interrupted, nothing of the client's runs), waiting at most start_ms
 * for the GIL (0: python.gil_timeout_ms).  0, or pygil_run()'s error with
 * gilcall_explain()'s words in err. */
int gilcall_ours(void (*fn)(void *arg), void *arg, int start_ms, char *err,
		 size_t errlen);

/* Why a pygil_run() that waited start_ms returned rc (not 0), in words:
 * who holds the GIL — the program's thread, or the agent's own call and
 * what it runs — or which earlier calls still run (on the thread that
 * called pygil_run: pygil_busy_explain()). */
void gilcall_explain(int rc, int start_ms, char *err, size_t errlen);

/* In run(), the GIL held: "what: Type: message" of the exception raised
 * into err, and it cleared; -EINTR when it is the interrupt of the run's
 * deadline or a cancel (KeyboardInterrupt), else rc. */
int gilcall_fail_from_exc(int rc, const char *what, char *err,
			  size_t errlen);

/* The caller lets go of c. */
void gilcall_done(struct gilcall *c);

#endif
