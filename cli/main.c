/*
 * main: the `probing` command: global options, the command table, help,
 * and dispatch.  Each command lives in its own commands/cmd_<name>.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "dap_addr.h"
#include "dap_token.h"
#include "nearest.h"
#include "pager.h"
#include "target.h"

#ifndef PROBING_SUPPORTED
#define PROBING_SUPPORTED "?" /* the CPythons built for (CMake) */
#endif
#ifndef PROBING_VERSION
#define PROBING_VERSION "0.0.0"
#endif

static const struct cmd_entry *const cmd_table[] = {
	&cmd_list_entry,   &cmd_runs_entry,    &cmd_backtrace_entry,
	&cmd_eval_entry,   &cmd_query_entry,   &cmd_flamegraph_entry,
	&cmd_top_entry,
	&cmd_trace_entry,
	&cmd_perf_entry,   &cmd_repl_entry,    &cmd_config_entry,
	&cmd_dap_entry,	   &cmd_inject_entry,  &cmd_launch_entry,
	&cmd_debug_entry,  &cmd_memory_entry,  &cmd_hangs_entry,
	&cmd_report_entry, &cmd_cluster_entry, &cmd_diagnose_entry,
	&cmd_mcp_entry,	   &cmd_web_entry,     &cmd_exporter_entry,
	NULL,
};

static const char global_help[] =
	"\n"
	"Options:\n"
	"  -t, --target TARGET  the agent to talk to: a pid, HOST:PORT, "
	"@name or a\n"
	"                       unix socket path (default $PROBING_TARGET); "
	"the target may\n"
	"                       also come first, before the command: "
	"'probing 1234 backtrace'\n"
	"  -p, --pid PID        the same as -t PID\n"
	"      --timeout MS     how long to wait for the agent, in "
	"milliseconds\n"
	"                       (default $PROBING_TIMEOUT, else 10000)\n"
	"      --token TOKEN    the token an agent on TCP asks for (default "
	"$PROBING_TOKEN,\n"
	"                       else for HOST:PORT the token file "
	"$XDG_RUNTIME_DIR/probing/token\n"
	"                       or ~/.probing/token; 'none': send none; see "
	"docs/security.md)\n"
	"  -f, --format FORMAT  table, json or csv, for commands that print "
	"tables\n"
	"      --no-pager       on a terminal, long output (backtrace, config, "
	"hangs,\n"
	"                       list, memory, query, runs) goes through\n"
	"                       $PROBING_PAGER, else $PAGER, else less "
	"(LESS=FRX):\n"
	"                       this prints it directly\n"
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
		   "       probing TARGET COMMAND [ARGS...]\n"
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

		printf("  %-11s %s", e->name, e->summary);
		if (e->alias)
			printf(" (also: %s)", e->alias);
		printf("\n");
	}
	fputs(global_help, stdout);
}

/* Is name one of the space-separated words of list? */
static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);

	while (list && *list) {
		size_t w = strcspn(list, " ");

		if (w == n && !strncmp(list, name, n))
			return 1;
		list += w;
		list += strspn(list, " ");
	}
	return 0;
}

static const struct cmd_entry *cmd_find(const char *name)
{
	for (int i = 0; cmd_table[i]; i++) {
		const struct cmd_entry *e = cmd_table[i];
		if (!strcmp(e->name, name) || in_list(e->alias, name))
			return e;
	}
	return NULL;
}

/* The original Probing's commands that have another form here. */
static const struct {
	const char *word, *use;
} old_words[] = {
	{"pause", "debug --pause"},
	{"catch", "config crash.enabled=on"},
	{"crash", "config crash.enabled=on"},
	{"attach", "debug --pause (then attach VS Code)"},
};

/* Says what name is here: the original's form, a near command, or the
 * list. */
static int unknown_command(const char *name)
{
	const char *names[sizeof(cmd_table) / sizeof(cmd_table[0])];
	const char *near;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(old_words) / sizeof(old_words[0]); i++)
		if (!strcmp(old_words[i].word, name)) {
			cli_error(CLI_EUSAGE,
				 "'%s' is 'probing -t TARGET %s' here", name,
				 old_words[i].use);
			return CLI_EUSAGE;
		}
	for (int i = 0; cmd_table[i]; i++)
		names[n++] = cmd_table[i]->name;
	near = nearest_word(name, names, n);
	if (near)
		cli_error(CLI_EUSAGE, "unknown command '%s'; did you mean '%s'?",
			  name, near);
	else
		cli_error(CLI_EUSAGE,
			  "unknown command '%s' (the commands: 'probing "
			  "--help')",
			  name);
	return CLI_EUSAGE;
}

/* Does word name a target (a pid, HOST:PORT, @name, a socket path)
 * rather than a command?  For `probing 1234 backtrace`: what -t takes. */
