/*
 * cmd_cluster: every rank of a distributed job at once.
 *
 * The node list comes from one agent of the job (-t ANY_RANK, or the one
 * agent on this machine): its cluster.nodes table, which the rendezvous
 * store, a node file and `cluster add` fill (agent/cluster.h).  Or from a
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
#include "resultdb.h"
#include "stackgroup.h"

#define CLUSTER_NODES_SQL                                                      \
	"SELECT rank, host, addr FROM cluster.nodes ORDER BY rank"
#define CLUSTER_SHOW_SQL                                                       \
	"SELECT rank, local_rank, host, pid, addr, status, "                   \
	"datetime(last_seen, 'unixepoch', 'localtime') AS last_seen "          \
	"FROM cluster.nodes ORDER BY rank"
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

/* -t, or the only agent on this machine. */
static int pick_target(struct cmd_ctx *ctx)
{
	static char text[32];
	pid_t pids[LOCAL_AGENTS_MAX];
	int n;

	if (ctx->target)
		return CLI_OK;
	n = cli_list_agents(pids, LOCAL_AGENTS_MAX);
	if (n == 1) {
		snprintf(text, sizeof(text), "%d", (int)pids[0]);
		ctx->target = text;
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

/* ---- reporting ------------------------------------------------------------ */

static void who(const struct fanout_node *nd, char *out, size_t outlen)
{
	if (nd->rank >= 0)
		snprintf(out, outlen, "rank %lld (%s)", (long long)nd->rank,
			 nd->addr);
	else
		snprintf(out, outlen, "%s", nd->addr);
}

int cluster_report(const struct fanout_node *nodes, size_t n,
		   const struct fanout_result *res, const int *ok,
		   const char *what)
{
	size_t good = 0;
	int common = -1;

	for (size_t i = 0; i < n; i++) {
		char name[400];
		int rc;

		if (ok[i]) {
			good++;
			continue;
		}
		who(&nodes[i], name, sizeof(name));
		if (res[i].rc != CLI_OK) {
			rc = res[i].rc;
			cli_error(rc, "%s: %s", name, res[i].err);
		} else {
			rc = CLI_EFAIL;
			cli_error(rc, "%s: %s", name,
				  res[i].resp ? cli_resp_message(res[i].resp)
					      : "no answer");
		}
		common = common == -1 || common == rc ? rc : -2;
	}
	if (good == n)
		return CLI_OK;
	cli_error(CLI_EPARTIAL, "%s: %zu of %zu nodes answered%s", what, good,
		  n, good ? "; the result is partial" : "");
	return good == 0 && common >= 0 ? common : CLI_EPARTIAL;
}

/* ---- nodes, add ------------------------------------------------------------ */

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
		return cli_error(CLI_EUSAGE, "'cluster nodes' lists what an "
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
		const cJSON *nn = cJSON_GetObjectItemCaseSensitive(resp->body,
								   "nodes");
		if (cli_isatty(stdout))
			printf("%d nodes listed\n",
			       cJSON_IsNumber(nn) ? (int)nn->valuedouble : 0);
	}
	dap_message_free(resp);
	return rc;
}

/* ---- query ------------------------------------------------------------------ */

/* The column names of a query response, or NULL. */
static const cJSON *columns_of(const struct fanout_result *r)
{
	const cJSON *c;

	if (r->rc != CLI_OK || !r->resp || !r->resp->success)
		return NULL;
	c = cJSON_GetObjectItemCaseSensitive(r->resp->body, "columns");
	return cJSON_IsArray(c) && cJSON_GetArraySize(c) > 0 ? c : NULL;
}

static int do_query(struct cmd_ctx *ctx, const struct cluster_opts *o,
		    const struct fanout_node *nodes, size_t n, const char *sql,
		    const char *merge, int max_rows, enum cli_format fmt)
{
	struct fanout_result *res = calloc(n, sizeof(*res));
	int *ok = calloc(n, sizeof(*ok));
	const char *names[CLI_TABLE_COLS_MAX];
	struct resultdb *db = NULL;
	struct cli_table *t = NULL;
	const cJSON *cols = NULL;
	int ncols = 0, rc = CLI_OK, truncated = 0;
	char err[512];
	cJSON *args;

	if (!res || !ok) {
		free(res);
		free(ok);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sql", sql);
	if (max_rows)
		cJSON_AddNumberToObject(args, "maxRows", max_rows);
	fanout_run(nodes, n, "probing/query", args, o->node_timeout_ms, res);
	cJSON_Delete(args);
	(void)ctx;
	/* The columns: the first answer's; others must have as many. */
	for (size_t i = 0; i < n && !cols; i++)
		cols = columns_of(&res[i]);
	if (cols) {
		ncols = cJSON_GetArraySize(cols);
		if (ncols + 2 > CLI_TABLE_COLS_MAX) {
			rc = cli_error(CLI_EFAIL, "too many columns");
			goto out;
		}
		names[0] = "rank";
		names[1] = "host";
		for (int i = 0; i < ncols; i++) {
			const cJSON *nm = cJSON_GetObjectItemCaseSensitive(
				cJSON_GetArrayItem(cols, i), "name");
			names[i + 2] = cJSON_IsString(nm) ? nm->valuestring
							  : "?";
		}
		if (merge && resultdb_new(names + 2, (size_t)ncols, &db, err,
					  sizeof(err))) {
			rc = cli_error(CLI_EFAIL, "%s", err);
			goto out;
		}
		if (!merge && !(t = cli_table_new(ncols + 2, names))) {
			rc = cli_error(CLI_EFAIL, "out of memory");
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		const cJSON *c = columns_of(&res[i]), *rows, *row;
		char rank[32], *cells[CLI_TABLE_COLS_MAX];

		if (!c || cJSON_GetArraySize(c) != ncols)
			continue;
		ok[i] = 1;
		rows = cJSON_GetObjectItemCaseSensitive(res[i].resp->body,
							"rows");
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
			    res[i].resp->body, "truncated")))
			truncated++;
		snprintf(rank, sizeof(rank), "%lld", (long long)nodes[i].rank);
		cJSON_ArrayForEach(row, rows)
		{
			if (db) {
				if (resultdb_add(db, nodes[i].rank,
						 nodes[i].host, row, err,
						 sizeof(err)))
					ok[i] = 0;
				continue;
			}
			cells[0] = nodes[i].rank >= 0 ? rank : NULL;
			cells[1] = (char *)nodes[i].host;
			for (int k = 0; k < ncols; k++)
				cells[k + 2] = cli_json_text(
					cJSON_GetArrayItem(row, k));
			if (cli_table_add(t, (const char *const *)cells))
				ok[i] = 0;
			for (int k = 0; k < ncols; k++)
				free(cells[k + 2]);
		}
	}
	if (db) {
		if (resultdb_query(db, merge, &t, err, sizeof(err))) {
			rc = cli_error(CLI_ESQL, "%s", err);
			goto report;
		}
	} else if (t) {
		cli_table_align_right(t, 0);
	}
	if (t)
		cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	if (truncated)
		cli_error(CLI_OK, "note: %d nodes cut their rows at the "
			  "query's row limit (--max-rows)", truncated);
report:
	{
		int r2 = cluster_report(nodes, n, res, ok, "query");
		/* A bad SQL everywhere is a SQL error, as for one agent. */
		if (r2 == CLI_EFAIL && !cols)
			r2 = CLI_ESQL;
		if (rc == CLI_OK)
			rc = r2;
	}
out:
	cli_table_free(t);
	resultdb_free(db);
	for (size_t i = 0; i < n; i++)
		fanout_result_release(&res[i]);
	free(res);
	free(ok);
	return rc;
}

