/*
 * cmd_query: SQL against the agent's store (probing/query).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

#define QUERY_SQL_MAX (1u << 20)
#define QUERY_GRACE_MS 2000

/* The arguments joined by spaces, or stdin for "-".  NULL after saying
 * why. */
static char *gather_sql(int argc, char **argv)
{
	size_t len = 0;
	char *sql;

	if (argc == 1 && !strcmp(argv[0], "-")) {
		sql = malloc(QUERY_SQL_MAX + 1);
		if (!sql)
			return NULL;
		len = fread(sql, 1, QUERY_SQL_MAX + 1, stdin);
		if (len > QUERY_SQL_MAX) {
			free(sql);
			cli_error(CLI_EUSAGE, "SQL on stdin is over 1 MiB");
			return NULL;
		}
		sql[len] = '\0';
		return sql;
	}
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (len > QUERY_SQL_MAX) {
		cli_error(CLI_EUSAGE, "SQL is over 1 MiB");
		return NULL;
	}
	sql = calloc(1, len + 1);
	if (!sql)
		return NULL;
	for (int i = 0; i < argc; i++) {
		if (i)
			strcat(sql, " ");
		strcat(sql, argv[i]);
	}
	return sql;
}

/* JSON: an array of objects, values as the agent typed them. */
static void print_json(const cJSON *cols, const cJSON *rows)
{
	const cJSON *row;
	int n = 0;

	fputc('[', stdout);
	cJSON_ArrayForEach(row, rows)
	{
		cJSON *obj = cJSON_CreateObject();
		const cJSON *col = cols ? cols->child : NULL, *v;
		char *text;

		cJSON_ArrayForEach(v, row)
		{
			const cJSON *name =
				col ? cJSON_GetObjectItemCaseSensitive(col,
								       "name")
				    : NULL;
			cJSON_AddItemToObject(
				obj,
				cJSON_IsString(name) ? name->valuestring : "?",
				cJSON_Duplicate(v, 1));
			col = col ? col->next : NULL;
		}
		text = cJSON_PrintUnformatted(obj);
		printf("%s%s", n++ ? ",\n  " : "\n  ", text ? text : "{}");
		free(text);
		cJSON_Delete(obj);
	}
	fputs(n ? "\n]\n" : "]\n", stdout);
}

/* Table and CSV: through cli_table. */
static int print_table(const cJSON *cols, const cJSON *rows,
		       enum cli_format fmt, int tty)
{
	int ncols = cJSON_GetArraySize(cols), r = 0;
	const char **names, **cells;
	int *numeric;
	struct cli_table *t;
	const cJSON *col, *row;

	if (ncols <= 0 || ncols > CLI_TABLE_COLS_MAX)
		return cli_error(CLI_EFAIL, "the result has %d columns", ncols);
	names = calloc(ncols, sizeof(char *));
	cells = calloc(ncols, sizeof(char *));
	numeric = calloc(ncols, sizeof(int));
	if (!names || !cells || !numeric)
		goto oom;
	cJSON_ArrayForEach(col, cols)
	{
		const cJSON *name =
			cJSON_GetObjectItemCaseSensitive(col, "name");
		numeric[r] = 1;
		names[r++] = cJSON_IsString(name) ? name->valuestring : "?";
	}
	t = cli_table_new(ncols, names);
	if (!t)
		goto oom;
	cJSON_ArrayForEach(row, rows)
	{
		const cJSON *v;
		int c = 0;

		memset(cells, 0, ncols * sizeof(char *));
		cJSON_ArrayForEach(v, row)
		{
			if (c == ncols)
				break;
			if (!cJSON_IsNumber(v) && !cJSON_IsNull(v))
				numeric[c] = 0;
			cells[c++] = cli_json_text(v);
		}
		cli_table_add(t, cells);
		for (c = 0; c < ncols; c++)
			free((char *)cells[c]);
	}
	for (int c = 0; c < ncols; c++)
		if (numeric[c])
			cli_table_align_right(t, c);
	cli_table_print(t, stdout, fmt, tty);
	cli_table_free(t);
	free(names);
	free(cells);
	free(numeric);
	return CLI_OK;
oom:
	free(names);
	free(cells);
	free(numeric);
	return cli_error(CLI_EFAIL, "out of memory");
}

