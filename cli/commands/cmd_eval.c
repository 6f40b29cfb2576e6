/*
 * cmd_eval: run Python code in the target (`evaluate`, context "repl").
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

#define EVAL_CODE_MAX (8u << 20) /* bytes of code; the wire allows 16 MiB */

/* Reads all of stdin.  Returns a heap string (caller frees) or NULL after
 * saying why. */
static char *read_stdin(void)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	ssize_t n;

	if (!buf)
		return NULL;
	for (;;) {
		if (len + 1 >= cap) {
			char *nb;
			if (cap >= EVAL_CODE_MAX) {
				cli_error(CLI_EUSAGE, "code on stdin is over "
						      "8 MiB");
				free(buf);
				return NULL;
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(0, buf + len, cap - len - 1);
		if (n == 0)
			break;
		if (n < 0) {
			cli_error(CLI_EUSAGE, "reading stdin failed");
			free(buf);
			return NULL;
		}
		len += (size_t)n;
	}
	buf[len] = '\0';
	return buf;
}

/* The arguments joined by spaces, or stdin for "-". */
static char *gather_code(int argc, char **argv)
{
	size_t len = 0;
	char *code;

	if (argc == 1 && !strcmp(argv[0], "-"))
		return read_stdin();
	for (int i = 0; i < argc; i++)
		len += strlen(argv[i]) + 1;
	if (len > EVAL_CODE_MAX) {
		cli_error(CLI_EUSAGE, "code is over 8 MiB");
		return NULL;
	}
	code = malloc(len + 1);
	if (!code)
		return NULL;
	code[0] = '\0';
	for (int i = 0; i < argc; i++) {
		if (i)
			strcat(code, " ");
		strcat(code, argv[i]);
	}
	return code;
}

static int cmd_eval_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"timeout", required_argument, NULL, 'T'},
		{"frame", required_argument, NULL, 'F'},
		{"thread", required_argument, NULL, 'H'},
		{NULL, 0, NULL, 0},
	};
	struct dap_message *resp = NULL;
	int c, rc, timeout = ctx->timeout_ms;
	long frame = -1;
	int thread = 0;
	const char *function = NULL;
	char *end;
	cJSON *args;
	char *code;

	while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
		switch (c) {
		case 'T':
			if (cli_parse_duration(optarg, 1, &timeout) < 0)
				return cli_usage_error(
					&cmd_eval_entry,
					"--timeout must be " CLI_DURATION_HELP
					" (a bare number: milliseconds)");
			break;
		case 'F':
			/* A number as backtrace numbers them, or a name. */
			frame = strtol(optarg, &end, 10);
			if (end == optarg || *end) {
				frame = -1;
				function = optarg;
			} else if (frame < 0 || frame > 100000) {
				return cli_usage_error(&cmd_eval_entry,
						       "--frame is a number "
						       "from 0 (#0 in "
						       "backtrace) or a "
						       "function's name");
			}
			break;
		case 'H':
			if (cli_parse_ms(optarg, &thread) < 0)
				return cli_usage_error(
					&cmd_eval_entry,
					"--thread is a thread's id as "
					"backtrace shows it (Thread N)");
			break;
		default:
			return cli_option_error(&cmd_eval_entry, c, argc, argv);
		}
	}
	if (thread && frame < 0 && !function)
		frame = 0; /* --thread alone: its innermost frame */
	if (optind >= argc)
		return cli_usage_error(&cmd_eval_entry, "no code given");
	code = gather_code(argc - optind, argv + optind);
	if (!code)
		return CLI_EUSAGE;
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK) {
		free(code);
		return rc;
	}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "expression", code);
	cJSON_AddStringToObject(args, "context", "repl");
	cJSON_AddNumberToObject(args, "timeoutMs", timeout);
	if (frame >= 0)
		cJSON_AddNumberToObject(args, "probingFrame", (double)frame);
	if (function)
		cJSON_AddStringToObject(args, "probingFunction", function);
	if (thread)
		cJSON_AddNumberToObject(args, "probingThread", (double)thread);
	free(code);
	cli_sigint_catch();
	/* The agent stops the code at timeoutMs; wait a little longer for
	 * its reply.  One Ctrl-C interrupts the code, a second gives up. */
	rc = cli_request_cancellable(ctx, "evaluate", args,
				     timeout + CLI_EVAL_GRACE_MS, 2, &resp);
	if (rc == CLI_OK)
		rc = cli_evaluate_show(resp);
	if (resp)
		dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_eval_entry = {
	.name = "eval",
	.alias = NULL,
	.usage = "[--timeout MS] [--frame N|FUNC] [--thread T] CODE... | -",
	.summary = "Run Python code in the target; print its output and value",
	.help = "CODE is the arguments joined by spaces, or stdin when it is "
		"a single \"-\".\n"
		"It runs in the namespace of __main__, or with --frame in a "
		"frame of a\n"
		"running thread (its globals, and a copy of its locals: "
		"assignments\n"
		"are not written back).  What it prints comes "
		"first, then\n"
		"the repr of its value when it is an expression.  When it "
		"raises, the\n"
		"traceback goes to stderr and the exit code is 1.\n"
		"Ctrl-C interrupts the code in the target (KeyboardInterrupt); "
		"a second\n"
		"Ctrl-C stops waiting.  Options come before CODE.\n"
		"\n"
		"Options:\n"
		"  --timeout MS   stop the code after MS milliseconds "
		"(default: "
		"the global\n"
		"                 --timeout, 10000)\n"
		"  --frame N|FUNC in frame N of the thread (#N in backtrace), "
		"or the\n"
		"                 innermost frame of function FUNC (a name "
		"or Class.name)\n"
		"  --thread T     the thread (its id as backtrace shows it); "
		"default: the\n"
		"                 main thread\n"
		"\n"
		"Examples:\n"
		"  probing -t 1234 eval --frame train 'model.training'\n"
		"  probing -t 1234 eval 'import gc; "
		"print(len(gc.get_objects()))'\n"
		"  probing -t 1234 eval - < snippet.py\n",
	.flags = CMD_TARGET | CMD_NOTABLE,
	.exec = cmd_eval_exec,
};
