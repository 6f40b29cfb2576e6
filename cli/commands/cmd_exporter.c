/*
 * cmd_exporter: `probing exporter`, the agents' metrics for Prometheus
 * (serve/exporter.h; docs/metrics.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "serve/exporter.h"

#define LISTEN_DEFAULT "127.0.0.1:9464"
#define AGENT_TIMEOUT_MS 3000

static int cmd_exporter_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'a'},
		{NULL, 0, NULL, 0},
	};
	struct exporter_opts o = {
		.listen = LISTEN_DEFAULT,
		.target = ctx->target,
		.timeout_ms = ctx->timeout_given ? ctx->timeout_ms
						 : AGENT_TIMEOUT_MS,
	};
	char err[512];
	int c;

	while ((c = getopt_long(argc, argv, ":a:", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o.listen = optarg;
			break;
		default:
			return cli_option_error(&cmd_exporter_entry, c, argc,
						argv);
		}
	}
	if (cli_args_done(&cmd_exporter_entry, argc, argv))
		return CLI_EUSAGE;
	if (exporter_serve(&o, stdout, err, sizeof(err)))
		return cli_error(CLI_EFAIL, "exporter: %s", err);
	return CLI_OK;
}

const struct cmd_entry cmd_exporter_entry = {
	.name = "exporter",
	.usage = "[-a|--listen HOST:PORT]",
	.summary = "Serve every agent's metrics to Prometheus (/metrics)",
	.help = "Serves GET /metrics in Prometheus's text format: at each "
		"scrape every agent on\n"
		"this machine (with -t, that one) is asked for its figures, "
		"all at once, each\n"
		"labelled with its pid and, in a torch.distributed job, "
		"rank, local_rank and\n"
		"run_id: memory (RSS, CUDA allocator), step time and rate, "
		"forward, backward and\n"
		"optimizer time per step (torch.profiling=on), collective "
		"latency, calls and\n"
		"bytes per op, hangs, the sampler's state, the GPUs' "
		"figures; probing_up says\n"
		"which agents answered.  Each figure is read from what the "
		"agent records\n"
		"(docs/metrics.md lists them, with a PromQL query each).  "
		"Ctrl-C stops it.\n"
		"\n"
		"Options:\n"
		"  -a, --listen HOST:PORT  where to listen (default "
		"127.0.0.1:9464); beyond\n"
		"                          loopback anyone who reaches the "
		"port reads the figures\n"
		"The global --timeout is each agent's time to answer "
		"(default 3000 ms).\n"
		"\n"
		"Examples:\n"
		"  probing exporter\n"
		"  probing exporter --listen 0.0.0.0:9464\n"
		"Prometheus: scrape_configs: [{job_name: probing, "
		"static_configs: [{targets:\n"
		"['127.0.0.1:9464']}]}]\n",
	.flags = CMD_NOTABLE,
	.exec = cmd_exporter_exec,
};
