/*
 * subprocs: the target's processes.  See subprocs.h.
 */
#include "subprocs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

#define AGENTS_MAX 65536

static int has(const pid_t *pids, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

/* Whether pid's executable is a Python (python3, python3.12, ...). */
static int looks_python(pid_t pid)
{
	char path[64], exe[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	return !strncmp(base, "python", 6);
}

/* `probing -t PID inject`, quietly (its output to /dev/null): 0 when it
 * says the agent runs. */
static int inject(pid_t pid, int timeout_ms)
{
	char target[24], timeout[24];
	pid_t child;
	int status;

	snprintf(target, sizeof(target), "%d", (int)pid);
	snprintf(timeout, sizeof(timeout), "%d", timeout_ms);
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execl("/proc/self/exe", "probing", "-t", target, "--timeout",
		      timeout, "inject", (char *)NULL);
		_exit(127);
	}
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static void add(struct subprocs *s, pid_t pid)
{
	char comm[64];
	size_t i = s->n++;

	memset(&s->nodes[i], 0, sizeof(s->nodes[i]));
	s->nodes[i].rank = -1;
	snprintf(s->nodes[i].addr, sizeof(s->nodes[i].addr), "%d", (int)pid);
	cli_proc_comm(pid, comm, sizeof(comm));
	snprintf(s->labels[i], sizeof(s->labels[i]), "process %d (%s)",
		 (int)pid, comm);
	s->label_of[i] = s->labels[i];
}

int subprocs_find(struct cmd_ctx *ctx, int inject_them, struct subprocs *s)
{
	pid_t *agents = malloc(AGENTS_MAX * sizeof(*agents));
	pid_t kids[SUBPROCS_MAX * 4], root;
	int nagents, nkids, missing = 0, failed = 0;
	char missed[256] = "", *end;
	long v;

	s->n = 0;
	v = ctx->target ? strtol(ctx->target, &end, 10) : 0;
	if (!ctx->target || *end || v <= 0 || v > INT_MAX) {
		free(agents);
		return cli_error(CLI_EUSAGE,
				 "--subprocesses needs a pid on this machine "
				 "(-t PID): its children are found in /proc");
	}
	root = (pid_t)v;
	nagents = agents ? cli_list_agents(agents, AGENTS_MAX) : -1;
	if (nagents < 0 || !has(agents, nagents, root)) {
		free(agents);
		return cli_error(CLI_ENOAGENT,
				 "process %d has no agent (probing -t %d "
				 "inject gives it one)",
				 (int)root, (int)root);
	}
	nkids = cli_proc_descendants(root, kids, SUBPROCS_MAX * 4);
	add(s, root);
	for (int i = 0; i < nkids && s->n < SUBPROCS_MAX; i++) {
		if (has(agents, nagents, kids[i])) {
			add(s, kids[i]);
			continue;
		}
		if (!looks_python(kids[i]))
			continue;
		if (inject_them && inject(kids[i], ctx->timeout_ms) == 0) {
			add(s, kids[i]);
			continue;
		}
		failed += inject_them;
		missing++;
		if (strlen(missed) < sizeof(missed) - 16)
			snprintf(missed + strlen(missed),
				 sizeof(missed) - strlen(missed), "%s%d",
				 missed[0] ? ", " : "", (int)kids[i]);
	}
	free(agents);
	if (missing && inject_them)
		fprintf(stderr,
			"probing: %d Python child process%s could not be "
			"given an agent (%s): left out (probing -t PID "
			"inject says why)\n",
			failed, failed == 1 ? "" : "es", missed);
	else if (missing)
		fprintf(stderr,
			"probing: %d Python child process%s without an agent "
			"left out (%s): --inject gives them one (a forked "
			"child's agent stops at the fork; PROBING=2 starts one "
			"in children that start Python anew)\n",
			missing, missing == 1 ? "" : "es", missed);
	return CLI_OK;
}
