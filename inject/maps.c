/*
 * maps: /proc/PID/maps; see maps.h.
 */
#include "maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void inject_maps_release(struct inject_maps *m)
{
	free(m->v);
	free(m->text);
	m->v = NULL;
	m->text = NULL;
	m->n = 0;
}

/* Reads the whole file into a heap string (procfs files have no size). */
static int slurp(const char *path, char **out, size_t *outlen, char *err,
		 size_t errlen)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || !buf) {
		int e = fd < 0 ? errno : ENOMEM;
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
		free(buf);
		if (fd >= 0)
			close(fd);
		return e == ENOENT ? -ESRCH : -e;
	}
	for (;;) {
		ssize_t n;

		if (len + 1 == cap) {
			char *bigger;
			if (cap >= INJECT_MAPS_BYTES) {
				snprintf(err, errlen, "%s: over %u MiB", path,
					 INJECT_MAPS_BYTES >> 20);
				free(buf);
				close(fd);
				return -E2BIG;
			}
			bigger = realloc(buf, cap * 2);
			if (!bigger) {
				snprintf(err, errlen, "out of memory");
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = bigger;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			snprintf(err, errlen, "cannot read %s: %s", path,
				 strerror(e));
			free(buf);
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
}

int inject_maps_read(pid_t pid, struct inject_maps *m, char *err, size_t errlen)
{
	char path[64], *text = NULL;
	size_t len = 0;
	int rc;

	memset(m, 0, sizeof(*m));
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	rc = slurp(path, &text, &len, err, errlen);
	if (rc)
		return rc;
	if (len == 0) {
		free(text);
		snprintf(err, errlen,
			 "%s is empty (a zombie or kernel "
			 "thread?)",
			 path);
		return -ESRCH;
	}
	return inject_maps_parse(text, len, m, err, errlen);
}

/* One line: "start-end perms offset dev inode   path". */
static int parse_line(char *line, struct inject_mapping *e)
{
	unsigned long long start, end, off, inode;
	char perms[8];
	int pos = 0;

	if (sscanf(line, "%llx-%llx %7s %llx %*x:%*x %llu %n", &start, &end,
		   perms, &off, &inode, &pos) != 5 ||
	    strlen(perms) != 4 || end < start)
		return -1;
	e->start = start;
	e->end = end;
	e->offset = off;
	e->inode = inode;
	memcpy(e->perms, perms, 5);
	e->path = pos > 0 ? line + pos : "";
	return 0;
}

int inject_maps_parse(char *text, size_t len, struct inject_maps *m, char *err,
		      size_t errlen)
{
	size_t lines = 0, n = 0;
	char *p, *next;

	memset(m, 0, sizeof(*m));
	m->text = text;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	lines += len > 0 && text[len - 1] != '\n';
	if (lines > INJECT_MAPS_MAX) {
		snprintf(err, errlen, "%zu mappings, over %d", lines,
			 INJECT_MAPS_MAX);
		return -E2BIG;
	}
	m->v = calloc(lines ? lines : 1, sizeof(*m->v));
	if (!m->v) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (p = text; p && *p; p = next) {
		next = strchr(p, '\n');
		if (next)
			*next++ = '\0';
		if (*p == '\0')
			continue;
		if (parse_line(p, &m->v[n]) < 0) {
			snprintf(err, errlen, "bad maps line: %.80s", p);
			return -EINVAL;
		}
		n++;
	}
	m->n = n;
	return 0;
}

const struct inject_mapping *inject_maps_at(const struct inject_maps *m,
					    uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->v[mid].start)
			hi = mid;
		else if (addr >= m->v[mid].end)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

static int has_perms(const struct inject_mapping *e, const char *perms)
{
	for (const char *c = perms; *c; c++)
		if (!strchr(e->perms, *c))
			return 0;
	return 1;
}

int inject_maps_covers(const struct inject_maps *m, uint64_t addr, uint64_t len,
		       const char *perms)
{
	uint64_t end = addr + len;

	if (end < addr)
		return 0;
	while (addr < end) {
		const struct inject_mapping *e = inject_maps_at(m, addr);

		if (!e || !has_perms(e, perms))
			return 0;
		addr = e->end;
	}
	return 1;
}

int inject_maps_named(const char *path, const char *const *prefixes)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (; *prefixes; prefixes++)
		if (!strncmp(base, *prefixes, strlen(*prefixes)))
			return 1;
	return 0;
}

uint64_t inject_maps_base(const struct inject_maps *m, const char *path)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].offset == 0 && !strcmp(m->v[i].path, path))
			return m->v[i].start;
	return 0;
}
