/*
 * cmd_cluster: every rank of a distributed job at once.
 *
 * The node list comes from one agent of the job (-t ANY_RANK, or the one
 * agent on this machine): its cluster.nodes table, which the rendezvous
 * store, a node file and `cluster add` fill (agent/cluster/cluster.h).  Or from a
 * node file given with --nodes, without asking any agent.  Then every
 * node gets the same request at once (fanout.h); rows come back tagged
 * with rank and host.  Nodes that do not answer are named on stderr and
 * the exit code says the result is partial: never silently dropped.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "job.h"
#include "recorded.h"

#define CLUSTER_NODES_SQL                                                      \
	"SELECT rank, host, addr FROM cluster.nodes WHERE role = 'rank' "      \
	"ORDER BY rank"
#define CLUSTER_SHOW_SQL                                                       \
	"SELECT rank, role, local_rank, host, pid, addr, status, "             \
	"datetime(last_seen, 'unixepoch', 'localtime') AS last_seen "          \
	"FROM cluster.nodes"
#define LOCAL_AGENTS_MAX 4096

static const struct option common_opts[] = {
	{"nodes", required_argument, NULL, 'N'},
	{"merge", required_argument, NULL, 'm'},
	{"lines", no_argument, NULL, 'l'},
	{"format", required_argument, NULL, 'f'},
	{"max-rows", required_argument, NULL, 'n'},
	{NULL, 0, NULL, 0},
};

/* ---- the target and the node list ---------------------------------------- */

/* -t (a launcher's job through its first rank), or the only agent on
 * this machine, or the only job's. */
static int pick_target(struct cmd_ctx *ctx)
{
	static char text[32];
	pid_t pids[LOCAL_AGENTS_MAX], launcher = 0;
	int n, jobs = 0, others = 0;

	if (ctx->target) {
		ctx->target = cli_job_target(ctx->target, "the job");
		return CLI_OK;
	}
	n = cli_list_agents(pids, LOCAL_AGENTS_MAX);
	if (n == 1) {
		snprintf(text, sizeof(text), "%d", (int)pids[0]);
		ctx->target = cli_job_target(text, "the job");
		return CLI_OK;
	}
	/* Several: one torchrun job's (its launcher, ranks and their
	 * children) and nothing else is that job. */
	for (int i = 0; i < n; i++) {
		struct cli_job_role r;

		cli_job_role(pids[i], &r);
		if (r.kind == CLI_JOB_LAUNCHER) {
			jobs++;
			launcher = pids[i];
		} else if (r.kind == CLI_JOB_NONE) {
			others++;
		}
	}
	if (n > 1 && jobs == 1 && !others) {
		snprintf(text, sizeof(text), "%d", (int)launcher);
		ctx->target = cli_job_target(text, "the job");
		return CLI_OK;
	}
	return cli_usage_error(ctx->entry,
			       n == 0 ? "no agent on this machine: give -t "
					"HOST:PORT of any rank, or --nodes FILE"
				      : "%d agents on this machine: give -t "
					"with any rank's pid or HOST:PORT",
			       n);
}

/* One probing/query to the target; the response in *resp. */
static int target_query(struct cmd_ctx *ctx, const char *sql,
			struct dap_message **resp)
{
	cJSON *args;
	int rc;

	rc = pick_target(ctx);
	if (rc == CLI_OK && !ctx->client)
		rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sql", sql);
	rc = cli_request(ctx, "probing/query", args, ctx->timeout_ms, resp);
	if (rc == CLI_OK && !(*resp)->success) {
		rc = cli_error(CLI_EFAIL, "the agent cannot list the nodes: %s",
			       cli_resp_message(*resp));
		dap_message_free(*resp);
		*resp = NULL;
	}
	return rc;
}

/*
 * -t names a job that has ended — one of its ranks' recordings (a pid, a
 * run's name or directory) or the job's directory (job-ID): its ranks'
 * recordings are the nodes.  1 with them, 0 when -t names no recording.
 */
