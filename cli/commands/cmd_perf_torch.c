/*
 * cmd_perf_torch: `probing perf --torch`, torch module tracing's switch
 * (the torch.* settings through probing/config) and, with --duration, a
 * per-module summary of what was traced meanwhile (probing/query on
 * python.torch_trace).  cmd_perf.c hands over when it sees --torch.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"

#define DRAIN_MS 400 /* the agent writes the rows every 100 ms */
#define STATUS_WAIT_MS 3000 /* for torch.status to show a change */

static const char summary_sql[] =
	"SELECT module, stage, clock, count(*) AS calls, "
	"round(sum(duration) * 1e3, 3) AS total_ms, "
	"round(avg(duration) * 1e3, 3) AS mean_ms, "
	"round(max(duration) * 1e3, 3) AS max_ms, "
	"round(max(max_allocated), 1) AS max_allocated_mb "
	"FROM python.torch_trace WHERE rowid > %lld "
	"GROUP BY module, stage, clock ORDER BY sum(duration) DESC LIMIT %d";

static int show_settings(const struct dap_message *resp, enum cli_format fmt)
{
	static const char *const cols[] = {"name", "value"};
	const cJSON *s,
		*arr = cJSON_GetObjectItemCaseSensitive(resp->body, "settings");
	struct cli_table *t = cli_table_new(2, cols);

	if (!t)
		return cli_error(CLI_EFAIL, "out of memory");
	cli_table_upper_header(t);
	cJSON_ArrayForEach(s, arr)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "value");
		const char *row[2];
		if (!cJSON_IsString(n) || strncmp(n->valuestring, "torch.", 6))
			continue;
		row[0] = n->valuestring;
		row[1] = cJSON_IsString(v) ? v->valuestring : "";
		cli_table_add(t, row);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
	return CLI_OK;
}

/* Runs sql; *resp on CLI_OK. */
static int query(struct cmd_ctx *ctx, const char *sql,
		 struct dap_message **resp)
{
	cJSON *args = cJSON_CreateObject();
	int rc;

	cJSON_AddStringToObject(args, "sql", sql);
	rc = cli_request(ctx, "probing/query", args, ctx->timeout_ms, resp);
	if (rc == CLI_OK && !(*resp)->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(*resp));
		dap_message_free(*resp);
		*resp = NULL;
	}
	return rc;
}