/* ---- backtrace ------------------------------------------------------------- */

/* The main thread's frames of a probing/backtrace body into s. */
static int main_stack(const cJSON *body, struct sg_stack *s)
{
	const cJSON *threads = cJSON_GetObjectItemCaseSensitive(body, "threads");
	const cJSON *th, *frames, *f;
	struct sg_frame *v;
	size_t k = 0;

	cJSON_ArrayForEach(th, threads)
	{
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(th, "isMain")))
			break;
	}
	if (!th)
		th = cJSON_GetArrayItem(threads, 0); /* no main: the first */
	frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
	v = calloc((size_t)cJSON_GetArraySize(frames) + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(f, frames)
	{
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "func");
		const cJSON *fl = cJSON_GetObjectItemCaseSensitive(f, "file");
		const cJSON *ln = cJSON_GetObjectItemCaseSensitive(f, "line");

		v[k].func = cJSON_IsString(fn) ? fn->valuestring : "?";
		v[k].file = cJSON_IsString(fl) ? fl->valuestring : "?";
		v[k].line = cJSON_IsNumber(ln) ? (int64_t)ln->valuedouble : -1;
		k++;
	}
	s->frames = v;
	s->n = k;
	return 0;
}

/* One frame's line(s) in a group: "12", or "12,15" when ranks differ. */
static void lines_of(const struct sg_stack *st, const struct sg_group *g,
		     size_t d, char *out, size_t outlen)
{
	size_t len = 0;

	out[0] = 0;
	for (size_t m = 0; m < g->n && len + 24 < outlen; m++) {
		int64_t l = st[g->members[m]].frames[d].line;
		int seen = 0;

		for (size_t p = 0; p < m && !seen; p++)
			seen = st[g->members[p]].frames[d].line == l;
		if (!seen)
			len += (size_t)snprintf(out + len, outlen - len,
						"%s%lld", len ? "," : "",
						(long long)l);
	}
}

