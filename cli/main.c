/*
 * main: the `probing` command: global options, the command table, help,
 * and dispatch.  Each command lives in its own commands/cmd_<name>.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "dap_token.h"
#include "target.h"

#ifndef PROBING_SUPPORTED
#define PROBING_SUPPORTED "?" /* the CPythons built for (CMake) */
#endif
#ifndef PROBING_VERSION
#define PROBING_VERSION "0.0.0"
#endif

static const struct cmd_entry *const cmd_table[] = {
	&cmd_list_entry, &cmd_backtrace_entry,
	&cmd_eval_entry, &cmd_query_entry,
	&cmd_flamegraph_entry, &cmd_perf_entry,
	&cmd_repl_entry, &cmd_config_entry,
	&cmd_dap_entry,	 &cmd_inject_entry,
	&cmd_launch_entry, &cmd_debug_entry, &cmd_memory_entry,
	&cmd_hangs_entry, &cmd_report_entry,
	&cmd_cluster_entry, NULL,
};

static const char global_help[] =
	"\n"
	"Options:\n"
	"  -t, --target TARGET  the agent to talk to: a pid, HOST:PORT, "
	"@name or a\n"
	"                       unix socket path (default $PROBING_TARGET)\n"
	"      --timeout MS     how long to wait for the agent, in "
	"milliseconds\n"
	"                       (default $PROBING_TIMEOUT, else 10000)\n"
	"      --token TOKEN    the token an agent on TCP asks for (default "
	"$PROBING_TOKEN,\n"
	"                       else for HOST:PORT the token file "
	"$XDG_RUNTIME_DIR/probing/token\n"
	"                       or ~/.probing/token; see docs/security.md)\n"
	"  -f, --format FORMAT  table, json or csv, for commands that print "
	"tables\n"
	"  -h, --help           show this help; 'probing help COMMAND' for "
	"a command\n"
	"  -V, --version        show the version\n"
	"\n"
	"Exit codes:\n"
	"  0    success\n"
	"  1    the request failed (the agent said so: a Python exception, "
	"a bad\n"
	"       setting, ...)\n"
	"  2    usage error (bad command line, no target)\n"
	"  3    no such process\n"
	"  4    the process has no Probing agent\n"
	"  5    the agent is not answering (timeout, or it closed the "
	"connection)\n"
	"  6    connection refused (nothing listens at HOST:PORT or the "
	"socket path)\n"
	"  7    the SQL query failed (bad SQL, or over its limits)\n"
	"  8    inject: not allowed to ptrace the process (the message says "
	"why)\n"
	"  9    inject: not a CPython this install supports (" PROBING_SUPPORTED
	"),\n"
	"       or Python not ready (not yet\n"
	"       initialized, exiting, or the process is stopped)\n"
	"  10   inject: the library is missing, or dlopen failed in the "
	"process\n"
	"  11   inject: the injection failed (no safe point, timeout, "
	"ptrace error)\n"
	"  12   the agent refused the token (none given, or a wrong one)\n"
	"  13   cluster: some nodes did not answer (the result is "
	"partial)\n"
	"  130  interrupted by Ctrl-C\n"
	"\n"
	"Examples:\n"
	"  probing list\n"
	"  probing -t 1234 backtrace --locals\n"
	"  probing -t 1234 eval 'len(model.state_dict())'\n"
	"  probing -t 1234 query 'SELECT func, lineno FROM python.backtrace'\n"
	"  PROBING_TARGET=127.0.0.1:9922 probing repl\n";

static void main_usage(FILE *f)
{
	fprintf(f, "usage: probing [-t TARGET] [--timeout MS] [-f FORMAT] "
		   "[--token TOKEN]\n"
		   "               COMMAND [ARGS...]\n"
		   "       probing help [COMMAND]\n"
		   "       probing --version\n");
}

