/*
 * memory_proc: /proc/self/status figures.  See memory_proc.h.
 */
#include "memory_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdown.h"

/* The number after "Key:" on the line starting at line, or -1. */
static long long field(const char *line, const char *key)
{
	size_t n = strlen(key);
	char *end;
	long long v;

	if (strncmp(line, key, n) != 0 || line[n] != ':')
		return -1;
	errno = 0;
	v = strtoll(line + n + 1, &end, 10);
	if (errno || end == line + n + 1)
		return -1;
	return v;
}

int memory_proc_parse(const char *status, struct memory_proc *out)
{
	static const char *const keys[] = {"VmRSS",    "VmSize", "RssFile",
					   "RssShmem", "VmHWM",	 "VmSwap",
					   "Threads"};
	long long v[7] = {-1, -1, -1, -1, -1, -1, -1};
	const char *p = status;

	memset(out, 0, sizeof(*out));
	while (p && *p) {
		for (size_t i = 0; i < 7; i++) {
			long long x = field(p, keys[i]);
			if (x >= 0)
				v[i] = x;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (v[0] < 0)
		return -EINVAL;
#define MB(kb) ((kb) > 0 ? (double)(kb) / 1024.0 : 0.0)
	out->rss = MB(v[0]);
	out->vms = MB(v[1]);
	out->shared = MB(v[2]) + MB(v[3]);
	out->peak = MB(v[4]);
	out->swap = MB(v[5]);
#undef MB
	out->threads = v[6] > 0 ? (long)v[6] : 0;
	return 0;
}

int memory_proc_read(struct memory_proc *out)
{
	char buf[MEMORY_STATUS_MAX];
	ssize_t n;
	size_t len = 0;
	struct fdown f;
	int rc = fdown_open_take(&f, "/proc/self/status", O_RDONLY, 0);

	if (rc)
		return rc;
	while (len < sizeof(buf) - 1 &&
	       (n = read(f.fd, buf + len, sizeof(buf) - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			fdown_close(&f);
			return rc;
		}
		len += (size_t)n;
	}
	fdown_close(&f);
	buf[len] = 0;
	return memory_proc_parse(buf, out);
}
