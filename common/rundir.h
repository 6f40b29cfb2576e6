/*
 * rundir: where recordings live, what each is called, and whether the
 * process a recording is of still runs — one answer for the agent that
 * writes them and the CLI that reads them.
 *
 *   <root>/<host>-<pid>-<start>/          a process
 *   <root>/<job>/<host>-<pid>-<start>/    a rank of a distributed job
 *
 * root: data.dir (PROBING_DATA_DIR) when set, else
 * $XDG_STATE_HOME/probing, else $HOME/.local/state/probing.  start: when
 * the process started (not the agent), UTC, YYYYmmddTHHMMSS: with the
 * pid, it tells two processes apart that had the same pid at different
 * times.
 */
#ifndef RUNDIR_H
#define RUNDIR_H

#include <stddef.h>

#define RUNDIR_PATH_MAX 512

/* The files a recording's directory may hold (nothing else is ever
 * deleted by retention). */
extern const char *const rundir_files[];
extern const size_t rundir_nfiles;

/*
 * The root for a data.dir value (NULL, "" or "auto": the default above).
 * 0, -ENOENT for "off" (memory only), -EINVAL for a relative path or no
 * home, -ENAMETOOLONG.
 */
int rundir_root(const char *setting, char *out, size_t outlen);

/* When process pid started, in seconds since the epoch.  0 or -errno
 * (-ESRCH: no such process). */
int rundir_proc_start(int pid, double *epoch);

/* "<host>-<pid>-<YYYYmmddTHHMMSS>" (host's '/' and odd bytes as '_').
 * 0 or -ENAMETOOLONG. */
int rundir_name(char *out, size_t outlen, const char *host, int pid,
		double start);

/* The pid and start of a run from its directory name (rundir_name's
 * form; the host may hold '-').  0, or -1 when name is not one. */
int rundir_parse_name(const char *name, int *pid, double *start);

/* A job's directory name from its id (torchrun's run id): the id with
 * anything but [A-Za-z0-9._-] as '_', after "job-". */
void rundir_job_name(char *out, size_t outlen, const char *id);

/*
 * Calls fn(path, name, arg) for each entry of root and of root's job-*
 * directories (what may be a recording: fn decides), then, with
 * rmdir_jobs, removes the job directories left empty.
 */
void rundir_walk(const char *root,
		 void (*fn)(const char *path, const char *name, void *arg),
		 void *arg, int rmdir_jobs);

/* 1 when process pid runs and started at start (to the second), else 0. */
int rundir_alive(int pid, double start);

#endif
