/*
 * cmd_web: `probing web`, a local web page over the agents (serve/web.h;
 * docs/web.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "serve/web.h"
#include "serve/selfrun.h"
#include "target.h"

#define LISTEN_DEFAULT "127.0.0.1:0"

static int cmd_web_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'a'},
		{"web-token", required_argument, NULL, 'W'},
		{NULL, 0, NULL, 0},
	};
	struct web_opts o = {.listen = LISTEN_DEFAULT, .target = ctx->target};
	char err[512];
	int c;

	while ((c = getopt_long(argc, argv, ":a:l", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o.listen = optarg;
			break;
		case 'l': /* was --listen here; -l is locals elsewhere */
			return cli_usage_error(&cmd_web_entry,
					       "-l is not web's: where to listen "
					       "is -a HOST:PORT (--listen), as "
					       "for inject and launch");
		case 'W':
			o.token = optarg;
			if (strlen(optarg) < 16)
				return cli_usage_error(&cmd_web_entry,
						       "--web-token: 16 "
						       "characters at least");
			break;
		default:
			return cli_option_error(&cmd_web_entry, c, argc, argv);
		}
	}
	if (cli_args_done(&cmd_web_entry, argc, argv))
		return CLI_EUSAGE;
	/* What the pages' commands are given (as `probing mcp` does). */
	if (selfrun_hand_down(cli_target_given_token(),
			      ctx->timeout_given ? ctx->timeout_ms : 0))
		return cli_error(CLI_EFAIL, "out of memory");
	if (web_serve(&o, stdout, err, sizeof(err)))
		return cli_error(CLI_EFAIL, "web: %s", err);
	return CLI_OK;
}

const struct cmd_entry cmd_web_entry = {
	.name = "web",
	.alias = NULL,
	.usage = "[-a|--listen HOST:PORT] [--web-token TOKEN]",
	.summary = "A local web page: stacks, SQL, flamegraphs, memory, "
		   "cluster",
	.help = "Serves a web page over the agents on this machine (and "
		"those -t names) and\n"
		"prints its address, with a token: open it in a browser.  "
		"The agents' list;\n"
		"for one agent every thread's stack (refreshing, locals on "
		"click), an SQL\n"
		"console beside the catalog of tables, a flamegraph (start "
		"and stop the\n"
		"sampler), memory with RSS over time, torch module and step "
		"times, hangs and\n"
		"crash reports, the diagnose playbooks; for a torchrun job "
		"every rank's stack\n"
		"and the hang verdict.  Each page is a command of this CLI "
		"run as its own\n"
		"process; the page's files are built into the binary.  Ctrl-C "
		"stops it.\n"
		"\n"
		"Options:\n"
		"  -a, --listen HOST:PORT  where to listen (default "
		"127.0.0.1:0, a free port on\n"
		"                          loopback); beyond loopback anyone "
		"with the address\n"
		"                          and its token reaches what you "
		"can\n"
		"      --web-token TOKEN   the page's token (default: a random "
		"one each start)\n"
		"\n"
		"Examples:\n"
		"  probing web\n"
		"  probing -t 1234 web --listen 127.0.0.1:8080\n"
		"See docs/web.md.\n",
	.flags = CMD_NOTABLE,
	.exec = cmd_web_exec,
};
