/*
 * breakpoints: the debugger's breakpoints — source lines (with conditions,
 * hit conditions and log messages) and function names — and the matching
 * of code objects and line events against them.
 *
 * A line breakpoint is verified when the line holds code (a line with
 * none moves to the next one that does, as the compiler sees the file
 * now) and its file is loaded in the target; in a file not loaded yet it
 * is reported unverified and armed all the same: it takes effect when the
 * file's code runs, and breakpoints_file_loaded() reports it verified
 * then.  A file is loaded when a module in sys.modules or a running frame
 * comes from it, or when an `exec` or `compile` audit event names it
 * (dbgtrace.c watches those).
 *
 * Files are matched by path as given, then by real path (symbolic links,
 * relative co_filename), and classification is cached per code object by
 * the trace backend (cpython.trace), so matching costs nothing on the
 * hot path.
 *
 * This module is the table and the matching; a file's source (lines with
 * code, names, loaded or not) is bpsource.h's, one breakpoint's
 * condition, hit count and log message bp.h's.
 *
 * Threads and locks: every function runs with the GIL held; the table is
 * guarded by it.  Functions that run Python code (conditions, log
 * messages) say so.
 */
#ifndef BREAKPOINTS_H
#define BREAKPOINTS_H

#include <stddef.h>

#define BP_FILES_MAX 1024	 /* files with breakpoints */
#define BP_PER_FILE_MAX 1024	 /* breakpoints in one file */
#define BP_FUNCTIONS_MAX 256	 /* function breakpoints */
#define BP_SOURCE_MAX (8u << 20) /* bytes of a source file compiled */
#define BP_TEXT_MAX 4096	 /* chars of a condition or log message */
#define BP_LOG_MAX 4096		 /* chars of one logpoint's output */
#define BP_MESSAGE_MAX 256
#define BP_HIT_IDS_MAX 8

struct _object;
struct _frame;

/* One requested breakpoint (strings borrowed; NULL or "" for none). */
struct bp_spec {
	int line;	  /* source breakpoints; 0 for functions */
	const char *name; /* function breakpoints */
	const char *condition;
	const char *hit_condition;
	const char *log_message;
};

/* What a requested breakpoint became. */
struct bp_result {
	int id;
	int verified;
	int line; /* where it is (0 for function breakpoints) */
	char message[BP_MESSAGE_MAX]; /* why not verified, or "" */
};

/*
 * Replaces the breakpoints of file path (absolute) with specs[0..n), as
 * setBreakpoints does; n 0 clears them.  out has n entries.  A breakpoint
 * on a line that keeps its line, condition and hit condition keeps its id
 * and hit count.  Returns 0, or -EINVAL / -ENOSPC / -ENOMEM with err.
 * Compiles the file and the conditions (Python, no user code).
 */
int breakpoints_set_file(const char *path, const struct bp_spec *specs,
			 size_t n, struct bp_result *out, char *err,
			 size_t errlen);

/* Replaces the function breakpoints, as setFunctionBreakpoints does.
 * A name is a function's qualified name ("train", "Model.forward"),
 * optionally after its module's name ("mypkg.model.Model.forward"). */
int breakpoints_set_functions(const struct bp_spec *specs, size_t n,
			      struct bp_result *out, char *err, size_t errlen);

/* Removes every breakpoint. */
void breakpoints_clear(void);

/* Are there breakpoints: in loaded files (*loaded), in files not loaded
 * yet (*pending), on functions (*functions)?  Any pointer may be NULL. */
void breakpoints_counts(int *loaded, int *pending, int *functions);

/* The trace backend's classify: 1 when frames of code must be traced (a
 * breakpoint on one of its lines, or on its name).  Never raises. */
int breakpoints_code_wanted(struct _object *code);
/* The trace backend's line_wanted: 1 when a line breakpoint of code's
 * file is on line (its events at other lines may stop).  Never raises. */
int breakpoints_line_wanted(struct _object *code, int line);

/* Has a file with breakpoints been loaded (named by an exec or compile
 * event, or seen running)?  filename is a str; returns the number of its
 * breakpoints that became verified and fills ids/lines (at most max;
 * callers report BREAKPOINTS_LOADED_MAX at a time). */
#define BREAKPOINTS_LOADED_MAX 64
int breakpoints_file_loaded(struct _object *filename, int *ids, int *lines,
			    int max);

/* What a line or call event found. */
struct bp_hit {
	int stop; /* 1: stop here */
	int ids[BP_HIT_IDS_MAX];
	int nids;
	char *log;   /* logpoint output (malloc'd, caller frees) or NULL */
	char *error; /* a condition or message that raised (malloc'd) */
	int newly_verified; /* the file was seen running for the first time */
};

/*
 * A line event at frame f, line line: evaluates the conditions, counts
 * hits, formats log messages of the breakpoints there.  Runs Python code
 * (the user's expressions, in the frame's namespace).  Returns 0 with hit
 * filled (release with breakpoints_hit_release).  A condition that raises
 * stops, with the error in hit->error.
 */
int breakpoints_line_hit(struct _frame *f, int line, struct bp_hit *hit);

/* A call event at frame f (a function starting): the function
 * breakpoints matching it.  Runs Python code as above. */
int breakpoints_function_hit(struct _frame *f, struct bp_hit *hit);

void breakpoints_hit_release(struct bp_hit *hit);

#endif
