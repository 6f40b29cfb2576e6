/*
 * maps: a process's memory map, read from /proc/PID/maps.
 *
 * A snapshot of one moment: the process keeps running and may map or
 * unmap afterwards.  What the injection relies on (libc, the Python
 * library, the caves) is mapped for the life of the process, so a snapshot
 * taken before the thread is stopped stays true for those.
 *
 * At most INJECT_MAPS_MAX entries: a larger map is an error, not a cut
 * (what we look for could be in the part not read).
 */
#ifndef INJECT_MAPS_H
#define INJECT_MAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define INJECT_MAPS_MAX 65536
#define INJECT_MAPS_BYTES (64u << 20) /* of /proc/PID/maps text */

struct inject_mapping {
	uint64_t start, end; /* [start, end) */
	uint64_t offset;     /* in the file */
	uint64_t inode;
	char perms[5];	  /* "r-xp" */
	const char *path; /* "" when anonymous; "[stack]"; may end in
			     " (deleted)"; points into the snapshot */
};

struct inject_maps {
	struct inject_mapping *v; /* sorted by start, as the kernel lists */
	size_t n;
	char *text; /* owns the strings */
};

/* Reads pid's map.  Returns 0, or -errno (-ESRCH: no such process,
 * -EACCES: not allowed, -E2BIG: too large) with a message.  Release with
 * inject_maps_release() in either case. */
int inject_maps_read(pid_t pid, struct inject_maps *m, char *err,
		     size_t errlen);

/* Parses the text of a maps file (takes ownership of text, a heap string
 * of len bytes).  For inject_maps_read and the tests. */
int inject_maps_parse(char *text, size_t len, struct inject_maps *m, char *err,
		      size_t errlen);

void inject_maps_release(struct inject_maps *m);

/* The mapping that contains addr, or NULL. */
const struct inject_mapping *inject_maps_at(const struct inject_maps *m,
					    uint64_t addr);

/* Whether [addr, addr + len) lies in mappings (one or adjacent ones) whose
 * permissions all contain each of the characters of perms ("rx", "rw"). */
int inject_maps_covers(const struct inject_maps *m, uint64_t addr, uint64_t len,
		       const char *perms);

/*
 * Whether the file name of path (after the last '/') starts with one of
 * the prefixes, a NULL-terminated list ("libc.so", "ld-linux").
 */
int inject_maps_named(const char *path, const char *const *prefixes);

/* The start of the file's mapping at offset 0 (its load base), or 0. */
uint64_t inject_maps_base(const struct inject_maps *m, const char *path);

#endif
