/*
 * job: see job.h.
 */
#include "job.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "proc.h"

/* The environment a process started with, up to ENV_MAX bytes (torchrun
 * adds RANK at the end of a copy of its own, which may be long). */
#define ENV_MAX (1u << 20)
static char env_buf[ENV_MAX];

/* A variable of env (n bytes) as a number from 0, or -1 (unset, not a
 * number). */
static int env_int(const char *env, size_t n, const char *name)
{
	const char *v = cli_env_value(env, n, name);
	char *end;
	long x;

	if (!v)
		return -1;
	x = strtol(v, &end, 10);
	return end == v || *end || x < 0 || x > 0x7fffffffL ? -1 : (int)x;
}

/* RANK and WORLD_SIZE of pid's environment (-1 where unset or unread),
 * and whether it has LOCAL_RANK (torchrun's).  Returns 0 when the
 * environment was read. */
static int rank_of(pid_t pid, int *rank, int *world, int *local)
{
	ssize_t n = cli_proc_environ(pid, env_buf, sizeof(env_buf));
	size_t len = n > 0 ? (size_t)n : 0;

	*rank = env_int(env_buf, len, "RANK=");
	*world = env_int(env_buf, len, "WORLD_SIZE=");
	if (local)
		*local = cli_env_value(env_buf, len, "LOCAL_RANK=") != NULL;
	return n < 0 ? -1 : 0;
}

static int by_rank(const void *a, const void *b)
{
	const struct cli_job_rank *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

int cli_job_ranks(pid_t launcher, struct cli_job_rank *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0, own, world, local;

	if (!d)
		return 0;
	/* A launcher that has a RANK of its own (a scheduler's node rank,
	 * for torchrun --node_rank=$RANK) starts ranks of other numbers. */
	rank_of(launcher, &own, &world, NULL);
	while (n < max && (e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		int rank;

		if (*end || pid <= 0 || cli_proc_parent((pid_t)pid) != launcher)
			continue;
		if (rank_of((pid_t)pid, &rank, &world, &local) == 0 &&
		    rank >= 0 && local && (own < 0 || rank != own)) {
			out[n].pid = (pid_t)pid;
			out[n].rank = rank;
			n++;
		}
	}
	closedir(d);
	qsort(out, n, sizeof(*out), by_rank);
	return n;
}

void cli_job_role(pid_t pid, struct cli_job_role *r)
{
	static struct cli_job_rank ranks[CLI_JOB_RANKS_MAX];
	int rank, world, prank, pworld;
	pid_t parent = cli_proc_parent(pid);

	memset(r, 0, sizeof(*r));
	r->kind = CLI_JOB_NONE;
	r->rank = r->world = -1;
	if (rank_of(pid, &rank, &world, NULL) < 0)
		return; /* not ours to read */
	/* Ranks among its children first: a launcher may have a RANK. */
	r->nranks = cli_job_ranks(pid, ranks, CLI_JOB_RANKS_MAX);
	if (r->nranks) {
		r->kind = CLI_JOB_LAUNCHER;
		r->first = ranks[0].rank;
		r->first_pid = ranks[0].pid;
		r->last = ranks[r->nranks - 1].rank;
		return;
	}
	if (rank < 0)
		return;
	r->rank = rank;
	r->world = world;
	r->parent = parent;
	/* What a rank started inherits its RANK; a rank's own parent has
	 * none, or another (a launcher's node rank). */
	if (parent > 1 && rank_of(parent, &prank, &pworld, NULL) == 0 &&
	    prank == rank)
		r->kind = CLI_JOB_CHILD;
	else
		r->kind = CLI_JOB_RANK;
}

/* Does pid have an agent listening on its socket (@probing-PID)? */
static int agent_at(pid_t pid)
{
	static pid_t pids[4096];
	int n = cli_list_agents(pids, 4096);

	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

const char *cli_job_target(const char *target, const char *what)
{
	static char text[32];
	struct cli_job_role r;
	char *end, ranks[48];
	long pid = strtol(target, &end, 10);

	if (!*target || *end || pid <= 0 || pid > 0x7fffffffL)
		return target;
	cli_job_role((pid_t)pid, &r);
	/* Its first rank's agent (PROBING=1 torchrun: the launcher's
	 * alone): else the launcher stays the target, and says why. */
	if (r.kind != CLI_JOB_LAUNCHER || !agent_at(r.first_pid))
		return target;
	snprintf(text, sizeof(text), "%d", (int)r.first_pid);
	if (r.first == r.last)
		snprintf(ranks, sizeof(ranks), "rank %d", r.first);
	else
		snprintf(ranks, sizeof(ranks), "ranks %d-%d", r.first, r.last);
	fprintf(stderr,
		"probing: %ld is torchrun's launcher (%s): asking rank %d "
		"(pid %s) for %s\n",
		pid, ranks, r.first, text, what);
	return text;
}