static int ended_job_nodes(struct cmd_ctx *ctx, struct fanout_node **out,
			   size_t *n)
{
	char dir[RUNDIR_PATH_MAX];
	const char *base = ctx->target ? strrchr(ctx->target, '/') : NULL;
	struct run_info one, *ranks = NULL;
	struct fanout_node *v;
	size_t k = 0;

	base = base ? base + 1 : ctx->target;
	if (!base)
		return 0;
	if (!strncmp(base, "job-", 4)) {
		if (recorded_job(base, &ranks, &k))
			return -ENOMEM;
	} else if (recorded_find(ctx->target, dir, sizeof(dir)) == 1 &&
		   recorded_info(dir, &one) == 0) {
		if (one.job[0] && recorded_job(one.job, &ranks, &k))
			return -ENOMEM;
		/* Not a rank of a job: itself alone. */
		if (!one.job[0] && !one.alive)
			ranks = malloc(sizeof(*ranks));
		if (!one.job[0] && ranks) {
			ranks[0] = one;
			k = 1;
		}
	}
	if (!k) {
		free(ranks);
		return 0;
	}
	if (k > FANOUT_NODES_MAX)
		k = FANOUT_NODES_MAX;
	v = calloc(k, sizeof(*v));
	if (!v) {
		free(ranks);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++) {
		v[i].rank = ranks[i].rank;
		snprintf(v[i].host, sizeof(v[i].host), "%s", ranks[i].host);
		snprintf(v[i].rec, sizeof(v[i].rec), "%s", ranks[i].dir);
		snprintf(v[i].addr, sizeof(v[i].addr), "%.*s",
			 (int)sizeof(v[i].addr) - 1, ranks[i].name);
	}
	fprintf(stderr, "probing: reading the recordings of %zu rank%s of %s\n",
		k, k == 1 ? "" : "s",
		ranks[0].job[0] ? ranks[0].job : ctx->target);
	free(ranks);
	*out = v;
	*n = k;
	return 1;
}

static int get_nodes(struct cmd_ctx *ctx, const struct cluster_opts *o,
		     struct fanout_node **out, size_t *n)
{
	struct dap_message *resp = NULL;
	const cJSON *rows, *row;
	struct fanout_node *v;
	char err[512];
	size_t k = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (o->nodes_file) {
		rc = fanout_read_nodes(o->nodes_file, out, err, sizeof(err));
		if (rc < 0)
			return cli_error(CLI_EUSAGE, "%s", err);
		if (rc == 0)
			return cli_error(CLI_EUSAGE, "%s lists no nodes",
					 o->nodes_file);
		*n = (size_t)rc;
		return CLI_OK;
	}
	rc = ended_job_nodes(ctx, out, n);
	if (rc == 1)
		return CLI_OK;
	if (rc < 0)
		return cli_error(CLI_EFAIL, "out of memory");
	rc = target_query(ctx, CLUSTER_NODES_SQL, &resp);
	if (rc != CLI_OK)
		return rc;
	rows = cJSON_GetObjectItemCaseSensitive(resp->body, "rows");
	v = calloc((size_t)cJSON_GetArraySize(rows) + 1, sizeof(*v));
	if (!v)
		rows = NULL;
	cJSON_ArrayForEach(row, rows)
	{
		const cJSON *r = cJSON_GetArrayItem(row, 0);
		const cJSON *h = cJSON_GetArrayItem(row, 1);
		const cJSON *a = cJSON_GetArrayItem(row, 2);

		if (!cJSON_IsString(a))
			continue;
		v[k].rank = cJSON_IsNumber(r) ? (int64_t)r->valuedouble : -1;
		snprintf(v[k].host, sizeof(v[k].host), "%s",
			 cJSON_IsString(h) ? h->valuestring : "");
		snprintf(v[k].addr, sizeof(v[k].addr), "%s", a->valuestring);
		k++;
	}
	dap_message_free(resp);
	if (!v)
		return cli_error(CLI_EFAIL, "out of memory");
	if (k == 0) {
		free(v);
		return cli_error(CLI_EFAIL,
				 "the agent at %s knows no nodes: it is not in "
				 "a torch.distributed job (or has not "
				 "registered yet: see 'probing config "
				 "cluster.status'); add nodes with 'probing "
				 "cluster add HOST:PORT...' or give --nodes "
				 "FILE",
				 ctx->target);
	}
	*out = v;
	*n = k;
	return CLI_OK;
}

/* ---- reporting ---------------------------------------------------------- */

static void who(const struct fanout_node *nd, char *out, size_t outlen)
{
	if (nd->rank >= 0)
		snprintf(out, outlen, "rank %lld (%s)", (long long)nd->rank,
			 nd->addr);
	else
		snprintf(out, outlen, "%s", nd->addr);
}

const char *cluster_why_failed(const struct fanout_result *r)
{
	if (r->rc != CLI_OK)
		return r->err;
	return r->resp ? cli_resp_message(r->resp) : "no answer";
}

