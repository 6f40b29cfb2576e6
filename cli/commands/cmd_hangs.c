/*
 * cmd_hangs: the hangs the agent's watchdog saw (process.hangs, through
 * probing/query), and the report of one of them (report.h).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "recorded.h"
#include "render/report.h"

#define HANGS_COLS                                                             \
	"id, started, detected, resumed, seconds, thread_id, native_id, "      \
	"func, file, lineno, path, started_known"

/* Runs sql; CLI_OK with the reply's columns and rows in *resp. */
static int query(struct cmd_ctx *ctx, const char *sql,
		 struct dap_message **resp)
{
	cJSON *args = cJSON_CreateObject();
	int rc;

	cJSON_AddStringToObject(args, "sql", sql);
	cJSON_AddNumberToObject(args, "maxRows", 100000);
	rc = cli_request(ctx, "probing/query", args, ctx->timeout_ms, resp);
	if (rc != CLI_OK)
		return rc;
	if (!(*resp)->success && ctx->rec &&
	    strstr(cli_resp_message(*resp), "no such table: process.hangs")) {
		/* A recording of a run whose watchdog was off: no hangs,
		 * as a live agent without one says. */
		dap_message_free(*resp);
		*resp = dap_response_new(0, "probing/query", 1, NULL);
		if (!*resp || !cJSON_AddArrayToObject((*resp)->body, "rows"))
			return cli_error(CLI_EFAIL, "out of memory");
		return CLI_OK;
	}
	if (!(*resp)->success)
		return cli_error(
			CLI_EFAIL, "%s%s", cli_resp_message(*resp),
			strstr(cli_resp_message(*resp), "no such table")
				? " (this agent has no hang watchdog)"
				: "");
	if (!cJSON_IsArray(
		    cJSON_GetObjectItemCaseSensitive((*resp)->body, "rows")))
		return cli_error(CLI_EFAIL,
				 "probing/query: reply without rows");
	return CLI_OK;
}

static const cJSON *cell(const cJSON *row, int i)
{
	return cJSON_GetArrayItem(row, i);
}

/* Unix seconds as local "2025-01-02 03:04:05". */
static void when(const cJSON *v, char *out, size_t outlen)
{
	time_t t;
	struct tm tm;

	if (!cJSON_IsNumber(v)) {
		snprintf(out, outlen, "-");
		return;
	}
	t = (time_t)v->valuedouble;
	localtime_r(&t, &tm);
	strftime(out, outlen, "%Y-%m-%d %H:%M:%S", &tm);
}

