/*
 * record: the agent's recording on disk — the recorded tables copied
 * into one directory per process (sql/recording.h, common/rundir.h) by a
 * thread of its own, every data.flush_ms, with the retention rules
 * (retention.days, retention.max_mb) applied to it and to the recordings
 * of processes that are gone.
 *
 * The directory also holds run.json (who the process is: pid, host,
 * start, command, job and rank) and, once it has ended, end.json (how:
 * its exit status, the fatal signal, the crash or exception report).
 * A disk that fills or a directory that cannot be written stops the
 * recording with one warning; the store, in memory, goes on as before.
 *
 * The program's disk comes first: the recording leaves headroom on its
 * file system, the larger of data.min_free_mb and data.min_free_pct of
 * its size.  Before every flush and trim the free space is looked at
 * (statvfs), and no write of a flush may grow a file into the headroom
 * (sql/recvfs.h); when the headroom is reached or the disk is full the
 * recording stops, says so once, and removes its directory (its files,
 * run.json, end.json), so that what it wrote is the program's again.
 *
 * Threads: start, stop and atfork_child on the agent's start/stop path;
 * record_dir and record_end_* on any thread (record_end_signal in a
 * signal handler).
 */
#ifndef AGENT_RECORD_H
#define AGENT_RECORD_H

#include <stddef.h>

struct store;

/* Starts recording st as data.dir says ("off": not at all).  A directory
 * that cannot be made is a warning, not an error: 0 or -errno. */
int record_start(struct store *st, char *err, size_t errlen);

/* The last flush, then the thread ends.  The files stay. */
void record_stop(void);

/* In a forked child: the parent's recording is forgotten, unwritten. */
void record_atfork_child(void);

/* The recording's directory, or "" when there is none (async-signal-
 * safe: a fixed buffer, written before the thread starts, and emptied
 * by its first byte when the directory is given back). */
const char *record_dir(void);

/* Says in end.json that the process is dying of signal sig, with the
 * crash report at report ("" or NULL: none).  Async-signal-safe. */
void record_end_signal(int sig, const char *report);

/* Notes the report of an uncaught exception for end.json, written when
 * the process exits. */
void record_end_report(const char *report);

struct recording_feed;

/* Adds a table kept outside the store (sql/recording.h's feeds) to every
 * recording this process makes; f must live as long as the process.
 * 0 or -ENOSPC. */
int record_add_feed(const struct recording_feed *f);

/* Checks a data.dir value: "auto", "off" or an absolute path. */
int record_dir_canon(const char *text, char *canon, size_t canonlen, char *err,
		     size_t errlen);

#endif
