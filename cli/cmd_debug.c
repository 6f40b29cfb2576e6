/*
 * cmd_debug: the debugger from the command line (probing/debug).
 *
 *   debug            the debugger's state: attached?  paused threads?
 *   debug --dump     every thread's stack with locals (backtrace --locals)
 *   debug --pause    pause at the next Python line and keep the stop for
 *                    an editor to attach to; prints the configuration
 *   debug --resume   let a paused target go
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"

#define DEBUG_WAIT_DEFAULT 300 /* seconds a paused target waits */
#define DEBUG_WAIT_MAX 86400
#define DEBUG_ADDRESS_MAX 256

struct debug_opts {
	enum { SHOW, DUMP, PAUSE, RESUME } what;
	const char *address;
	int wait_s;
};

static long long num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

static int flag(const cJSON *o, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

static int show_status(struct cmd_ctx *ctx)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *b, *arr, *it;
	int rc;

	cJSON_AddStringToObject(args, "action", "status");
	rc = cli_request(ctx, "probing/debug", args, ctx->timeout_ms, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
		dap_message_free(resp);
		return rc;
	}
	b = resp->body;
	if (ctx->format == CLI_FORMAT_JSON) {
		char *s = cJSON_Print(b);
		if (s)
			puts(s);
		free(s);
		dap_message_free(resp);
		return CLI_OK;
	}
	printf("debugger:     %s\n",
	       flag(b, "held")
		       ? "none attached; the target is held paused for one"
	       : flag(b, "attached") ? "attached"
				     : "not attached");
	printf("paused:       ");
	arr = cJSON_GetObjectItemCaseSensitive(b, "pausedThreads");
	if (!cJSON_GetArraySize(arr))
		printf("no thread");
	cJSON_ArrayForEach(it, arr)
		printf("%s%lld", it == arr->child ? "threads " : ", ",
		       (long long)it->valuedouble);
	printf("\nhook:         %s\n",
	       flag(b, "hook")
		       ? "installed (frames with breakpoints are traced)"
		       : "none (the target runs at full speed)");
	printf("exceptions:   ");
	arr = cJSON_GetObjectItemCaseSensitive(b, "exceptionFilters");
	if (!cJSON_GetArraySize(arr))
		printf("no exception breakpoints");
	cJSON_ArrayForEach(it, arr)
		printf("%s%s", it == arr->child ? "" : ", ", it->valuestring);
	printf("\n");
	dap_message_free(resp);
	return CLI_OK;
}

/* Where the stopped thread is, from its top frame. */
static void show_stop(struct cmd_ctx *ctx, long long tid)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *frames, *f, *src;
	const char *path = "?", *name = "?";

	cJSON_AddNumberToObject(args, "threadId", (double)tid);
	cJSON_AddNumberToObject(args, "levels", 1);
	if (cli_request(ctx, "stackTrace", args, ctx->timeout_ms, &resp) ||
	    !resp->success) {
		printf("Paused: thread %lld\n", tid);
		dap_message_free(resp);
		return;
	}
	frames = cJSON_GetObjectItemCaseSensitive(resp->body, "stackFrames");
	f = cJSON_GetArrayItem(frames, 0);
	src = cJSON_GetObjectItemCaseSensitive(f, "source");
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(src, "path")))
		path = cJSON_GetObjectItemCaseSensitive(src, "path")
			       ->valuestring;
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(f, "name")))
		name = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
	printf("Paused: thread %lld at %s:%lld (%s)\n", tid, path,
	       num(f, "line"), name);
	dap_message_free(resp);
}

/* Waits up to ms for the `stopped` event; its thread id, or -1. */
static long long wait_stopped(struct cmd_ctx *ctx, int ms)
{
	struct timespec t0, t;
	char err[256];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct dap_message *msg = NULL;
		long long left;
		int rc;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - ((t.tv_sec - t0.tv_sec) * 1000LL +
			     (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return -1;
		rc = dap_client_read(ctx->client, (int)left, &msg, NULL, NULL,
				     err, sizeof(err));
		if (rc < 0 || !msg)
			return -1;
		if (msg->type == DAP_EVENT &&
		    !strcmp(msg->command, "stopped")) {
			long long tid = num(msg->body, "threadId");
			dap_message_free(msg);
			return tid;
		}
		dap_message_free(msg);
	}
}

static void print_config(long long pid, const char *address)
{
	char host[DEBUG_ADDRESS_MAX];
	const char *colon = address ? strrchr(address, ':') : NULL;

	printf("\nAttach from VS Code (the Probing extension) with this "
	       "configuration in\n.vscode/launch.json:\n\n");
	printf("{\n  \"type\": \"probing\",\n  \"request\": \"attach\",\n");
	if (colon && (size_t)(colon - address) < sizeof(host)) {
		memcpy(host, address, (size_t)(colon - address));
		host[colon - address] = 0;
		printf("  \"name\": \"Attach to %s\",\n", address);
		printf("  \"host\": \"%s\",\n  \"port\": %s\n}\n", host,
		       colon + 1);
	} else {
		printf("  \"name\": \"Attach to process %lld\",\n", pid);
		printf("  \"processId\": %lld\n}\n", pid);
	}
}

static int do_pause(struct cmd_ctx *ctx, const struct debug_opts *o)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *addr;
	char address[DEBUG_ADDRESS_MAX] = "";
	long long pid, tid;
	int rc;

	cJSON_AddStringToObject(args, "action", "pause");
	cJSON_AddNumberToObject(args, "waitMs", o->wait_s * 1000.0);
	if (o->address)
		cJSON_AddStringToObject(args, "address", o->address);
	rc = cli_request(ctx, "probing/debug", args, ctx->timeout_ms, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
		dap_message_free(resp);
		return rc;
	}
	pid = num(resp->body, "pid");
	addr = cJSON_GetObjectItemCaseSensitive(resp->body, "address");
	if (cJSON_IsString(addr))
		snprintf(address, sizeof(address), "%s", addr->valuestring);
	dap_message_free(resp);
	tid = wait_stopped(ctx, ctx->timeout_ms);
	if (tid > 0)
		show_stop(ctx, tid);
	else
		printf("Pause requested: no thread has reached a Python line "
		       "yet (threads in C\nstop when they return to "
		       "Python).\n");
	print_config(pid, address[0] ? address : NULL);
	printf("\nThe target stays paused for %d s or until a debugger "
	       "attaches and lets it go;\n`probing -t %lld debug --resume` "
	       "resumes it now.\n",
	       o->wait_s, pid);
	fflush(stdout);
	return CLI_OK;
}

