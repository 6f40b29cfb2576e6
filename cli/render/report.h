/*
 * report: reading a crash or hang report (agent/forensics/crash_report.h writes
 * them; docs/forensics.md has the format) and showing it.
 *
 * cli_report_parse() reads the text line by line: the header's "key:
 * value" lines, then thread blocks with their python and native sections,
 * then "end:", then notes added later ("resumed: ...").  Escapes (\\,
 * \xNN) are undone.  Lines it does not know are skipped, so a newer
 * report still reads; a report that lacks "end:" was cut short (the
 * process died while writing it) and parses with complete 0.
 *
 * cli_report_print() shows it for a person: what happened, then the
 * crashed (or stuck) thread first, each Python frame with its source line
 * when the file can still be read.  cli_report_json() gives the parsed
 * structure for programs.
 *
 * Caps: CLI_REPORT_BYTES_MAX bytes of text, CLI_REPORT_THREADS_MAX
 * threads, CLI_REPORT_FRAMES_MAX frames per section; past them the rest
 * is dropped and truncated is set.
 */
#ifndef CLI_REPORT_H
#define CLI_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include <cJSON.h>

#define CLI_REPORT_BYTES_MAX (64u << 20)
#define CLI_REPORT_THREADS_MAX 100000
#define CLI_REPORT_FRAMES_MAX 10000

struct cli_report_kv {
	char *key, *value;
};

struct cli_report_pyframe {
	char *func, *file;
	int line;
};

struct cli_report_nframe {
	int index;
	char *ip;     /* "0x00007f..." */
	char *func;   /* "memmove+0x18", "??", or NULL when no object */
	char *object; /* "/usr/lib/.../libc.so.6+0x1a2b3c", or NULL */
};

struct cli_report_thread {
	long tid;
	char *ident, *name, *flags; /* flags: "crashed main", may be "" */
	char *python_label;	    /* NULL when the section is absent */
	struct cli_report_pyframe *py;
	size_t npy;
	char **py_notes;
	size_t npy_notes;
	int has_native;
	struct cli_report_nframe *nat;
	size_t nnat;
	char **nat_notes;
	size_t nnat_notes;
};

struct cli_report {
	int version;
	struct cli_report_kv *kv; /* the header, in order */
	size_t nkv;
	struct cli_report_thread *threads;
	size_t nthreads;
	char **notes; /* "note:" lines among the threads */
	size_t nnotes;
	char **after; /* lines after "end:" */
	size_t nafter;
	int complete;
	int truncated;
	/* Whose rights source lines are read with (cli_report_print): the
	 * user of the process the report is about, as the caller knows it
	 * (the report file's owner); -1 (what parse sets): nobody's, so only
	 * what every user may read. */
	long reader_uid, reader_gid;
};

/* Parses text (len bytes).  Returns 0, -EINVAL when it is not a report
 * (no "probing-report:" first line; err says so) or -ENOMEM.  out is
 * valid (and must be released) in every case. */
int cli_report_parse(const char *text, size_t len, struct cli_report *out,
		     char *err, size_t errlen);
void cli_report_release(struct cli_report *r);

/* The header value of key, or NULL. */
const char *cli_report_get(const struct cli_report *r, const char *key);

/* Prints r for a person; source: show each Python frame's line of code
 * when its file is a Python source (*.py, a regular file) that the
 * report's own process could read (r->reader_uid / reader_gid: owner,
 * group or other permission bits of the file and of every directory
 * above it; supplementary groups are not known, so not counted).  A
 * report names whatever files its writer chose: another user's planted
 * report must not make root show lines of root's own files.  path: where
 * the report came from (shown), may be NULL. */
void cli_report_print(const struct cli_report *r, FILE *f, int source,
		      const char *path);

/* The parsed report as JSON (caller deletes); NULL when out of memory. */
cJSON *cli_report_json(const struct cli_report *r);

#endif