static int show(const cJSON *body, enum cli_format fmt)
{
	const cJSON *cols = cJSON_GetObjectItemCaseSensitive(body, "columns");
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(body, "rows");
	int truncated = cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(body, "truncated"));
	const cJSON *notes, *note;
	int tty = cli_isatty(stdout), n, rc, missing;

	if (!cJSON_IsArray(cols) || !cJSON_IsArray(rows))
		return cli_error(CLI_EFAIL,
				 "probing/query: reply without columns/rows");
	n = cJSON_GetArraySize(rows);
	if (fmt == CLI_FORMAT_JSON) {
		print_json(cols, rows);
		rc = CLI_OK;
	} else if (cJSON_GetArraySize(cols) == 0) {
		rc = CLI_OK; /* a statement without a result */
	} else {
		rc = print_table(cols, rows, fmt, tty);
	}
	if (rc != CLI_OK)
		return rc;
	/* Why an empty result is empty, when the agent knows (a recorder
	 * that is off): on stderr, the result stays parseable. */
	notes = cJSON_GetObjectItemCaseSensitive(body, "notes");
	cJSON_ArrayForEach(note, notes)
	{
		if (cJSON_IsString(note))
			cli_error(CLI_OK, "note: %s", note->valuestring);
	}
	if (tty && fmt <= CLI_FORMAT_TABLE)
		printf("(%d row%s%s)\n", n, n == 1 ? "" : "s",
		       truncated ? ", truncated" : "");
	else if (truncated)
		cli_error(CLI_OK,
			  "warning: the result was cut at %d rows "
			  "(--max-rows raises the cap)",
			  n);
	/* global.*: ranks that did not answer make the result partial. */
	missing = cJSON_GetArraySize(
		cJSON_GetObjectItemCaseSensitive(body, "missingRanks"));
	if (missing > 0)
		return cli_error(CLI_EPARTIAL,
				 "the result is partial: %d rank%s did not "
				 "answer (notes above)",
				 missing, missing == 1 ? "" : "s");
	return CLI_OK;
}

static int cmd_query_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"max-rows", required_argument, NULL, 'n'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	struct dap_message *resp = NULL;
	int c, rc, max_rows = 0, wait = ctx->timeout_ms;
	cJSON *args;
	char *sql;

	while ((c = getopt_long(argc, argv, ":f:n:", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		case 'n':
			if (cli_parse_ms(optarg, &max_rows) < 0)
				return cli_usage_error(&cmd_query_entry,
						       "--max-rows must be a "
						       "positive number");
			break;
		default:
			return cli_option_error(&cmd_query_entry, c, argc,
						argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error(&cmd_query_entry, "no SQL given");
	sql = gather_sql(argc - optind, argv + optind);
	if (!sql)
		return CLI_EUSAGE;
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK) {
		free(sql);
		return rc;
	}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sql", sql);
	free(sql);
	if (max_rows)
		cJSON_AddNumberToObject(args, "maxRows", max_rows);
	if (ctx->timeout_given) {
		/* The user's timeout bounds the query in the agent too. */
		cJSON_AddNumberToObject(args, "timeoutMs", ctx->timeout_ms);
		wait += QUERY_GRACE_MS;
	}
	rc = cli_request(ctx, "probing/query", args, wait, &resp);
	if (rc == CLI_OK && !resp->success)
		rc = cli_error(CLI_ESQL, "%s", cli_resp_message(resp));
	else if (rc == CLI_OK)
		rc = show(resp->body, fmt);
	if (resp)
		dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_query_entry = {
	.name = "query",
	.alias = "sql",
	.usage = "[-f table|json|csv] [--max-rows N] SQL... | -",
	.summary = "Run a SQL query against the agent's tables",
	.help = "SQL is the arguments joined by spaces, or stdin when it is "
		"a single \"-\".\n"
		"Any SQLite query works, e.g. on the live tables "
		"python.backtrace and\n"
		"python.threads, or the catalog probing.tables.  On a terminal "
		"the result is a\n"
		"boxed table with a row count; piped, tab-separated lines "
		"with a header.\n"
		"When the SQL is bad, SQLite's message goes to stderr and the "
		"exit code is 7.\n"
		"\n"
		"Options:\n"
		"  -f, --format FORMAT  table (default), json (an array of "
		"objects) or csv\n"
		"                       (RFC 4180)\n"
		"  -n, --max-rows N     return at most N rows (default: the "
		"agent's\n"
		"                       query.max_rows)\n"
		"The global --timeout, when given, also bounds the query in "
		"the agent.\n"
		"\n"
		"Example:\n"
		"  probing -t 1234 query 'SELECT func, file, lineno FROM "
		"python.backtrace\n"
		"                         ORDER BY depth LIMIT 5'\n",
	.flags = CMD_TARGET | CMD_RECORDED | CMD_PAGED,
	.exec = cmd_query_exec,
};