static int do_resume(struct cmd_ctx *ctx)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	int rc;

	cJSON_AddStringToObject(args, "action", "resume");
	rc = cli_request(ctx, "probing/debug", args, ctx->timeout_ms, &resp);
	if (rc != CLI_OK)
		return rc;
	rc = resp->success ? CLI_OK
			   : cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	if (rc == CLI_OK)
		printf("resumed\n");
	dap_message_free(resp);
	return rc;
}

static int cmd_debug_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"dump", no_argument, NULL, 'd'},
		{"pause", no_argument, NULL, 'p'},
		{"resume", no_argument, NULL, 'r'},
		{"address", required_argument, NULL, 'a'},
		{"wait", required_argument, NULL, 'w'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	struct debug_opts o = {.what = SHOW, .wait_s = DEBUG_WAIT_DEFAULT};
	int c, n = 0, rc;
	char *end;
	long w;

	while ((c = getopt_long(argc, argv, ":dpra:w:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.what = DUMP;
			n++;
			break;
		case 'p':
			o.what = PAUSE;
			n++;
			break;
		case 'r':
			o.what = RESUME;
			n++;
			break;
		case 'a':
			if (strlen(optarg) >= DEBUG_ADDRESS_MAX)
				return cli_usage_error(&cmd_debug_entry,
						       "--address is too long");
			o.address = optarg;
			break;
		case 'w':
			errno = 0;
			w = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || w < 1 ||
			    w > DEBUG_WAIT_MAX)
				return cli_usage_error(&cmd_debug_entry,
						       "--wait takes seconds, "
						       "1 to %d",
						       DEBUG_WAIT_MAX);
			o.wait_s = (int)w;
			break;
		case 'f':
			if (cli_format_parse(optarg, &ctx->format))
				return CLI_EUSAGE;
			break;
		default:
			return cli_option_error(&cmd_debug_entry, c, argc,
						argv);
		}
	}
	if (optind < argc)
		return cli_usage_error(&cmd_debug_entry,
				       "unexpected argument '%s'",
				       argv[optind]);
	if (n > 1)
		return cli_usage_error(&cmd_debug_entry,
				       "--dump, --pause and "
				       "--resume go one at a time");
	if ((o.address || o.wait_s != DEBUG_WAIT_DEFAULT) && o.what != PAUSE)
		return cli_usage_error(&cmd_debug_entry,
				       "--address and --wait go with --pause");
	if (o.what == DUMP) {
		char *bt[] = {"backtrace", "--locals", NULL};

		optind = 1;
		return cmd_backtrace_entry.exec(ctx, 2, bt);
	}
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	switch (o.what) {
	case PAUSE:
		return do_pause(ctx, &o);
	case RESUME:
		return do_resume(ctx);
	default:
		return show_status(ctx);
	}
}

const struct cmd_entry cmd_debug_entry = {
	.name = "debug",
	.alias = NULL,
	.usage = "[--dump | --pause [--address HOST:PORT] [--wait S] | "
		 "--resume]",
	.summary = "The debugger: state, stack dump, pause for an editor",
	.help = "Without options: whether a debugger is attached, which "
		"threads are paused,\n"
		"whether the frame-evaluation hook is installed.\n"
		"\n"
		"  -d, --dump           every thread's stack with its locals "
		"(as\n"
		"                       backtrace --locals)\n"
		"  -p, --pause          pause every thread at its next Python "
		"line and keep\n"
		"                       the target paused for an editor to "
		"attach; prints\n"
		"                       where it stopped and the launch "
		"configuration\n"
		"  -a, --address HOST:PORT  with --pause: also listen on this "
		"TCP address\n"
		"                       (loopback) and print a host/port "
		"configuration\n"
		"  -w, --wait S         with --pause: resume by itself after S "
		"seconds when\n"
		"                       no debugger attached (default 300)\n"
		"  -r, --resume         let a paused target go (the attached "
		"editor, if\n"
		"                       any, is told)\n"
		"  -f, --format FORMAT  table or json (the state)\n",
	.flags = CMD_TARGET,
	.exec = cmd_debug_exec,
};