/* All of n failed, each for the same reason (a bad SQL, say): that
 * reason once, or NULL. */
static const char *same_failure(const struct fanout_result *res,
				const int *ok, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ok[i] || (res[i].rc != res[0].rc) ||
		    strcmp(cluster_why_failed(&res[i]),
			   cluster_why_failed(&res[0])))
			return NULL;
	return n ? cluster_why_failed(&res[0]) : NULL;
}

int cluster_report(const struct fanout_node *nodes, size_t n,
		   const struct fanout_result *res, const int *ok,
		   const char *what)
{
	const char *same = same_failure(res, ok, n);
	size_t good = 0;
	int common = -1;

	if (same && n > 1) {
		/* Not the nodes' fault: said once, without "0 of N". */
		int rc = res[0].rc != CLI_OK ? res[0].rc : CLI_EFAIL;

		return cli_error(rc, "%s failed on all %zu nodes: %s", what, n,
				 same);
	}
	for (size_t i = 0; i < n; i++) {
		char name[400];
		int rc;

		if (ok[i]) {
			good++;
			continue;
		}
		who(&nodes[i], name, sizeof(name));
		rc = res[i].rc != CLI_OK ? res[i].rc : CLI_EFAIL;
		cli_error(rc, "%s: %s", name, cluster_why_failed(&res[i]));
		common = common == -1 || common == rc ? rc : -2;
	}
	if (good == n)
		return CLI_OK;
	cli_error(CLI_EPARTIAL, "%s: %zu of %zu nodes answered%s", what, good,
		  n, good ? "; the result is partial" : "");
	return good == 0 && common >= 0 ? common : CLI_EPARTIAL;
}

/* ---- nodes, add --------------------------------------------------------- */

static int show_rows(const cJSON *body, enum cli_format fmt)
{
	const cJSON *cols = cJSON_GetObjectItemCaseSensitive(body, "columns");
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(body, "rows");
	int ncols = cJSON_GetArraySize(cols);
	const char *names[CLI_TABLE_COLS_MAX];
	char *cells[CLI_TABLE_COLS_MAX];
	struct cli_table *t;
	const cJSON *row;

	if (ncols < 1 || ncols > CLI_TABLE_COLS_MAX)
		return cli_error(CLI_EFAIL, "a malformed reply");
	for (int i = 0; i < ncols; i++) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetArrayItem(cols, i), "name");
		names[i] = cJSON_IsString(nm) ? nm->valuestring : "?";
	}
	t = cli_table_new(ncols, names);
	if (!t)
		return cli_error(CLI_EFAIL, "out of memory");
	cJSON_ArrayForEach(row, rows)
	{
		for (int i = 0; i < ncols; i++)
			cells[i] = cli_json_text(cJSON_GetArrayItem(row, i));
		cli_table_add(t, (const char *const *)cells);
		for (int i = 0; i < ncols; i++)
			free(cells[i]);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
	return CLI_OK;
}

static int do_nodes(struct cmd_ctx *ctx, const struct cluster_opts *o,
		    enum cli_format fmt)
{
	struct dap_message *resp = NULL;
	int rc;

	if (o->nodes_file)
		return cli_error(CLI_EUSAGE,
				 "'cluster nodes' lists what an "
				 "agent knows; with --nodes, read the file");
	rc = target_query(ctx, CLUSTER_SHOW_SQL, &resp);
	if (rc != CLI_OK)
		return rc;
	rc = show_rows(resp->body, fmt);
	dap_message_free(resp);
	return rc;
}