static void print_groups(const struct sg_stack *st, size_t nst,
			 const struct sg_group *g, size_t ng)
{
	char ranges[4096], lines[256];
	int64_t *ranks = malloc((nst ? nst : 1) * sizeof(*ranks));

	for (size_t i = 0; ranks && i < ng; i++) {
		const struct sg_stack *first = &st[g[i].members[0]];

		for (size_t m = 0; m < g[i].n; m++)
			ranks[m] = st[g[i].members[m]].rank;
		stackgroup_ranges(ranks, g[i].n, ranges, sizeof(ranges));
		printf("%s%s %s (%zu of %zu)", i ? "\n" : "",
		       g[i].n == 1 ? "rank" : "ranks", ranges, g[i].n, nst);
		if (first->n)
			printf(": %s\n", first->frames[0].func);
		else
			printf("\n");
		for (size_t d = 0; d < first->n; d++) {
			lines_of(st, &g[i], d, lines, sizeof(lines));
			printf("  #%-2zu %s (%s:%s)\n", d, first->frames[d].func,
			       first->frames[d].file, lines);
		}
		if (!first->n)
			printf("  (no Python frames)\n");
	}
	free(ranks);
}

static void json_groups(const struct sg_stack *st, const struct sg_group *g,
			size_t ng)
{
	cJSON *arr = cJSON_CreateArray();
	char *text;

	for (size_t i = 0; i < ng; i++) {
		const struct sg_stack *first = &st[g[i].members[0]];
		cJSON *o = cJSON_CreateObject(), *r, *fr;

		r = cJSON_AddArrayToObject(o, "ranks");
		for (size_t m = 0; m < g[i].n; m++)
			cJSON_AddItemToArray(r, cJSON_CreateNumber((double)
				st[g[i].members[m]].rank));
		fr = cJSON_AddArrayToObject(o, "frames");
		for (size_t d = 0; d < first->n; d++) {
			cJSON *f = cJSON_CreateObject();

			cJSON_AddStringToObject(f, "func", first->frames[d].func);
			cJSON_AddStringToObject(f, "file", first->frames[d].file);
			cJSON_AddNumberToObject(f, "line",
						(double)first->frames[d].line);
			cJSON_AddItemToArray(fr, f);
		}
		cJSON_AddItemToArray(arr, o);
	}
	text = cJSON_Print(arr);
	if (text)
		printf("%s\n", text);
	free(text);
	cJSON_Delete(arr);
}

static int do_backtrace(const struct cluster_opts *o,
			const struct fanout_node *nodes, size_t n, int lines,
			enum cli_format fmt)
{
	struct fanout_result *res = calloc(n, sizeof(*res));
	struct sg_stack *st = calloc(n, sizeof(*st));
	int *ok = calloc(n, sizeof(*ok));
	struct sg_group *g = NULL;
	size_t nst = 0, ng = 0;
	int rc;

