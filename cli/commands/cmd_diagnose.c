/*
 * cmd_diagnose: `probing diagnose hang|leak|slow|dataloader`, the
 * diagnostic playbooks (diagnose/dx.h; docs/diagnose.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "diagnose/dx.h"
#include "job.h"

static const struct {
	const char *name;
	int (*run)(struct dx *d);
} playbooks[] = {
	{"hang", dx_hang},
	{"leak", dx_leak},
	{"slow", dx_slow},
	{"dataloader", dx_loader},
};

static void print_text(const struct dx *d)
{
	printf("verdict: %s\n", d->verdict);
	if (d->nevidence)
		printf("\nevidence:\n");
	for (int i = 0; i < d->nevidence; i++)
		printf("  - %s\n", d->evidence[i]);
	if (d->nnext)
		printf("\nto look further:\n");
	for (int i = 0; i < d->nnext; i++)
		printf("  %s\n", d->next[i]);
}

static void print_json(const struct dx *d, const char *playbook)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char *text;

	cJSON_AddStringToObject(o, "playbook", playbook);
	cJSON_AddStringToObject(o, "target", d->target);
	cJSON_AddStringToObject(o, "verdict", d->verdict);
	a = cJSON_AddArrayToObject(o, "evidence");
	for (int i = 0; i < d->nevidence; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(d->evidence[i]));
	a = cJSON_AddArrayToObject(o, "next");
	for (int i = 0; i < d->nnext; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(d->next[i]));
	text = cJSON_Print(o);
	if (text)
		printf("%s\n", text);
	cJSON_free(text);
	cJSON_Delete(o);
}

static int cmd_diagnose_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"duration", required_argument, NULL, 'd'},
		{"format", required_argument, NULL, 'f'},
		{"history", required_argument, NULL, 'H'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	struct dx d = {.target = ctx->target};
	int c, rc;
	size_t i;

	while ((c = getopt_long(argc, argv, ":d:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (cli_parse_duration(optarg, 1000, &d.window_ms) ||
			    d.window_ms > 10 * 60 * 1000)
				return cli_usage_error(
					&cmd_diagnose_entry,
					"-d %s: give %s, at most "
					"10m",
					optarg, CLI_DURATION_HELP);
			break;
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			break;
		case 'H':
			if (cli_parse_duration(optarg, 1000, &d.history_ms) ||
			    d.history_ms > 15 * 60 * 1000 / 2)
				return cli_usage_error(
					&cmd_diagnose_entry,
					"--history %s: give %s, at most "
					"7m30s (the later half of 15 minutes)",
					optarg, CLI_DURATION_HELP);
			break;
		default:
			return cli_option_error(&cmd_diagnose_entry, c, argc,
						argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error(&cmd_diagnose_entry,
				       "which playbook: hang, leak, slow or "
				       "dataloader?");
	for (i = 0; i < sizeof(playbooks) / sizeof(playbooks[0]); i++)
		if (!strcmp(argv[optind], playbooks[i].name))
			break;
	if (i == sizeof(playbooks) / sizeof(playbooks[0]))
		return cli_usage_error(&cmd_diagnose_entry,
				       "no playbook '%s': hang, leak, slow or "
				       "dataloader",
				       argv[optind]);
	optind++;
	if ((rc = cli_args_done(&cmd_diagnose_entry, argc, argv)))
		return rc;
	if (d.history_ms && playbooks[i].run != dx_leak)
		return cli_usage_error(&cmd_diagnose_entry,
				       "--history is the leak playbook's");
	if (fmt == CLI_FORMAT_CSV)
		return cli_usage_error(&cmd_diagnose_entry,
				       "-f csv: diagnose prints text or json");
	if ((rc = cli_need_target(ctx)) != CLI_OK)
		return rc;
	/* torchrun's launcher: its job's, through its first rank (the
	 * hang playbook looks at every rank from there). */
	d.target = cli_job_target(d.target, "the diagnosis");
	dx_progress_start(playbooks[i].name);
	rc = playbooks[i].run(&d);
	dx_progress_end();
	if (rc) {
		rc = cli_error(d.status ? d.status : CLI_EFAIL, "%s", d.err);
		dx_free(&d);
		return rc;
	}
	if (fmt == CLI_FORMAT_JSON)
		print_json(&d, playbooks[i].name);
	else
		print_text(&d);
	dx_free(&d);
	return CLI_OK;
}

const struct cmd_entry cmd_diagnose_entry = {
	.name = "diagnose",
	.alias = "dx",
	.usage = "hang|leak|slow|dataloader [-d DURATION] [--history D] "
		 "[-f json]",
	.summary = "Run a diagnostic playbook: a verdict with its evidence",
	.help = "Looks at the target in a fixed sequence — backtraces, SQL "
		"over what it\n"
		"recorded, a few seconds of sampling — and ends in a short "
		"verdict, the\n"
		"evidence for it, and the commands to look further.\n"
		"\n"
		"Playbooks:\n"
		"  hang        in a torch.distributed job, which rank holds "
		"the others up\n"
		"              (cluster hang); else three backtraces over "
		"DURATION (2s):\n"
		"              is the main thread stuck, where, for how long "
		"(the hang\n"
		"              watchdog), and where every other thread is\n"
		"  leak        process.memory's RSS growth per minute over "
		"the last 15\n"
		"              minutes, and what grew in DURATION (10s): "
		"Python objects by\n"
		"              type, tensors by who holds them.  A verdict "
		"on the RSS needs\n"
		"              --history of it past the start (the later "
		"half of the series:\n"
		"              60s, so a process two minutes old); before, "
		"\"too early to tell\"\n"
		"  slow        the main thread sampled for DURATION (5s): "
		"how much it runs,\n"
		"              under which of the program's own frames, the "
		"innermost\n"
		"              functions; with torch, the slowest modules "
		"(3 s of tracing)\n"
		"  dataloader  the main thread sampled for DURATION (5s): "
		"the share of its\n"
		"              time inside torch's DataLoader, loading or "
		"waiting, and in\n"
		"              which of the dataset's frames\n"
		"\n"
		"Options:\n"
		"  -d, --duration D   how long to watch (see above)\n"
		"      --history D    leak: the RSS history a verdict needs "
		"(60s)\n"
		"  -f, --format json  the verdict, evidence and next commands "
		"as JSON\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 diagnose hang\n"
		"  probing -t 1234 diagnose leak -d 30s\n"
		"See docs/diagnose.md.\n",
	.flags = CMD_TARGET,
	.exec = cmd_diagnose_exec,
};