static int do_add(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct dap_message *resp = NULL;
	cJSON *args, *add;
	int rc;

	if (argc < 1)
		return cli_usage_error(ctx->entry, "add: give HOST:PORT[=RANK]"
						   "...");
	args = cJSON_CreateObject();
	add = cJSON_AddArrayToObject(args, "add");
	for (int i = 0; i < argc; i++) {
		char addr[DAP_ADDR_TEXT_MAX], *eq, *end;
		cJSON *e = cJSON_CreateObject();

		snprintf(addr, sizeof(addr), "%s", argv[i]);
		eq = strrchr(addr, '=');
		if (eq) {
			long long r;

			*eq = 0;
			errno = 0;
			r = strtoll(eq + 1, &end, 10);
			if (errno || *end || end == eq + 1 || r < 0) {
				cJSON_Delete(e);
				cJSON_Delete(args);
				return cli_usage_error(ctx->entry,
						       "add: bad rank in '%s'",
						       argv[i]);
			}
			cJSON_AddNumberToObject(e, "rank", (double)r);
		}
		cJSON_AddStringToObject(e, "addr", addr);
		cJSON_AddItemToArray(add, e);
	}
	rc = pick_target(ctx);
	if (rc == CLI_OK)
		rc = cli_connect(ctx, 1);
	if (rc != CLI_OK) {
		cJSON_Delete(args);
		return rc;
	}
	rc = cli_request(ctx, "probing/cluster", args, ctx->timeout_ms, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	} else {
		const cJSON *nn =
			cJSON_GetObjectItemCaseSensitive(resp->body, "nodes");
		if (cli_isatty(stdout))
			printf("%d nodes listed\n",
			       cJSON_IsNumber(nn) ? (int)nn->valuedouble : 0);
	}
	dap_message_free(resp);
	return rc;
}

/* ---- the command -------------------------------------------------------- */

static int cmd_cluster_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct cluster_opts o = {0};
	enum cli_format fmt = ctx->format;
	const char *sub, *merge = NULL;
	struct fanout_node *nodes = NULL;
	int c, lines = 0, max_rows = 0, rc;
	size_t n = 0;

	/* --nodes FILE may come before the subcommand too. */
	while (argc > 1 && !strncmp(argv[1], "--nodes", 7)) {
		if (argv[1][7] == '=') {
			o.nodes_file = argv[1] + 8;
		} else if (!argv[1][7] && argc > 2) {
			o.nodes_file = argv[2];
			argc--;
			argv++;
		} else {
			break;
		}
		argc--;
		argv++;
	}
	if (argc < 2)
		return cli_usage_error(ctx->entry,
				       "give a subcommand: nodes, "
				       "add, query, backtrace, hang, "
				       "flamegraph or trace");
	sub = argv[1];
	argc--;
	argv++;
	o.node_timeout_ms =
		ctx->timeout_given ? ctx->timeout_ms : CLUSTER_NODE_TIMEOUT_MS;
	if (!strcmp(sub, "flamegraph") || !strcmp(sub, "trace")) {
		/* Its own options; --nodes among them. */
		for (int i = 1; i + 1 < argc; i++)
			if (!strcmp(argv[i], "--nodes"))
				o.nodes_file = argv[i + 1];
		rc = get_nodes(ctx, &o, &nodes, &n);
		if (rc == CLI_OK && sub[0] == 't')
			rc = cluster_trace(ctx, &o, nodes, n, argc, argv);
		else if (rc == CLI_OK)
			rc = cluster_flamegraph(ctx, &o, nodes, n, argc, argv);
		free(nodes);
		return rc;
	}
	while ((c = getopt_long(argc, argv, ":f:n:", common_opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'N':
			o.nodes_file = optarg;
			break;
		case 'm':
			merge = optarg;
			break;
		case 'l':
			lines = 1;
			break;
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		case 'n':
			if (cli_parse_ms(optarg, &max_rows) < 0)
				return cli_usage_error(ctx->entry,
						       "--max-rows "
						       "must be a positive "
						       "number");
			break;
		default:
			return cli_option_error(ctx->entry, c, argc, argv);
		}
	}
	argc -= optind;
	argv += optind;
	/* The original Probing's "monitor all cluster nodes". */
	if (!strcmp(sub, "attach"))
		sub = "nodes";
	if (!strcmp(sub, "nodes")) {
		if (argc)
			return cli_usage_error(ctx->entry, "nodes: no "
							   "arguments");
		return do_nodes(ctx, &o, fmt);
	}
	if (!strcmp(sub, "add"))
		return do_add(ctx, argc, argv);
	if (strcmp(sub, "query") && strcmp(sub, "backtrace") &&
	    strcmp(sub, "hang"))
		return cli_usage_error(ctx->entry,
				       "unknown subcommand '%s' (nodes, add, "
				       "query, backtrace, hang, flamegraph, "
				       "trace)",
				       sub);
	if (!strcmp(sub, "query") && argc != 1)
		return cli_usage_error(ctx->entry, "query: give the SQL as "
						   "one argument");
	if ((!strcmp(sub, "backtrace") || !strcmp(sub, "hang")) && argc)
		return cli_usage_error(ctx->entry, "%s: no arguments", sub);
	rc = get_nodes(ctx, &o, &nodes, &n);
	if (rc != CLI_OK)
		return rc;
	if (!strcmp(sub, "query"))
		rc = cluster_query(&o, nodes, n, argv[0], merge, max_rows, fmt);
	else if (!strcmp(sub, "hang"))
		rc = cluster_hang(&o, nodes, n, fmt);
	else
		rc = cluster_backtrace(&o, nodes, n, lines, fmt);
	free(nodes);
	return rc;
}

