/*
 * bpsource: a source file that breakpoints are set in — which of its
 * lines hold code (as the compiler sees the file now), which co_filename
 * strings name it, and whether a module was loaded from it.
 *
 * Files are matched by path as given, then by real path (symbolic links,
 * relative co_filename resolved against the working directory).  The
 * lines are cached while the file's mtime and size stay the same.
 *
 * The breakpoint table (breakpoints.h) embeds struct bp_source in each of
 * its files.  Threads and locks: every function runs with the GIL held
 * (bpsource_names() alone needs no Python); none runs user code.
 */
#ifndef BPSOURCE_H
#define BPSOURCE_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

struct bp_source {
	char *path;	  /* as the client gave it */
	char *real;	  /* its real path, or NULL */
	const char *base; /* its last component, inside path */
	int *lines;	  /* lines with code, sorted, unique */
	size_t nlines;
	struct timespec mtime;
	off_t size;
};

/* Sets s up for path (copied).  Returns 0 or -ENOMEM (s then holds
 * nothing to release). */
int bpsource_init(struct bp_source *s, const char *path);

/* Frees what s owns. */
void bpsource_release(struct bp_source *s);

/*
 * Reads and compiles the file (at most BP_SOURCE_MAX bytes) to learn the
 * lines that hold code, unless the cached lines are current.  Returns 0,
 * or -errno / -EINVAL (not a regular file, too big, NUL bytes, does not
 * compile) / -ENOMEM with msg.
 */
int bpsource_lines(struct bp_source *s, char *msg, size_t msglen);

/* The first line >= line that holds code, or 0 (after
 * bpsource_lines()). */
int bpsource_code_line_at(const struct bp_source *s, int line);

/* Does name (a co_filename or a module's __file__) name this file? */
int bpsource_names(const struct bp_source *s, const char *name);

/* Is a module in sys.modules loaded from this file?  Reads the modules'
 * dicts directly: no Python code runs. */
int bpsource_loaded_now(const struct bp_source *s);

#endif
