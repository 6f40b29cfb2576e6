/*
 * dx: the diagnostic playbooks of `probing diagnose hang | leak | slow |
 * dataloader` (docs/diagnose.md).
 *
 * A playbook is a fixed sequence of looks at one target — backtraces,
 * SQL over the recorded tables, a few seconds of sampling, the cluster's
 * verdict — each one a command of this CLI run as its own process
 * (serve/selfrun.h), ending in a verdict of one or two sentences and the
 * evidence that led to it, each piece a line a person can check, and the
 * commands to look further.  The same playbooks answer `probing mcp`'s
 * diagnose tool and the web page.
 */
#ifndef CLI_DX_H
#define CLI_DX_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define DX_LINES_MAX 24
#define DX_TEXT_MAX 1024

struct dx {
	const char *target; /* -t, as given */
	int window_ms;	    /* how long to watch (sampling, the leak's
			     * second look); the playbook's default when 0 */
	int history_ms;	    /* leak: the RSS series a verdict needs (its
			     * later half); the playbook's default when 0 */
	char verdict[DX_TEXT_MAX];
	char *evidence[DX_LINES_MAX]; /* owned */
	int nevidence;
	char *next[DX_LINES_MAX]; /* commands to look further, owned */
	int nnext;
	int status;	       /* exit code of a look that failed (cmd.h) */
	char err[DX_TEXT_MAX]; /* why, when a playbook returns -1 */
};

/* The playbooks.  Each returns 0 with d->verdict set, or -1 with d->err
 * and d->status (the failing command's exit code) set. */
int dx_hang(struct dx *d);
int dx_leak(struct dx *d);
int dx_slow(struct dx *d);
int dx_loader(struct dx *d);

/* A progress line on stderr, where it is a terminal: "probing: diagnose
 * hang: asking backtrace, 1.4 s", redrawn every 200 ms from start to end
 * (then erased); dx_step says what the playbook does now. */
void dx_progress_start(const char *playbook);
void dx_step(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dx_progress_end(void);

void dx_free(struct dx *d);

/* ---- for the playbooks (dx.c) -------------------------------------------- */

/* Runs `probing -t TARGET words...` (NULL-terminated); its stdout parsed
 * as JSON into *out (caller deletes).  Returns 0, or -1 with d->err. */
int dx_json(struct dx *d, cJSON **out, const char *const *words);

/* The same, its stdout as text into *out (caller frees). */
int dx_text(struct dx *d, char **out, const char *const *words);

/* SQL through `query -f json`: the rows (an array), or -1. */
int dx_query(struct dx *d, cJSON **rows, const char *sql);

/* Adds a line of evidence, a command to look further, or sets the
 * verdict (printf-style). */
void dx_evidence(struct dx *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dx_next(struct dx *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dx_verdict(struct dx *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Forgets a look's failure (d->err, d->status) when the playbook goes on
 * without what it would have given (no cluster, no torch). */
void dx_forgive(struct dx *d);

/* A row's value as a number (0 when missing) or a string ("" when not one). */
double dx_num(const cJSON *row, const char *key);
const char *dx_str(const cJSON *row, const char *key);

/*
 * Folded stacks (`flamegraph --threads --lines`: "thread (thread N);outer
 * (file:line);...;inner count", a leaf "(idle)" or "(gil)" for a thread
 * that waited) of one thread, for the sampling playbooks.
 */
struct dx_stack {
	char **frames; /* outermost first, the thread's root dropped */
	int n;
	long count;
	int idle; /* the leaf was (idle) or (gil): dropped from frames */
};

struct dx_samples {
	struct dx_stack *v;
	int n;
	long total; /* samples of the thread */
};

/* Samples the main thread (the one whose root names MainThread, else the
 * thread of the target's pid) for ms, idle samples included when idle.
 * Returns 0, or -1 with d->err. */
int dx_sample_main(struct dx *d, int ms, int idle, struct dx_samples *s);
void dx_samples_free(struct dx_samples *s);

/* "func (file:line)" -> is its file the program's own?  (frames.h) */
int dx_frame_own(const char *frame);

/* frame's "func" part into out. */
void dx_frame_func(const char *frame, char *out, size_t len);

/* frame with its file cut to the base name: "func (train.py:37)". */
void dx_frame_short(const char *frame, char *out, size_t len);

#endif
