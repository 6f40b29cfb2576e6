/*
 * cmd_list: the Probing agents on this machine.
 *
 * Agents listen on the abstract unix socket @probing-<pid>, which
 * /proc/net/unix lists (as "@probing-<pid>") for the whole network
 * namespace.  Listening sockets only (the __SO_ACCEPTCON flag): accepted
 * connections carry the same name.  Agents that listen only on TCP are not
 * found this way.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "job.h"
#include "target.h"

#define LIST_MAX 4096		  /* agents shown at most */
#define LIST_STATUS_MS 1000	  /* connect + initialize, per agent */
#define SO_ACCEPTCON_FLAG 0x10000 /* __SO_ACCEPTCON in the Flags column */
#define LIST_CMDLINE_MAX 200

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/* A pid from "@probing-<pid>" exactly, or 0. */
static pid_t agent_pid(const char *path)
{
	const char *p = path + strlen("@probing-");
	long v = 0;

	if (strncmp(path, "@probing-", strlen("@probing-")) || !*p)
		return 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || v > 0x7fffffffL / 10)
			return 0;
		v = v * 10 + (*p - '0');
	}
	return (pid_t)v;
}

/* Fills pids[] (sorted, unique) from /proc/net/unix.  Returns how many,
 * or -1 when the file cannot be read. */
int cli_list_agents(pid_t *pids, int max)
{
	FILE *f = fopen("/proc/net/unix", "re");
	char line[512];
	int n = 0, out = 0;

	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return 0;
	}
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned long flags;
		char path[256];
		pid_t pid;

		/* Num RefCount Protocol Flags Type St Inode Path */
		if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %255s", &flags,
			   path) != 2)
			continue;
		if (!(flags & SO_ACCEPTCON_FLAG))
			continue;
		pid = agent_pid(path);
		if (pid > 0)
			pids[n++] = pid;
	}
	fclose(f);
	qsort(pids, n, sizeof(pid_t), pid_cmp);
	for (int i = 0; i < n; i++)
		if (out == 0 || pids[out - 1] != pids[i])
			pids[out++] = pids[i];
	return out;
}

static const char *agent_status(struct cmd_ctx *ctx, pid_t pid)
{
	struct dap_client *c = NULL;
	cJSON *body = NULL;
	char text[32], err[512];
	int ms = ctx->timeout_given ? ctx->timeout_ms : LIST_STATUS_MS;
	int rc;

	snprintf(text, sizeof(text), "%d", (int)pid);
	rc = cli_target_open(text, ms, &c, &body, err, sizeof(err));
	if (rc == CLI_OK) {
		struct dap_message *resp = NULL;
		dap_client_request(c, "disconnect", NULL, ms, &resp, NULL, 0);
		if (resp)
			dap_message_free(resp);
		dap_client_free(c);
		cJSON_Delete(body);
		return "ok";
	}
	if (rc == CLI_ENOPROC || rc == CLI_ENOAGENT)
		return "gone";
	return "not answering";
}

/* What pids[i] is in a torchrun job, as words for the JOB column. */
static void job_text(const struct cli_job_role *r, char *out, size_t len)
{
	switch (r->kind) {
	case CLI_JOB_LAUNCHER:
		if (r->first == r->last)
			snprintf(out, len, "torchrun of rank %d", r->first);
		else
			snprintf(out, len, "torchrun of ranks %d-%d", r->first,
				 r->last);
		break;
	case CLI_JOB_RANK:
		if (r->world > 0)
			snprintf(out, len, "rank %d of %d (parent %d)",
				 r->rank, r->world, (int)r->parent);
		else
			snprintf(out, len, "rank %d (parent %d)", r->rank,
				 (int)r->parent);
		break;
	case CLI_JOB_CHILD:
		snprintf(out, len, "child of rank %d (parent %d)", r->rank,
			 (int)r->parent);
		break;
	default:
		out[0] = '\0';
	}
}

/* Places row i, then what hangs under it (a launcher's ranks by rank,
 * a rank's children), depth first. */
static void place(const pid_t *pids, const struct cli_job_role *roles,
		  int n, int i, char *done, int *order, int *k)
{
	done[i] = 1;
	order[(*k)++] = i;
	for (;;) {
		int best = -1;

		for (int j = 0; j < n; j++)
			if (!done[j] &&
			    (roles[j].kind == CLI_JOB_RANK ||
			     roles[j].kind == CLI_JOB_CHILD) &&
			    roles[j].parent == pids[i] &&
			    (best < 0 || roles[j].rank < roles[best].rank))
				best = j;
		if (best < 0)
			return;
		place(pids, roles, n, best, done, order, k);
	}
}