static int looks_like_target(const char *word)
{
	struct dap_addr a;

	return dap_addr_parse(word, &a, NULL, 0) == 0;
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

/* Where the target came from, for two that disagree. */
enum target_src { FROM_NONE, FROM_ENV, FROM_OPTION };

struct globals {
	struct cmd_ctx *ctx;
	const char *token;
	enum target_src target_src;
	int format_given; /* -f before the command */
	int no_pager;	  /* --no-pager */
};

static int set_target(struct globals *g, const char *text, const char *how)
{
	if (g->target_src == FROM_OPTION && strcmp(g->ctx->target, text))
		return cli_error(CLI_EUSAGE, "two targets: '%s' and %s '%s'",
				 g->ctx->target, how, text);
	g->ctx->target = text;
	g->target_src = FROM_OPTION;
	return CLI_OK;
}

/*
 * The global options at the front of argv (getopt's '+': up to the first
 * word that is not one).  Returns -1 to go on (optind at that word), or
 * the exit code to end with.
 */
static int parse_globals(struct globals *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{"target", required_argument, NULL, 't'},
		{"pid", required_argument, NULL, 'p'},
		{"timeout", required_argument, NULL, 'T'},
		{"token", required_argument, NULL, 'K'},
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"no-pager", no_argument, NULL, 'P'},
		{NULL, 0, NULL, 0},
	};
	struct cmd_ctx *ctx = g->ctx;
	int c;

	while ((c = getopt_long(argc, argv, "+:t:p:f:hV", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (set_target(g, optarg, "-t") != CLI_OK)
				return CLI_EUSAGE;
			break;
		case 'p':
			if (!optarg[0] ||
			    optarg[strspn(optarg, "0123456789")])
				return cli_error(CLI_EUSAGE,
						 "--pid takes a process id, "
						 "not '%s' (for HOST:PORT, "
						 "@name or a path: -t)",
						 optarg);
			if (set_target(g, optarg, "--pid") != CLI_OK)
				return CLI_EUSAGE;
			break;
		case 'T':
			if (cli_parse_duration(optarg, 1, &ctx->timeout_ms) <
			    0)
				return cli_error(CLI_EUSAGE,
						 "--timeout must be "
						 CLI_DURATION_HELP " (a bare "
						 "number: milliseconds), not "
						 "'%s'",
						 optarg);
			ctx->timeout_given = 1;
			break;
		case 'K':
			g->token = optarg;
			break;
		case 'P':
			g->no_pager = 1;
			break;
		case 'f':
			if (cli_format_parse(optarg, &ctx->format))
				return CLI_EUSAGE;
			g->format_given = 1;
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
	return -1;
}

int main(int argc, char **argv)
{
	struct cmd_ctx ctx = {.timeout_ms = CLI_TIMEOUT_DEFAULT};
	struct globals g = {.ctx = &ctx};
	const struct cmd_entry *e;
	const char *env;
	char why[256];
	int rc;

	opterr = 0; /* cli_option_error says it better */
	env = getenv("PROBING_TARGET");
	if (env && *env) {
		ctx.target = env;
		g.target_src = FROM_ENV;
	}
	env = getenv("PROBING_TIMEOUT");
	if (env && *env) {
		if (cli_parse_duration(env, 1, &ctx.timeout_ms) < 0)
			return cli_error(CLI_EUSAGE,
					 "PROBING_TIMEOUT must be "
					 CLI_DURATION_HELP " (a bare number: "
					 "milliseconds), not '%s'",
					 env);
		ctx.timeout_given = 1;
	}
	if ((rc = parse_globals(&g, argc, argv)) >= 0)
		return rc;
	/* The original's form: the target first (`probing 1234 backtrace`),
	 * then global options again. */
	if (optind < argc && !cmd_find(argv[optind]) &&
	    strcmp(argv[optind], "help") && looks_like_target(argv[optind])) {
		if (set_target(&g, argv[optind], "the target") != CLI_OK)
			return CLI_EUSAGE;
		argc -= optind;
		argv += optind;
		optind = 0; /* glibc: argv[0] is skipped, as a program name */
		if ((rc = parse_globals(&g, argc, argv)) >= 0)
			return rc;
	}
	env = getenv("PROBING_TOKEN");
	if (!g.token && env && *env)
		g.token = env;
	/* "none" is the agent's opt-out (docs/security.md); exported for a
	 * target, it reaches this CLI too, where it means: send no token. */
	if (g.token && strcmp(g.token, CLI_TOKEN_NONE) &&
	    dap_token_check(g.token, why, sizeof(why)))
		return cli_error(CLI_EUSAGE, "%s: %s",
				 g.token == env ? "PROBING_TOKEN" : "--token",
				 why);
	cli_target_set_token(g.token);
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
	cli_hint_target = ctx.target;
	if (wants_help(argc, argv)) {
		cli_help_print(e);
		return CLI_OK;
	}
	if ((e->flags & CMD_NOTABLE) && g.format_given)
		return cli_error(CLI_EUSAGE,
				 "%s prints no table: -f does not apply to it",
				 e->name);
	ctx.entry = e;
	optind = 0; /* glibc: start the command's getopt afresh */
	if ((e->flags & CMD_PAGED) && !g.no_pager)
		cli_pager_start();
	rc = e->exec(&ctx, argc, argv);
	cli_close(&ctx);
	if (fflush(stdout) != 0 && rc == CLI_OK)
		rc = CLI_EFAIL;
	cli_pager_end();
	return rc;
}
