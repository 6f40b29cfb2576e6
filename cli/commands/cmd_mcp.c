/*
 * cmd_mcp: `probing mcp`, a Model Context Protocol server on stdio for AI
 * assistants (serve/mcp.h; docs/mcp.md).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd.h"
#include "serve/mcp.h"
#include "serve/selfrun.h"
#include "target.h"

static int cmd_mcp_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"allow-eval", no_argument, NULL, 'E'},
		{NULL, 0, NULL, 0},
	};
	int c, allow_eval = 0;

	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'E':
			allow_eval = 1;
			break;
		default:
			return cli_option_error(&cmd_mcp_entry, c, argc, argv);
		}
	}
	if (cli_args_done(&cmd_mcp_entry, argc, argv))
		return CLI_EUSAGE;
	/* The commands answering the tools get what this one was given. */
	if (selfrun_hand_down(cli_target_given_token(),
			      ctx->timeout_given ? ctx->timeout_ms : 0))
		return cli_error(CLI_EFAIL, "out of memory");
	/* A client gone: EPIPE on a write, an error and an exit, not a
	 * signal. */
	signal(SIGPIPE, SIG_IGN);
	if (mcp_serve(stdin, stdout, allow_eval))
		return cli_error(CLI_EFAIL,
				 "mcp: stdout: the client went away");
	return CLI_OK;
}

const struct cmd_entry cmd_mcp_entry = {
	.name = "mcp",
	.alias = NULL,
	.usage = "[--allow-eval]",
	.summary = "A Model Context Protocol server on stdio, for AI "
		   "assistants",
	.help = "Speaks the Model Context Protocol (JSON-RPC 2.0, one message "
		"a line) on stdin\n"
		"and stdout, for an AI assistant's MCP client to start.  Its "
		"tools are the\n"
		"commands of this CLI: list_agents, list_recordings, "
		"backtrace, query,\n"
		"describe_tables, memory, flamegraph, torch_module_times, "
		"hangs,\n"
		"cluster_backtrace, cluster_hang, diagnose and report.  Its "
		"resources are the\n"
		"crash reports of the recordings and the hangs live agents "
		"saw.  Each tool\n"
		"runs this `probing` again (with -t from the tool's target), "
		"so it reaches what\n"
		"you can.  Ends when stdin does.  See docs/mcp.md.\n"
		"\n"
		"Options:\n"
		"      --allow-eval  offer the eval tool too (runs Python in "
		"the target;\n"
		"                    an agent in read-only mode still refuses "
		"it)\n"
		"\n"
		"Example (a client's configuration):\n"
		"  {\"mcpServers\": {\"probing\": {\"command\": \"probing\", "
		"\"args\": [\"mcp\"]}}}\n",
	.flags = CMD_NOTABLE,
	.exec = cmd_mcp_exec,
};