	if (!res || !st || !ok) {
		free(res);
		free(st);
		free(ok);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	fanout_run(nodes, n, "probing/backtrace", NULL, o->node_timeout_ms,
		   res);
	for (size_t i = 0; i < n; i++) {
		if (res[i].rc != CLI_OK || !res[i].resp ||
		    !res[i].resp->success)
			continue;
		if (main_stack(res[i].resp->body, &st[nst]) == 0) {
			st[nst].rank = nodes[i].rank;
			nst++;
			ok[i] = 1;
		}
	}
	rc = stackgroup_build(st, nst, lines, &g, &ng);
	if (rc == 0 && fmt == CLI_FORMAT_JSON)
		json_groups(st, g, ng);
	else if (rc == 0)
		print_groups(st, nst, g, ng);
	fflush(stdout);
	rc = rc ? cli_error(CLI_EFAIL, "out of memory")
		: cluster_report(nodes, n, res, ok, "backtrace");
	stackgroup_free(g, ng);
	for (size_t i = 0; i < nst; i++)
		free((void *)st[i].frames);
	for (size_t i = 0; i < n; i++)
		fanout_result_release(&res[i]);
	free(res);
	free(st);
	free(ok);
	return rc;
}

/* ---- the command ------------------------------------------------------------ */

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
		return cli_usage_error(ctx->entry, "give a subcommand: nodes, "
				       "add, query, backtrace or flamegraph");
	sub = argv[1];
	argc--;
	argv++;
	o.node_timeout_ms = ctx->timeout_given ? ctx->timeout_ms
					       : CLUSTER_NODE_TIMEOUT_MS;
	if (!strcmp(sub, "flamegraph")) {
		/* Its own options; --nodes among them. */
		for (int i = 1; i + 1 < argc; i++)
			if (!strcmp(argv[i], "--nodes"))
				o.nodes_file = argv[i + 1];
		rc = get_nodes(ctx, &o, &nodes, &n);
		if (rc == CLI_OK)
			rc = cluster_flamegraph(ctx, &o, nodes, n, argc, argv);
		free(nodes);
		return rc;
	}
	while ((c = getopt_long(argc, argv, ":f:n:l", common_opts, NULL)) !=
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
				return cli_usage_error(ctx->entry, "--max-rows "
						       "must be a positive "
						       "number");
			break;
		default:
			return cli_option_error(ctx->entry, c, argc, argv);
		}
	}
	argc -= optind;
	argv += optind;
	if (!strcmp(sub, "nodes")) {
		if (argc)
			return cli_usage_error(ctx->entry, "nodes: no "
					       "arguments");
		return do_nodes(ctx, &o, fmt);
	}
	if (!strcmp(sub, "add"))
		return do_add(ctx, argc, argv);
	if (strcmp(sub, "query") && strcmp(sub, "backtrace"))
		return cli_usage_error(ctx->entry, "unknown subcommand '%s'",
				       sub);
	if (!strcmp(sub, "query") && argc != 1)
		return cli_usage_error(ctx->entry, "query: give the SQL as "
				       "one argument");
	if (!strcmp(sub, "backtrace") && argc)
		return cli_usage_error(ctx->entry, "backtrace: no arguments");
	rc = get_nodes(ctx, &o, &nodes, &n);
	if (rc != CLI_OK)
		return rc;
	if (!strcmp(sub, "query"))
		rc = do_query(ctx, &o, nodes, n, argv[0], merge, max_rows,
			      fmt);
	else
		rc = do_backtrace(&o, nodes, n, lines, fmt);
	free(nodes);
	return rc;
}

const struct cmd_entry cmd_cluster_entry = {
	.name = "cluster",
	.usage = "[--nodes FILE] nodes | add HOST:PORT[=RANK]... | query SQL "
		 "[--merge SQL] | backtrace [--lines] | flamegraph [DURATION] "
		 "[-o FILE] [--per-rank]",
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
		"answer\n"
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
		"  flamegraph [DURATION]  record every rank, merge the "
		"profiles ('cluster\n"
		"                       flamegraph --help')\n"
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
		"  probing -t 4242 cluster backtrace\n",
	.flags = CMD_TARGET,
	.exec = cmd_cluster_exec,
};