static long long first_int(const struct dap_message *resp)
{
	const cJSON *rows =
		cJSON_GetObjectItemCaseSensitive(resp->body, "rows");
	const cJSON *row = cJSON_GetArrayItem(rows, 0);
	const cJSON *v = cJSON_GetArrayItem(row, 0);

	return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

static int show_rows(const struct dap_message *resp, enum cli_format fmt)
{
	const cJSON *cols =
		cJSON_GetObjectItemCaseSensitive(resp->body, "columns");
	const cJSON *rows =
		cJSON_GetObjectItemCaseSensitive(resp->body, "rows");
	const cJSON *c, *row, *v;
	const char *names[16];
	int n = 0;
	struct cli_table *t;

	cJSON_ArrayForEach(c, cols)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
		if (n < 16)
			names[n++] =
				cJSON_IsString(name) ? name->valuestring : "?";
	}
	if (fmt == CLI_FORMAT_JSON) {
		char *text = cJSON_Print(rows);
		printf("%s\n", text ? text : "[]");
		free(text);
		return CLI_OK;
	}
	t = cli_table_new(n, names);
	if (!t)
		return cli_error(CLI_EFAIL, "out of memory");
	cli_table_upper_header(t);
	for (int i = 2; i < n; i++)
		cli_table_align_right(t, i);
	cJSON_ArrayForEach(row, rows)
	{
		char *cells[16] = {0};
		int k = 0;
		cJSON_ArrayForEach(v, row)
		{
			if (k < n)
				cells[k++] = cli_json_text(v);
		}
		cli_table_add(t, (const char *const *)cells);
		for (int i = 0; i < k; i++)
			free(cells[i]);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
	return CLI_OK;
}

/* torch.status as the change just made left it: the agent applies a
 * change at its next tick, so the reply to the change still shows the
 * state before it.  Asks again (every 100 ms, STATUS_WAIT_MS at most)
 * until the status agrees with on; *resp is replaced by the last
 * answer.  CLI_OK (a status that never agreed is shown as it is). */
static int settle(struct cmd_ctx *ctx, int on, struct dap_message **resp)
{
	for (int waited = 0;; waited += 100) {
		const char *st = cli_setting(*resp, "torch.status");
		struct dap_message *again = NULL;
		int rc;

		if (on ? strncmp(st, "off", 3) != 0 : strcmp(st, "off") == 0)
			return CLI_OK;
		if (waited >= STATUS_WAIT_MS)
			return CLI_OK;
		cli_sleep_ms(100);
		rc = cli_config(ctx, NULL, 0, &again);
		if (rc != CLI_OK)
			return rc;
		dap_message_free(*resp);
		*resp = again;
	}
}

int cmd_perf_torch(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"torch", no_argument, NULL, 't'},
		{"stop", no_argument, NULL, 'x'},
		{"duration", required_argument, NULL, 'd'},
		{"step-rate", required_argument, NULL, 's'},
		{"module-rate", required_argument, NULL, 'm'},
		{"watch", required_argument, NULL, 'w'},
		{"top", required_argument, NULL, 'n'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	struct dap_message *resp = NULL;
	const char *watch = NULL;
	int c, rc, stop = 0, duration = 0, step_rate = 0, module_rate = 0,
		   top = 50, was_on;
	long long before;
	char sql[1024];
	cJSON *set;

	optind = 0;
	while ((c = getopt_long(argc, argv, ":d:n:f:", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			break;
		case 'x':
			stop = 1;
			break;
		case 'd':
			if (cli_parse_duration(optarg, 0, &duration) < 0)
				return cli_duration_error(&cmd_perf_entry,
							  "--duration", optarg);
			break;
		case 's':
			if (!strcmp(optarg, "auto"))
				step_rate = -1;
			else if (cli_parse_ms(optarg, &step_rate) < 0)
				return cli_usage_error(&cmd_perf_entry,
						       "--step-rate must be "
						       "auto or a positive "
						       "number");
			break;
		case 'm':
			if (cli_parse_ms(optarg, &module_rate) < 0)
				return cli_usage_error(&cmd_perf_entry,
						       "--module-rate must be "
						       "a positive number");
			break;
		case 'w':
			watch = optarg;
			break;
		case 'n':
			if (cli_parse_ms(optarg, &top) < 0 || top > 10000)
				return cli_usage_error(&cmd_perf_entry,
						       "--top must be in [1, "
						       "10000]");
			break;
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		default:
			return cli_option_error(&cmd_perf_entry, c, argc, argv);
		}
	}
	if (cli_args_done(&cmd_perf_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (stop && (duration || step_rate || module_rate || watch))
		return cli_usage_error(&cmd_perf_entry,
				       "--torch --stop takes no other option");
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	if (stop) {
		set = cJSON_CreateObject();
		cJSON_AddStringToObject(set, "torch.profiling", "off");
		rc = cli_config(ctx, set, 0, &resp);
		if (rc == CLI_OK)
			rc = settle(ctx, 0, &resp);
		if (rc == CLI_OK)
			rc = show_settings(resp, fmt);
		dap_message_free(resp);
		return rc;
	}
	rc = cli_config(ctx, NULL, 0, &resp);
	if (rc != CLI_OK)
		return rc;
	was_on = !strcmp(cli_setting(resp, "torch.profiling"), "on");
	dap_message_free(resp);
	resp = NULL;
	before = 0;
	if (duration) {
		rc = query(ctx,
			   "SELECT coalesce(max(rowid), 0) FROM "
			   "python.torch_trace",
			   &resp);
		if (rc != CLI_OK)
			return rc;
		before = first_int(resp);
		dap_message_free(resp);
		resp = NULL;
	}
	set = cJSON_CreateObject();
	cJSON_AddStringToObject(set, "torch.profiling", "on");
	if (step_rate < 0)
		cJSON_AddStringToObject(set, "torch.step_rate", "auto");
	else if (step_rate)
		cJSON_AddNumberToObject(set, "torch.step_rate", step_rate);
	if (module_rate)
		cJSON_AddNumberToObject(set, "torch.module_rate", module_rate);
	if (watch)
		cJSON_AddStringToObject(set, "torch.watch", watch);
	/* For the duration only, when tracing was off: should this CLI
	 * die, the agent puts it back (config_lease.h). */
	rc = cli_config(ctx, set,
			duration && !was_on ? CLI_LEASE_MS(duration) : 0,
			&resp);
	if (rc != CLI_OK)
		return rc;
	if (!duration) {
		rc = settle(ctx, 1, &resp);
		if (rc == CLI_OK)
			rc = show_settings(resp, fmt);
		dap_message_free(resp);
		return rc;
	}
	dap_message_free(resp);
	resp = NULL;
	if (fmt != CLI_FORMAT_JSON)
		fprintf(stderr,
			"tracing torch modules for %.1f s "
			"(Ctrl-C ends early)...\n",
			duration / 1000.0);
	cli_sigint_catch();
	cli_wait_ms(duration);
	if (!was_on) {
		set = cJSON_CreateObject();
		cJSON_AddStringToObject(set, "torch.profiling", "off");
		rc = cli_config(ctx, set, 0, &resp);
		dap_message_free(resp);
		resp = NULL;
		if (rc != CLI_OK)
			return rc;
	}
	cli_sleep_ms(DRAIN_MS);
	snprintf(sql, sizeof(sql), summary_sql, before, top);
	rc = query(ctx, sql, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!cJSON_GetArraySize(
		    cJSON_GetObjectItemCaseSensitive(resp->body, "rows")) &&
	    fmt != CLI_FORMAT_JSON)
		fprintf(stderr,
			"probing: no torch module ran meanwhile (is "
			"torch imported, and the model training?  'probing "
			"config' shows torch.status)\n");
	rc = show_rows(resp, fmt);
	dap_message_free(resp);
	return rc;
}