static void main_help(void)
{
	main_usage(stdout);
	printf("\nLook inside a running Python process through its Probing "
	       "agent\n(CPython %s in this install).\n\nCommands:\n",
	       PROBING_SUPPORTED);
	for (int i = 0; cmd_table[i]; i++) {
		const struct cmd_entry *e = cmd_table[i];
		char names[32];

		snprintf(names, sizeof(names), "%s%s%s", e->name,
			 e->alias ? ", " : "", e->alias ? e->alias : "");
		printf("  %-14s %s\n", names, e->summary);
	}
	fputs(global_help, stdout);
}

static const struct cmd_entry *cmd_find(const char *name)
{
	for (int i = 0; cmd_table[i]; i++) {
		const struct cmd_entry *e = cmd_table[i];
		if (!strcmp(e->name, name) ||
		    (e->alias && !strcmp(e->alias, name)))
			return e;
	}
	return NULL;
}

static int unknown_command(const char *name)
{
	cli_error(CLI_EUSAGE, "unknown command '%s'", name);
	fprintf(stderr, "Try 'probing --help'.\n");
	return CLI_EUSAGE;
}

static int cmd_help(int argc, char **argv)
{
	const struct cmd_entry *e;

	if (argc < 2) {
		main_help();
		return CLI_OK;
	}
	e = cmd_find(argv[1]);
	if (!e)
		return unknown_command(argv[1]);
	cli_help_print(e);
	return CLI_OK;
}

/* True when args ask for help before any "--". */
static int wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return 0;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"target", required_argument, NULL, 't'},
		{"timeout", required_argument, NULL, 'T'},
		{"token", required_argument, NULL, 'K'},
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct cmd_ctx ctx = {.timeout_ms = CLI_TIMEOUT_DEFAULT};
	const struct cmd_entry *e;
	const char *env, *token = NULL;
	char why[256];
	int c, rc;

	opterr = 0; /* cli_option_error says it better */
	env = getenv("PROBING_TARGET");
	if (env && *env)
		ctx.target = env;
	env = getenv("PROBING_TIMEOUT");
	if (env && *env) {
		if (cli_parse_ms(env, &ctx.timeout_ms) < 0)
			return cli_error(CLI_EUSAGE,
					 "PROBING_TIMEOUT must be a positive "
					 "number of milliseconds, not '%s'",
					 env);
		ctx.timeout_given = 1;
	}
	while ((c = getopt_long(argc, argv, "+:t:f:hV", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			ctx.target = optarg;
			break;
		case 'T':
			if (cli_parse_ms(optarg, &ctx.timeout_ms) < 0)
				return cli_error(CLI_EUSAGE,
						 "--timeout must be a positive "
						 "number of milliseconds, not "
						 "'%s'",
						 optarg);
			ctx.timeout_given = 1;
			break;
		case 'K':
			token = optarg;
			break;
		case 'f':
			if (cli_format_parse(optarg, &ctx.format))
				return CLI_EUSAGE;
			break;
		case 'h':
			main_help();
			return CLI_OK;
		case 'V':
			printf("probing %s (agents for CPython %s)\n",
			       PROBING_VERSION, PROBING_SUPPORTED);
			return CLI_OK;
		default:
			return cli_option_error(NULL, c, argc, argv);
		}
	}
	if (!token && (env = getenv("PROBING_TOKEN")) && *env)
		token = env;
	if (token && dap_token_check(token, why, sizeof(why)))
		return cli_error(CLI_EUSAGE, "%s: %s",
				 token == env ? "PROBING_TOKEN" : "--token",
				 why);
	cli_target_set_token(token);
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		main_usage(stderr);
		fprintf(stderr, "Try 'probing --help'.\n");
		return CLI_EUSAGE;
	}
	if (!strcmp(argv[0], "help"))
		return cmd_help(argc, argv);
	e = cmd_find(argv[0]);
	if (!e)
		return unknown_command(argv[0]);
	if (wants_help(argc, argv)) {
		cli_help_print(e);
		return CLI_OK;
	}
	ctx.entry = e;
	optind = 0; /* glibc: start the command's getopt afresh */
	rc = e->exec(&ctx, argc, argv);
	cli_close(&ctx);
	if (fflush(stdout) != 0 && rc == CLI_OK)
		rc = CLI_EFAIL;
	return rc;
}
