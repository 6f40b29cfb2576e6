/*
 * recvfs: the SQLite VFS the recording's files are written through
 * ("probing-fdown"): every file it opens is an owned descriptor
 * (common/fdown.h) — moved to FDOWN_MIN or above at once, close-on-exec,
 * and checked by identity before every read, write, lock and close.  A
 * program that closes every descriptor and reopens the numbers never
 * gets a page of ours, and its file is never locked or truncated by us:
 * the call fails (SQLITE_IOERR), the flush fails, and the recording
 * stops as on a full disk.
 *
 * Shared memory is not offered: the recording's connection runs WAL in
 * exclusive locking mode (the WAL index in its own memory), and a file's
 * locks are the POSIX ones of SQLite's own unix VFS, byte for byte, so a
 * reader with the default VFS is kept out while a flush writes.  Other
 * calls (names, delete, access, time, randomness) go to the default VFS;
 * nameless temporary files too.
 *
 * Headroom: a file attached with the URI parameter min_free=N (bytes)
 * never grows where that would leave less than N bytes free on its file
 * system (statvfs's f_bavail): the write fails with SQLITE_FULL, as on a
 * full disk, before the program's disk is full.  Its journal and WAL
 * files take the database's parameter.
 *
 * Threads: any; registered once per process.
 */
#ifndef RECVFS_H
#define RECVFS_H

#define RECVFS_NAME "probing-fdown"

/* Registers the VFS (not as the default).  0, or an SQLite error code. */
int recvfs_register(void);

/* "file:PATH?QUERY" with PATH's %, ? and # escaped, for ATTACH on a
 * connection opened with SQLITE_OPEN_URI.  malloc'd; NULL when out of
 * memory. */
char *recvfs_uri(const char *path, const char *query);

#endif