static int list(struct cmd_ctx *ctx, enum cli_format fmt)
{
	static const char *const human[] = {"id",    "started", "stuck for",
					    "state", "where",	"report"};
	static const char *const raw[] = {"id",	       "started", "detected",
					  "resumed",   "seconds", "thread_id",
					  "native_id", "func",	  "file",
					  "lineno",    "path",	  "started_known"};
	struct dap_message *resp = NULL;
	const cJSON *rows, *row;
	struct cli_table *t;
	int rc = query(ctx,
		       "SELECT " HANGS_COLS " FROM process.hangs ORDER BY id",
		       &resp);

	if (rc != CLI_OK) {
		if (resp)
			dap_message_free(resp);
		return rc;
	}
	rows = cJSON_GetObjectItemCaseSensitive(resp->body, "rows");
	t = fmt == CLI_FORMAT_JSON || fmt == CLI_FORMAT_CSV
		    ? cli_table_new(12, raw)
		    : cli_table_new(6, human);
	if (!t) {
		dap_message_free(resp);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	cli_table_upper_header(t);
	cJSON_ArrayForEach(row, rows)
	{
		char *c[12] = {0};

		if (fmt == CLI_FORMAT_JSON || fmt == CLI_FORMAT_CSV) {
			for (int i = 0; i < 12; i++)
				c[i] = cli_json_text(cell(row, i));
			cli_table_add(t, (const char *const *)c);
			for (int i = 0; i < 12; i++)
				free(c[i]);
			continue;
		}
		{
			char id[32], start[40], dur[40], where[2048];
			const cJSON *func = cell(row, 7), *file = cell(row, 8);
			const cJSON *sec = cell(row, 4), *res = cell(row, 3);
			char *path = cli_json_text(cell(row, 10));
			const char *cells[6];

			snprintf(id, sizeof(id), "%.0f",
				 cJSON_IsNumber(cell(row, 0))
					 ? cell(row, 0)->valuedouble
					 : 0);
			/* Stuck already when the watchdog began: it began
			 * then or before, and has lasted at least that. */
			int known = !cJSON_IsNumber(cell(row, 11)) ||
				    cell(row, 11)->valueint;

			when(cell(row, 1), start + 3, sizeof(start) - 3);
			memcpy(start, "<= ", 3);
			snprintf(dur, sizeof(dur), "%s%.1f s", known ? "" : ">= ",
				 cJSON_IsNumber(sec) ? sec->valuedouble : 0);
			if (cJSON_IsString(func) && cJSON_IsString(file))
				snprintf(where, sizeof(where), "%s (%s:%.0f)",
					 func->valuestring, file->valuestring,
					 cJSON_IsNumber(cell(row, 9))
						 ? cell(row, 9)->valuedouble
						 : 0);
			else
				snprintf(where, sizeof(where),
					 "(no Python frame)");
			cells[0] = id;
			cells[1] = known ? start + 3 : start;
			cells[2] = dur;
			cells[3] = cJSON_IsNumber(res) ? "moved on" : "stuck";
			cells[4] = where;
			cells[5] = path ? path : "-";
			cli_table_add(t, cells);
			free(path);
		}
	}
	if (fmt != CLI_FORMAT_JSON && fmt != CLI_FORMAT_CSV) {
		cli_table_align_right(t, 0);
		cli_table_align_right(t, 2);
	}
	if (cli_table_rows(t) == 0 && fmt != CLI_FORMAT_JSON &&
	    fmt != CLI_FORMAT_CSV)
		printf("(no hangs; hang.timeout enables the watchdog)\n");
	else
		cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
	dap_message_free(resp);
	return CLI_OK;
}

/* Source lines of the report are read with the rights of its process's
 * user: the target's, when it is a pid here (its /proc entry's owner);
 * else nobody's (report.h). */
static void reader_of(const struct cmd_ctx *ctx, struct cli_report *r)
{
	char proc[64], *end;
	struct stat st;
	long pid = ctx->target ? strtol(ctx->target, &end, 10) : 0;

	if (pid <= 0 || *end)
		return;
	snprintf(proc, sizeof(proc), "/proc/%ld", pid);
	if (stat(proc, &st) == 0) {
		r->reader_uid = (long)st.st_uid;
		r->reader_gid = (long)st.st_gid;
	}
}

static int show(struct cmd_ctx *ctx, long long id, enum cli_format fmt,
		int source)
{
	struct dap_message *resp = NULL;
	const cJSON *row, *text;
	struct cli_report r;
	char sql[160], err[256];
	int rc;

	if (id > 0)
		snprintf(sql, sizeof(sql),
			 "SELECT report, id, seconds, resumed, started_known "
			 "FROM process.hangs WHERE id = %lld",
			 id);
	else
		snprintf(sql, sizeof(sql),
			 "SELECT report, id, seconds, resumed, started_known "
			 "FROM process.hangs ORDER BY id DESC LIMIT 1");
	rc = query(ctx, sql, &resp);
	if (rc != CLI_OK) {
		if (resp)
			dap_message_free(resp);
		return rc;
	}
	row = cJSON_GetArrayItem(
		cJSON_GetObjectItemCaseSensitive(resp->body, "rows"), 0);
	text = cell(row, 0);
	if (!cJSON_IsString(text)) {
		dap_message_free(resp);
		return id > 0 ? cli_error(CLI_EFAIL, "no hang %lld", id)
			      : cli_error(CLI_EFAIL, "no hang recorded");
	}
	rc = cli_report_parse(text->valuestring, strlen(text->valuestring), &r,
			      err, sizeof(err));
	reader_of(ctx, &r);
	if (rc) {
		rc = cli_error(CLI_EFAIL, "the hang's report: %s", err);
	} else if (fmt == CLI_FORMAT_JSON) {
		cJSON *j = cli_report_json(&r);
		char *s = j ? cJSON_Print(j) : NULL;

		if (s)
			printf("%s\n", s);
		rc = s ? CLI_OK : cli_error(CLI_EFAIL, "out of memory");
		free(s);
		cJSON_Delete(j);
	} else {
		/* The report was written when the watchdog saw the hang;
		 * the list's "stuck for" counts on until it moved.  Both
		 * figures, each said for what it is. */
		const cJSON *sec = cell(row, 2), *known = cell(row, 4);

		printf("hang %.0f: stuck for %s%.1f s in all, %s; its report, "
		       "written when the watchdog saw it:\n\n",
		       cJSON_IsNumber(cell(row, 1)) ? cell(row, 1)->valuedouble
						    : 0,
		       cJSON_IsNumber(known) && !known->valueint ? ">= " : "",
		       cJSON_IsNumber(sec) ? sec->valuedouble : 0,
		       cJSON_IsNumber(cell(row, 3))
			       ? "then it moved on"
			       : ctx->rec && !recorded_run(ctx->rec)->alive
					 ? "stuck still when the recording ended"
					 : "still stuck");
		cli_report_print(&r, stdout, source, NULL);
		rc = CLI_OK;
	}
	cli_report_release(&r);
	dap_message_free(resp);
	return rc;
}

static int cmd_hangs_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"report", no_argument, NULL, 'r'},
		{"no-source", no_argument, NULL, 'S'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	long long id = 0;
	int c, rc, report = 0, source = 1;

	while ((c = getopt_long(argc, argv, ":f:rS", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		case 'r':
			report = 1;
			break;
		case 'S':
			source = 0;
			break;
		default:
			return cli_option_error(&cmd_hangs_entry, c, argc,
						argv);
		}
	}
	if (optind < argc) {
		char *end;

		errno = 0;
		id = strtoll(argv[optind], &end, 10);
		if (errno || *end || id <= 0 || optind + 1 < argc)
			return cli_usage_error(&cmd_hangs_entry,
					       "'%s' is not a hang id",
					       argv[optind]);
		report = 1;
	}
	if (report && fmt == CLI_FORMAT_CSV)
		return cli_usage_error(&cmd_hangs_entry,
				       "a report prints as text or json");
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	return report ? show(ctx, id, fmt, source) : list(ctx, fmt);
}

const struct cmd_entry cmd_hangs_entry = {
	.name = "hangs",
	.alias = NULL,
	.usage = "[-f FORMAT] [--report] [ID]",
	.summary = "List the hangs the watchdog saw, or show one's stacks",
	.help = "With hang.timeout set (probing config hang.timeout=300s, or "
		"PROBING_HANG_TIMEOUT),\n"
		"the agent watches the main thread's Python stack; when it "
		"has not changed\n"
		"for that long, every thread's Python and native stacks are "
		"recorded in\n"
		"process.hangs and a report file (probing-hang-PID-TIME.txt "
		"in crash.path).\n"
		"Without arguments, lists them: when, for how long, whether "
		"the main thread\n"
		"has moved on since, where it was stuck, and the report "
		"file.  With an ID\n"
		"(or --report: the last one), shows that hang's stacks as "
		"'probing report'\n"
		"does.  See docs/forensics.md.\n"
		"\n"
		"Options:\n"
		"  -r, --report         show the last hang's stacks\n"
		"  -S, --no-source      do not show source lines\n"
		"  -f, --format FORMAT  the list as table, json or csv (every "
		"column of\n"
		"                       process.hangs but the report); a "
		"report as json\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 config hang.timeout=5m\n"
		"  probing -t 1234 hangs\n"
		"  probing -t 1234 hangs 1\n",
	.flags = CMD_TARGET | CMD_RECORDED | CMD_PAGED,
	.exec = cmd_hangs_exec,
};