/* The rows' order: by pid, but a launcher's ranks right after it and a
 * rank's children right after the rank, where those are listed.  Fills
 * order[] with indexes into pids[]. */
static void job_order(const pid_t *pids, const struct cli_job_role *roles,
		      int n, int *order)
{
	char *done = calloc((size_t)n + 1, 1);
	int k = 0;

	if (!done) {
		for (int i = 0; i < n; i++)
			order[i] = i;
		return;
	}
	for (int i = 0; i < n; i++) {
		int under = 0;

		if (done[i])
			continue;
		if (roles[i].kind == CLI_JOB_RANK ||
		    roles[i].kind == CLI_JOB_CHILD)
			for (int j = 0; j < n; j++)
				under |= j != i && pids[j] == roles[i].parent;
		if (!under)
			place(pids, roles, n, i, done, order, &k);
	}
	for (int i = 0; i < n; i++) /* under a parent never placed */
		if (!done[i])
			place(pids, roles, n, i, done, order, &k);
	free(done);
}

static int cmd_list_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"status", no_argument, NULL, 's'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	static const char *const cols[] = {"pid", "command", "job",
					   "address", "status"};
	enum cli_format fmt = ctx->format;
	struct cli_table *t;
	struct cli_job_role *roles;
	pid_t *pids;
	int c, n, status = 0, tty = cli_isatty(stdout), *order;

	while ((c = getopt_long(argc, argv, ":sf:", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			status = 1;
			break;
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		default:
			return cli_option_error(&cmd_list_entry, c, argc, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error(&cmd_list_entry,
				       "list takes no arguments");
	pids = calloc(LIST_MAX, sizeof(pid_t));
	if (!pids)
		return cli_error(CLI_EFAIL, "out of memory");
	n = cli_list_agents(pids, LIST_MAX);
	if (n < 0) {
		free(pids);
		return cli_error(CLI_EFAIL, "cannot read /proc/net/unix");
	}
	roles = calloc((size_t)n + 1, sizeof(*roles));
	order = calloc((size_t)n + 1, sizeof(*order));
	t = roles && order ? cli_table_new(status ? 5 : 4, cols) : NULL;
	if (!t) {
		free(pids);
		free(roles);
		free(order);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	for (int i = 0; i < n; i++)
		cli_job_role(pids[i], &roles[i]);
	job_order(pids, roles, n, order);
	cli_table_upper_header(t);
	cli_table_align_right(t, 0);
	for (int o = 0; o < n; o++) {
		int i = order[o];
		char pid[16], cmd[LIST_CMDLINE_MAX + 8], job[96], addr[32];
		const char *row[5] = {pid, cmd, job, addr, NULL};

		snprintf(pid, sizeof(pid), "%d", (int)pids[i]);
		cli_target_cmdline(pids[i], cmd, sizeof(cmd), LIST_CMDLINE_MAX);
		job_text(&roles[i], job, sizeof(job));
		snprintf(addr, sizeof(addr), "@probing-%d", (int)pids[i]);
		if (status)
			row[4] = agent_status(ctx, pids[i]);
		cli_table_add(t, row);
	}
	if (n == 0 && tty && fmt <= CLI_FORMAT_TABLE)
		printf("No Probing agents on this machine (agents listening "
		       "only on TCP are not listed).\n");
	else
		cli_table_print(t, stdout, fmt, tty);
	cli_table_free(t);
	free(pids);
	free(roles);
	free(order);
	return CLI_OK;
}

const struct cmd_entry cmd_list_entry = {
	.name = "list",
	.alias = "ls",
	.usage = "[--status] [-f table|json|csv]",
	.summary = "Show the Probing agents running on this machine",
	.help = "Finds every agent listening on its local socket "
		"(@probing-PID) and\n"
		"shows its pid, command line, place in a torchrun job and "
		"address; a\n"
		"launcher's ranks follow it, a rank's children (DataLoader "
		"workers) the\n"
		"rank.  Needs no target.\n"
		"Agents that listen only on TCP are not found.\n"
		"\n"
		"Options:\n"
		"  -s, --status         also connect to each agent (1 s, or "
		"--timeout)\n"
		"                       and show ok, not answering, or gone\n"
		"  -f, --format FORMAT  table (default), json or csv\n",
	.flags = CMD_PAGED,
	.exec = cmd_list_exec,
};
