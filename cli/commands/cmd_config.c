/*
 * cmd_config: the agent's settings (probing/config): list them, or set
 * some and show what they became.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

#define CONFIG_SET_MAX 64 /* key=value pairs at once */

/* Does a bare KEY ask for setting name: the name itself, or its family
 * ("comm" or "comm." for comm.*)? */
static int asks_for(const char *key, const char *name)
{
	size_t n = strlen(key);

	if (!strcmp(key, name))
		return 1;
	if (n && key[n - 1] == '.')
		n--;
	return n && !strncmp(key, name, n) && name[n] == '.';
}

/* Does the space-separated list have word? */
static int has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return 1;
	return 0;
}

/* Whether setting s is one of the keys in set, one a key of the
 * original's set (of: the reply's settingsOf), or asked for in want
 * (every one when all are NULL). */
static int listed(const cJSON *s, const cJSON *set, const cJSON *of,
		  const cJSON *want)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "name");
	const cJSON *w;

	if (!set && !want)
		return 1;
	if (!cJSON_IsString(name))
		return 0;
	if (set && cJSON_GetObjectItemCaseSensitive(set, name->valuestring))
		return 1;
	cJSON_ArrayForEach(w, of)
	{
		if (cJSON_IsString(w) &&
		    has_word(w->valuestring, name->valuestring))
			return 1;
	}
	cJSON_ArrayForEach(w, want)
	{
		if (asks_for(w->valuestring, name->valuestring))
			return 1;
	}
	return 0;
}

/* A bare KEY that names no setting: refused. */
static int check_wanted(const cJSON *settings, const cJSON *want)
{
	const cJSON *w, *s;

	cJSON_ArrayForEach(w, want)
	{
		int found = 0;

		cJSON_ArrayForEach(s, settings)
		{
			const cJSON *name =
				cJSON_GetObjectItemCaseSensitive(s, "name");

			found |= cJSON_IsString(name) &&
				 asks_for(w->valuestring, name->valuestring);
		}
		if (!found)
			return cli_error(CLI_EUSAGE,
					 "no setting '%s' (probing config "
					 "lists them all)",
					 w->valuestring);
	}
	return CLI_OK;
}

static int show(const cJSON *body, const cJSON *set, const cJSON *want,
		enum cli_format fmt)
{
	static const char *const cols[] = {"name", "value", "doc"};
	const cJSON *settings =
		cJSON_GetObjectItemCaseSensitive(body, "settings");
	const cJSON *s;
	struct cli_table *t;

	if (!cJSON_IsArray(settings))
		return cli_error(CLI_EFAIL,
				 "probing/config: reply without settings");
	if (check_wanted(settings, want) != CLI_OK)
		return CLI_EUSAGE;
	t = cli_table_new(set ? 2 : 3, cols);
	if (!t)
		return cli_error(CLI_EFAIL, "out of memory");
	cli_table_upper_header(t);
	cJSON_ArrayForEach(s, settings)
	{
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "name");
		const cJSON *doc = cJSON_GetObjectItemCaseSensitive(s, "doc");
		char *value;
		const char *row[3];

		if (!listed(s, set,
			    cJSON_GetObjectItemCaseSensitive(body, "settingsOf"),
			    want))
			continue;
		value = cli_json_text(
			cJSON_GetObjectItemCaseSensitive(s, "value"));
		row[0] = cJSON_IsString(name) ? name->valuestring : "?";
		row[1] = value;
		row[2] = cJSON_IsString(doc) ? doc->valuestring : "";
		cli_table_add(t, row);
		free(value);
	}
	cli_table_print(t, stdout, fmt, cli_isatty(stdout));
	cli_table_free(t);
	return CLI_OK;
}

static int cmd_config_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"for", required_argument, NULL, 'F'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	struct dap_message *resp = NULL;
	cJSON *args, *set = NULL, *want = NULL;
	int c, rc, lease_ms = 0;

	while ((c = getopt_long(argc, argv, ":f:", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		case 'F':
			if (cli_parse_duration(optarg, 0, &lease_ms) < 0)
				return cli_duration_error(&cmd_config_entry,
							  "--for", optarg);
			break;
		default:
			return cli_option_error(&cmd_config_entry, c, argc,
						argv);
		}
	}
	if (argc - optind > CONFIG_SET_MAX)
		return cli_usage_error(&cmd_config_entry,
				       "at most %d settings at once",
				       CONFIG_SET_MAX);
	args = cJSON_CreateObject();
	for (int i = optind; i < argc && !set; i++)
		if (strchr(argv[i], '='))
			set = cJSON_AddObjectToObject(args, "set");
	for (int i = optind; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		if (eq == argv[i]) {
			cJSON_Delete(args);
			cJSON_Delete(want);
			return cli_usage_error(&cmd_config_entry,
					       "'%s' is not KEY or KEY=VALUE",
					       argv[i]);
		}
		if (!eq) { /* a setting (or family) to show */
			if (!want)
				want = cJSON_CreateArray();
			cJSON_AddItemToArray(want, cJSON_CreateString(argv[i]));
			continue;
		}
		*eq = '\0';
		/* Strings: the agent converts and validates every value
		 * before it applies any. */
		cJSON_DeleteItemFromObjectCaseSensitive(set, argv[i]);
		cJSON_AddStringToObject(set, argv[i], eq + 1);
	}
	if (lease_ms && !set) {
		cJSON_Delete(args);
		cJSON_Delete(want);
		return cli_usage_error(&cmd_config_entry,
				       "--for: give the KEY=VALUE settings to "
				       "change for that long");
	}
	if (lease_ms)
		cJSON_AddNumberToObject(args, "restoreAfterMs", lease_ms);
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK) {
		cJSON_Delete(args);
		cJSON_Delete(want);
		return rc;
	}
	/* Keep the keys to show after the reply; args goes to the client. */
	set = set ? cJSON_Duplicate(set, 1) : NULL;
	rc = cli_request(ctx, "probing/config", args, ctx->timeout_ms, &resp);
	if (rc == CLI_OK && !resp->success)
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	else if (rc == CLI_OK)
		rc = show(resp->body, set, want, fmt);
	cJSON_Delete(set);
	cJSON_Delete(want);
	if (resp)
		dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_config_entry = {
	.name = "config",
	.alias = NULL,
	.usage = "[-f table|json|csv] [--for DURATION] [KEY[=VALUE]...]",
	.summary = "Show the agent's settings, or change some",
	.help = "Without arguments, lists every setting with its value and "
		"what it does.\n"
		"With KEY=VALUE arguments, sets them (all are checked before "
		"any is\n"
		"applied; a bad one changes nothing and exits 1) and shows "
		"the resulting\n"
		"values of those keys.  A bare KEY shows that setting; a "
		"family name\n"
		"(comm, or comm.) shows all of its settings.\n"
		"With --for DURATION the settings change for that long: then "
		"the agent puts\n"
		"back the values from before (a setting changed again "
		"meanwhile keeps the\n"
		"new value), whatever becomes of this command.\n"
		"\n"
		"Options:\n"
		"  -f, --format FORMAT  table (default), json or csv\n"
		"      --for DURATION   change them for a while: 30s, 10m, 2h "
		"(24h at most)\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 config query.max_rows=5000\n"
		"  probing -t 1234 config --for 10m torch.profiling=on\n"
		"  probing -t 1234 config comm\n",
	.flags = CMD_TARGET | CMD_PAGED,
	.exec = cmd_config_exec,
};
