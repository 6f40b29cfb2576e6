/*
 * proc: see proc.h.
 */
#include "proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t cli_proc_environ(pid_t pid, char *buf, size_t size)
{
	char path[64];
	size_t n = 0;
	ssize_t k;
	int fd;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while (n < size - 1 && (k = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)k;
	close(fd);
	buf[n] = '\0';
	return (ssize_t)n;
}

const char *cli_env_value(const char *env, size_t n, const char *name)
{
	size_t k = strlen(name);

	for (const char *v = env; v < env + n; v += strlen(v) + 1)
		if (!strncmp(v, name, k))
			return v + k;
	return NULL;
}

pid_t cli_proc_parent(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	long ppid;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold spaces and parens. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1 || ppid < 0)
		return 0;
	return (pid_t)ppid;
}

int cli_proc_descendants(pid_t root, pid_t *out, int max)
{
	struct {
		pid_t pid, parent;
	} *all = NULL;
	size_t n = 0, cap = 0;
	struct dirent *d;
	DIR *dir = opendir("/proc");
	int got = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		char *end;
		long pid = strtol(d->d_name, &end, 10);

		if (*end || pid <= 0 || pid == root)
			continue;
		if (n == cap) {
			size_t c = cap ? cap * 2 : 256;
			void *bigger = c < CLI_PROC_SCAN_MAX
					       ? realloc(all, c * sizeof(*all))
					       : NULL;

			if (!bigger)
				break;
			all = bigger;
			cap = c;
		}
		all[n].pid = (pid_t)pid;
		all[n].parent = cli_proc_parent((pid_t)pid);
		n++;
	}
	closedir(dir);
	/* Breadth first: out[] grows with each generation found, and each
	 * is looked for among the parents of the rest. */
	for (int from = -1; from < got && got < max; from++) {
		pid_t parent = from < 0 ? root : out[from];

		for (size_t i = 0; i < n && got < max; i++)
			if (all[i].parent == parent)
				out[got++] = all[i].pid;
	}
	free(all);
	return got;
}

void cli_proc_comm(pid_t pid, char *out, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, out, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(out, len, "?");
		return;
	}
	out[n] = '\0';
	for (char *c = out; *c; c++)
		if (*c == '\n' || *c == ';' || (unsigned char)*c < 0x20)
			*c = *c == '\n' ? '\0' : '_';
}