const struct cmd_entry cmd_cluster_entry = {
	.name = "cluster",
	.usage = "[--nodes FILE] nodes | add HOST:PORT[=RANK]... | query SQL "
		 "[--merge SQL] | backtrace [--lines] | hang | flamegraph "
		 "[DURATION] "
		 "[-o FILE] [--as FORMAT] [--per-rank] | trace [DURATION] "
		 "-o FILE.json",
	.summary = "Every rank of a distributed job at once",
	.help = "The nodes are what the target agent lists in cluster.nodes "
		"(-t ANY_RANK; without\n"
		"-t, the only agent on this machine): in a torchrun job every "
		"rank registers\n"
		"in the job's rendezvous store; elsewhere add them with "
		"'cluster add' or a\n"
		"node file (PROBING_NODES for the agent, --nodes FILE here: "
		"\"HOST:PORT [RANK]\"\n"
		"per line).  Each command goes to every node at once; nodes "
		"that do not\n"
		"answer are named on stderr and the exit code is 13 (partial "
		"result).\n"
		"\n"
		"Subcommands:\n"
		"  nodes                the node list with status and last "
		"answer, each rank's\n"
		"                       DataLoader workers under it (role "
		"worker; also:\n"
		"                       attach, the original Probing's name)\n"
		"  add HOST:PORT[=RANK]...  add nodes to the target's list\n"
		"  query SQL            SQL on every node; rows tagged with "
		"rank and host\n"
		"    --merge SQL        then SQL over them all as table "
		"'result' (local SQLite)\n"
		"    -n, --max-rows N   rows per node at most\n"
		"  backtrace            every rank's main thread, identical "
		"stacks grouped, the\n"
		"                       odd ones out first\n"
		"    --lines            stacks differing only in line numbers "
		"are different\n"
		"  hang                 for a stuck job: each rank's last "
		"collective (from\n"
		"                       python.comm_collective), a verdict "
		"on who waits for\n"
		"                       whom, then the stacks with native "
		"frames (a rank the\n"
		"                       others wait for first)\n"
		"  flamegraph [DURATION]  record every rank at once (default "
		"10s), put the\n"
		"                       profiles together\n"
		"    -o FILE            FILE.svg, FILE.folded, "
		"FILE.speedscope.json, or FILE.json\n"
		"                       (Chrome trace: a process per rank, "
		"on one clock)\n"
		"    --as FORMAT        svg, folded, speedscope or chrome "
		"(stdout without -o)\n"
		"    --per-rank         a root frame \"rank N\" per rank "
		"(speedscope: a profile\n"
		"                       per rank); merged otherwise\n"
		"    --idle, --lines, --tasks, --hz N, -n/--top N   as for "
		"'probing flamegraph'\n"
		"  trace [DURATION]     every rank's timeline of the same "
		"window (default 10s) in\n"
		"                       one Chrome trace, a process per "
		"rank on one clock\n"
		"    -o FILE.json       where (stdout without -o, a pipe "
		"only)\n"
		"    --hz N, --no-samples, --no-torch, --step-rate N   as "
		"for 'probing trace'\n"
		"\n"
		"Options:\n"
		"      --nodes FILE     the nodes from FILE, not from an "
		"agent\n"
		"  -f, --format FORMAT  table, json or csv\n"
		"The global --timeout is the time each node gets (default "
		"5000 ms).\n"
		"\n"
		"Examples:\n"
		"  probing -t 4242 cluster nodes\n"
		"  probing -t 4242 cluster query 'SELECT func FROM "
		"python.backtrace WHERE depth=0'\n"
		"  probing -t 4242 cluster query \"SELECT func FROM "
		"python.backtrace\" \\\n"
		"      --merge 'SELECT func, count(*) FROM result GROUP BY "
		"func'\n"
		"  probing -t 4242 cluster backtrace\n"
		"  probing -t 4242 cluster hang\n"
		"  probing -t 4242 cluster trace 10s -o job.json\n",
	.flags = CMD_TARGET,
	.exec = cmd_cluster_exec,
};
