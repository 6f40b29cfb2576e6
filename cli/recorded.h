/*
 * recorded: a recording (docs/recording.md) as the CLI's target — what -t
 * names once the process has ended — and the requests a recording can
 * answer, answered here from its files as the agent would (probing/query
 * on the same tables, through the same store rules: sql/store.h).
 *
 *   if (recorded_find("4242", dir, sizeof(dir), err, sizeof(err)) == 1)
 *           recorded_open(dir, &rec, err, sizeof(err));
 *   recorded_request(rec, "probing/query", args, &resp);
 *
 * Runs: recorded_runs() walks the data directory (common/rundir.h) for
 * `probing runs`.
 */
#ifndef CLI_RECORDED_H
#define CLI_RECORDED_H

#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "rundir.h"

struct dap_message;
struct recorded;

/* What run.json and end.json say of one recording, and its files. */
struct run_info {
	char dir[RUNDIR_PATH_MAX];
	char name[160]; /* the directory's own name */
	char job[160];	/* "" when not a rank of a job */
	char host[64];
	char command[512];
	char how[16];	   /* exit, exception, signal; "" when unknown */
	char report[1024]; /* a crash or exception report, or "" */
	int pid;
	int code;	   /* exit status, or the signal */
	int rank;	   /* -1 when none */
	int alive;	   /* its process runs */
	double start;	   /* the process's start */
	double end;	   /* end.json's, or 0 */
	double last_write; /* the newest file's mtime */
	uint64_t bytes;
};

/* Reads a recording's run.json and end.json.  0, or -errno / -EINVAL
 * when dir is not a recording. */
int recorded_info(const char *dir, struct run_info *out);

/* Calls fn for every recording under the data directory (PROBING_DATA_DIR
 * or the default), jobs' ranks included.  Returns the count, or -errno
 * (the directory's root unreadable: -ENOENT when data.dir is "off"). */
int recorded_runs(void (*fn)(const struct run_info *ri, void *arg), void *arg,
		  char *root, size_t rootlen);

/*
 * The recordings of job's ranks (run.json's job; "" names none) whose
 * processes have ended — a rank that still runs is its agent's to
 * answer for — in rank order.  *out is a heap array the caller frees
 * (NULL when *n is 0).  0 or -ENOMEM.
 */
int recorded_job(const char *job, struct run_info **out, size_t *n);

/*
 * Whether -t text names a recording: a directory holding run.json, a
 * recording's name under the data directory, or the pid of a process
 * that has ended and left one (the newest of that pid on this host).  1
 * with its directory in dir; 0 when it names none (text is then an
 * ordinary target); the pid of a live process is never a recording.
 */
int recorded_find(const char *text, char *dir, size_t dirlen);

/* The name of the newest recording of an earlier process that had pid
 * (on this host; not the one running now).  1 with it, else 0. */
int recorded_earlier(int pid, char *name, size_t namelen);

/* Opens the recording in dir for reading.  0, or -errno / STORE_ESQL
 * with err. */
int recorded_open(const char *dir, struct recorded **out, char *err,
		  size_t errlen);
void recorded_free(struct recorded *r);

const struct run_info *recorded_run(const struct recorded *r);

/* "process 4242 (python train.py) ended at 2026-11-24 16:30:02 UTC
 * (exit 0)", or "... has ended, how is not known ...; last written at
 * ...", or "... still runs". */
void recorded_describe(const struct run_info *ri, char *out, size_t outlen);

/* t (seconds since the epoch) as "YYYY-mm-dd HH:MM:SS" in UTC, or "-"
 * for 0. */
void recorded_utc(double t, char *out, size_t outlen);

/* How a run ended, in a few words ("exit 0", "signal 11", "exception",
 * "running", "unknown"). */
void recorded_how(const struct run_info *ri, char *out, size_t outlen);

/*
 * Answers a request as the agent would: 0 with *resp (a success or an
 * error response), -ENOTSUP when a recording has no answer to it (the
 * caller says so), -ENOMEM.
 */
int recorded_request(struct recorded *r, const char *command, const cJSON *args,
		     struct dap_message **resp);

#endif
