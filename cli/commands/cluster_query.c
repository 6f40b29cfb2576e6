/*
 * cluster_query: `probing cluster query SQL [--merge SQL]` — the SQL on
 * every node at once, rows tagged with rank and host; with --merge, all
 * of them go into a SQLite database of the CLI's own (resultdb.h) as the
 * table `result`, and the merge query's rows are printed instead.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cluster.h"
#include "resultdb.h"

/* The column names of a query response, or NULL. */
static const cJSON *columns_of(const struct fanout_result *r)
{
	const cJSON *c;

	if (r->rc != CLI_OK || !r->resp || !r->resp->success)
		return NULL;
	c = cJSON_GetObjectItemCaseSensitive(r->resp->body, "columns");
	return cJSON_IsArray(c) && cJSON_GetArraySize(c) > 0 ? c : NULL;
}

int cluster_query(const struct cluster_opts *o, const struct fanout_node *nodes,
		  size_t n, const char *sql, const char *merge, int max_rows,
		  enum cli_format fmt)
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
			names[i + 2] =
				cJSON_IsString(nm) ? nm->valuestring : "?";
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
		cli_error(CLI_OK,
			  "note: %d nodes cut their rows at the "
			  "query's row limit (--max-rows)",
			  truncated);
report : {
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
