/*
 * cluster_role: see cluster_role.h.
 */
#include "cluster_role.h"
#include "core/env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdown.h"

#define ENVIRON_MAX (8u << 20) /* a starting environment larger: unread */
#define ANCESTORS_MAX 32       /* how far up the parents are followed */

/* What a launcher gives each rank, compared between parent and child. */
static const char *const job_vars[] = {
	"RANK",		 "WORLD_SIZE",	       "LOCAL_RANK",
	"MASTER_ADDR",	 "MASTER_PORT",	       "GROUP_RANK",
	"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
};

static volatile pid_t forked_rank;

void cluster_role_forked(pid_t rank_pid)
{
	forked_rank = rank_pid;
}

/* All of a /proc file, NUL-terminated, in *out (malloc'd); its length,
 * or -errno. */
static ssize_t read_all(const char *path, char **out, size_t cap)
{
	size_t len = 0, size = 4096;
	char *buf = malloc(size + 1), *bigger;
	struct fdown f;
	int rc = fdown_open_take(&f, path, O_RDONLY, 0);

	if (rc || !buf) {
		fdown_close(&f);
		free(buf);
		return rc ? rc : -ENOMEM;
	}
	for (;;) {
		ssize_t n;

		if (len == size) {
			if (size >= cap)
				break;
			size *= 2;
			bigger = realloc(buf, size + 1);
			if (!bigger)
				break;
			buf = bigger;
		}
		n = read(f.fd, buf + len, size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fdown_close(&f);
			if (n < 0) {
				free(buf);
				return -EIO;
			}
			buf[len] = 0;
			*out = buf;
			return (ssize_t)len;
		}
		len += (size_t)n;
	}
	fdown_close(&f);
	free(buf);
	return -E2BIG;
}

/* The value of name in an environ block (NUL-separated), or NULL. */
static const char *environ_get(const char *env, size_t len, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; i < len;) {
		const char *e = env + i;
		size_t el = strnlen(e, len - i);

		if (el > nl && e[nl] == '=' && !memcmp(e, name, nl))
			return e + nl + 1;
		i += el + 1;
	}
	return NULL;
}

/* Whether pid was started with our job environment. */
static int same_job(pid_t pid)
{
	char path[64], *env = NULL;
	ssize_t len;
	int same = 1;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	len = read_all(path, &env, ENVIRON_MAX);
	if (len < 0)
		return 0;
	for (size_t i = 0; i < sizeof(job_vars) / sizeof(*job_vars); i++) {
		const char *ours = env_get(job_vars[i]);
		const char *theirs = environ_get(env, (size_t)len, job_vars[i]);

		if ((ours == NULL) != (theirs == NULL) ||
		    (ours && strcmp(ours, theirs)))
			same = 0;
	}
	free(env);
	return same;
}

/* Whether pid runs the file we run. */
static int same_exe(pid_t pid)
{
	struct stat a, b;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	return stat("/proc/self/exe", &a) == 0 && stat(path, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* pid's parent, or 0. */
static pid_t parent_of(pid_t pid)
{
	char path[64], *stat = NULL, *close_paren;
	long ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_all(path, &stat, 1u << 16) < 0)
		return 0;
	/* "pid (comm) state ppid ...": comm may hold anything, ')' too. */
	close_paren = strrchr(stat, ')');
	if (!close_paren || sscanf(close_paren + 1, " %*c %ld", &ppid) != 1 ||
	    ppid < 0)
		ppid = 0;
	free(stat);
	return (pid_t)ppid;
}

int cluster_role_child_of_rank(pid_t *rank_pid)
{
	pid_t rank = 0, pid = getpid();

	if (forked_rank > 0) {
		*rank_pid = forked_rank;
		return 1;
	}
	if (!env_get("RANK"))
		return 0;
	for (int i = 0; i < ANCESTORS_MAX; i++) {
		pid_t up = parent_of(pid);

		if (up <= 1 || !same_exe(up) || !same_job(up))
			break;
		rank = pid = up;
	}
	if (!rank)
		return 0;
	*rank_pid = rank;
	return 1;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/* What multiprocessing child pid is: 'f' its forkserver (whose children
 * are the workers it starts: the default from 3.14), 'r' its resource
 * tracker (a helper), 0 another process. */
static int mp_helper(pid_t pid)
{
	char path[64], *cmd = NULL;
	ssize_t len;
	int kind = 0;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	len = read_all(path, &cmd, 4096);
	for (ssize_t i = 0; i < len; i++)
		if (!cmd[i])
			cmd[i] = ' '; /* the arguments as one string */
	if (len > 0 && strstr(cmd, "multiprocessing.forkserver"))
		kind = 'f';
	else if (len > 0 && strstr(cmd, "multiprocessing.resource_tracker"))
		kind = 'r';
	free(cmd);
	return kind;
}

/* The same-executable children of pid's main thread into out[n..max):
 * the new n.  Through a forkserver to its children (depth: one more). */
static int add_children(pid_t pid, int depth, pid_t *out, int n, int max)
{
	char path[64], *text = NULL, *p, *end;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	if (read_all(path, &text, 1u << 16) < 0)
		return n;
	for (p = text; n < max; p = end) {
		long c = strtol(p, &end, 10);
		int kind;

		if (end == p)
			break;
		if (c <= 0 || !same_exe((pid_t)c))
			continue;
		/* A forkserver's children have its command line (forked):
		 * every one of them is a worker. */
		kind = depth == 0 ? mp_helper((pid_t)c) : 0;
		if (kind == 'f')
			n = add_children((pid_t)c, 1, out, n, max);
		else if (!kind)
			out[n++] = (pid_t)c;
	}
	free(text);
	return n;
}

int cluster_role_workers(pid_t *out, int max)
{
	int n = add_children(getpid(), 0, out, 0, max);

	qsort(out, (size_t)n, sizeof(*out), cmp_pid);
	return n;
}
