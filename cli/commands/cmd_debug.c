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
#include "target.h"

#define DEBUG_WAIT_DEFAULT 300 /* seconds a paused target waits */
#define DEBUG_WAIT_MAX 86400
#define DEBUG_ADDRESS_MAX 256
#define DEBUG_NAME_BUF 1024 /* a name shown, escaped */

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
	rc = cli_request_ok(ctx, "probing/debug", args, ctx->timeout_ms,
			    &resp);
	if (rc != CLI_OK)
		return rc;
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

/* --pause: how long the CLI waits for the stop (a thread running Python
 * stops at its next line, within microseconds; a thread in C — a lock, a
 * sleep, I/O, a long kernel — only when it returns to Python, which may be
 * never, and is held where it waits meanwhile: a pause no thread reaches
 * is a stop of held threads after a second), then for the other threads
 * to reach a line.  Neither is an error when it passes: the report says
 * which threads are held in C (where) or, holding the GIL, running. */
#define DEBUG_STOP_WAIT_MS 5000
#define DEBUG_SETTLE_MS 1000
#define DEBUG_POLL_MS 50
#define DEBUG_THREADS_MAX 256 /* threads reported */

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The first `stopped` event's thread, also when it comes while the
 * client waits for a response (dap_client_wait hands events here). */
static void on_event(const struct dap_message *ev, void *arg)
{
	long long *tid = arg;

	if (*tid <= 0 && !strcmp(ev->command, "stopped"))
		*tid = num(ev->body, "threadId");
}

/* Waits until *tid is set by a `stopped` event or deadline (monotonic
 * ms) passes.  Returns 0, or -1 when the connection failed. */
static int wait_stopped(struct cmd_ctx *ctx, long long *tid, int64_t deadline)
{
	char err[256];

	while (*tid <= 0) {
		struct dap_message *msg = NULL;
		int64_t left = deadline - now_ms();

		if (left <= 0)
			return 0;
		if (dap_client_read(ctx->client, (int)left, &msg, NULL, NULL,
				    err, sizeof(err)) < 0)
			return -1;
		if (!msg)
			return 0;
		if (msg->type == DAP_EVENT)
			on_event(msg, tid);
		dap_message_free(msg);
	}
	return 0;
}

struct pause_thread {
	long long id;
	char name[128];
	int paused;
	int held; /* in C, held by the stop: its frames readable */
};

struct pause_report {
	struct pause_thread t[DEBUG_THREADS_MAX];
	size_t n;
	int listed; /* the `threads` request answered */
	char why[256];
};

static struct pause_thread *find_thread(struct pause_report *r, long long id)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->t[i].id == id)
			return &r->t[i];
	if (r->n == DEBUG_THREADS_MAX)
		return NULL;
	r->t[r->n].id = id;
	r->t[r->n].name[0] = 0;
	r->t[r->n].paused = 0;
	r->t[r->n].held = 0;
	return &r->t[r->n++];
}

/* The length of name without suffix, if it ends in it; else 0. */
static size_t cut_suffix(const char *name, const char *suffix)
{
	size_t len = strlen(name), n = strlen(suffix);

	return len > n && !strcmp(name + len - n, suffix) ? len - n : 0;
}

/* The target's Python threads and their names (`threads`; a paused
 * target answers at once, its threads hold no GIL).  During a stop
 * (stopped) the agent names a thread that is not paused "NAME (in C)"
 * (held) or "NAME (running)": the name is NAME. */
static void list_threads(struct cmd_ctx *ctx, struct pause_report *r,
			 int stopped)
{
	struct dap_message *resp = NULL;
	const cJSON *arr, *it;

	if (cli_request(ctx, "threads", cJSON_CreateObject(), ctx->timeout_ms,
			&resp) != CLI_OK) {
		snprintf(r->why, sizeof(r->why), "no answer");
		return;
	}
	if (!resp->success) {
		snprintf(r->why, sizeof(r->why), "%s", cli_resp_message(resp));
		dap_message_free(resp);
		return;
	}
	r->listed = 1;
	arr = cJSON_GetObjectItemCaseSensitive(resp->body, "threads");
	cJSON_ArrayForEach(it, arr)
	{
		const cJSON *name =
			cJSON_GetObjectItemCaseSensitive(it, "name");
		struct pause_thread *t = find_thread(r, num(it, "id"));
		size_t len;

		if (!t || !cJSON_IsString(name))
			continue;
		len = strlen(name->valuestring);
		if (stopped && !((len = cut_suffix(name->valuestring,
						   " (in C)")) ||
				 (len = cut_suffix(name->valuestring,
						   " (running)"))))
			len = strlen(name->valuestring);
		snprintf(t->name, sizeof(t->name), "%.*s", (int)len,
			 name->valuestring);
	}
	dap_message_free(resp);
}

/* Marks the paused threads, and those held in C (probing/debug status).
 * Returns how many of the known threads are not paused, or -1 when it
 * cannot tell. */
static int mark_paused(struct cmd_ctx *ctx, struct pause_report *r)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *it;
	int running = 0;

	cJSON_AddStringToObject(args, "action", "status");
	if (cli_request(ctx, "probing/debug", args, ctx->timeout_ms, &resp) !=
		    CLI_OK ||
	    !resp->success) {
		dap_message_free(resp);
		return -1;
	}
	for (size_t i = 0; i < r->n; i++)
		r->t[i].paused = r->t[i].held = 0;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(
				       resp->body, "pausedThreads"))
	{
		struct pause_thread *t =
			find_thread(r, (long long)it->valuedouble);
		if (t)
			t->paused = 1;
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(
				       resp->body, "heldThreads"))
	{
		struct pause_thread *t =
			find_thread(r, (long long)it->valuedouble);
		if (t)
			t->held = !t->paused;
	}
	dap_message_free(resp);
	for (size_t i = 0; i < r->n; i++)
		running += !r->t[i].paused;
	return running;
}

/* One paused (or held) thread, where it is (from its top frame). */
static void show_paused(struct cmd_ctx *ctx, const struct pause_thread *t)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *frames, *f, *src;
	const char *path = "?", *name = "?";
	char b1[DEBUG_NAME_BUF], b2[DEBUG_NAME_BUF];

	/* Thread, file and function names are the program's: escaped
	 * (cli_text_fit), never sent to the terminal as they are. */
	printf("%s thread %lld", t->paused ? "Paused: " : "Held:   ", t->id);
	if (t->name[0])
		printf(" \"%s\"", cli_text_fit(t->name, 0, b1, sizeof(b1)));
	cJSON_AddNumberToObject(args, "threadId", (double)t->id);
	cJSON_AddNumberToObject(args, "levels", 1);
	if (cli_request(ctx, "stackTrace", args, ctx->timeout_ms, &resp) ||
	    !resp->success) {
		printf("\n");
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
	printf(" at %s:%lld (%s)%s\n", cli_text_fit(path, 0, b1, sizeof(b1)),
	       num(f, "line"), cli_text_fit(name, 0, b2, sizeof(b2)),
	       t->paused ? "" : ", in C: it stops when it returns to Python");
	dap_message_free(resp);
}

/*
 * After the pause request: waits for the first stop (DEBUG_STOP_WAIT_MS),
 * gives the other threads DEBUG_SETTLE_MS to reach a line, and says which
 * threads are paused (where), held in C (where) or still running.  *tid
 * holds the first stop seen so far.
 */
static void report_pause(struct cmd_ctx *ctx, long long *tid)
{
	struct pause_report *r = calloc(1, sizeof(*r));
	char name[DEBUG_NAME_BUF];
	int64_t settle;
	int running = -1, held = 0;

	if (!r)
		return;
	if (wait_stopped(ctx, tid, now_ms() + DEBUG_STOP_WAIT_MS)) {
		printf("Pause requested; the connection was lost before a "
		       "thread stopped.\n");
		free(r);
		return;
	}
	list_threads(ctx, r, *tid > 0);
	settle = now_ms() + DEBUG_SETTLE_MS;
	for (;;) {
		running = mark_paused(ctx, r);
		if (running <= 0 || *tid <= 0 || now_ms() >= settle)
			break;
		struct timespec ts = {0, DEBUG_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < r->n; i++)
		held += r->t[i].held;
	if (*tid > 0 && held && running == (int)r->n)
		printf("Paused in C: no thread is at a Python line.  Each "
		       "waits in a call (a lock,\na sleep, I/O, a "
		       "collective), held there, and stops when it returns "
		       "to\nPython.\n");
	if (*tid <= 0)
		printf("Pause requested: no thread reached a Python line "
		       "within "
		       "%d s.\nThreads in C (a lock, a sleep, I/O, a long "
		       "computation) stop when they\nreturn to Python; the "
		       "pause stays armed until then.\n",
		       DEBUG_STOP_WAIT_MS / 1000);
	/* The thread that stopped first, then the others. */
	for (size_t i = 0; i < r->n; i++)
		if (r->t[i].paused && r->t[i].id == *tid)
			show_paused(ctx, &r->t[i]);
	for (size_t i = 0; i < r->n; i++)
		if (r->t[i].paused && r->t[i].id != *tid)
			show_paused(ctx, &r->t[i]);
	for (size_t i = 0; i < r->n; i++)
		if (!r->t[i].paused && r->t[i].held)
			show_paused(ctx, &r->t[i]);
	for (size_t i = 0; i < r->n; i++)
		if (!r->t[i].paused && !r->t[i].held)
			printf("Running: thread %lld%s%s%s, in C: it stops "
			       "when "
			       "it returns to Python\n",
			       r->t[i].id, r->t[i].name[0] ? " \"" : "",
			       cli_text_fit(r->t[i].name, 0, name, sizeof(name)),
			       r->t[i].name[0] ? "\"" : "");
	if (!r->listed)
		printf("(the thread list could not be read: %s)\n",
		       cli_text_fit(r->why, 0, name, sizeof(name)));
	else if (running < 0)
		printf("(which threads are paused could not be read)\n");
	free(r);
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

/* The target listens on TCP now: where its token is (security.md: the
 * command that opens a listener says so).  A config that cannot be read
 * is said, not an error: the pause is done. */
static void say_token(struct cmd_ctx *ctx)
{
	struct dap_message *resp = NULL;

	printf("\n");
	if (cli_request(ctx, "probing/config", cJSON_CreateObject(),
			ctx->timeout_ms, &resp) == CLI_OK &&
	    resp->success)
		cli_target_say_token(resp->body);
	else
		printf("token: (where it is could not be read: `probing -t "
		       "PID config` shows server.token)\n");
	if (resp)
		dap_message_free(resp);
}

static int do_pause(struct cmd_ctx *ctx, const struct debug_opts *o)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *addr;
	char address[DEBUG_ADDRESS_MAX] = "";
	long long pid, tid = 0;
	int rc;

	cJSON_AddStringToObject(args, "action", "pause");
	cJSON_AddNumberToObject(args, "waitMs", o->wait_s * 1000.0);
	if (o->address)
		cJSON_AddStringToObject(args, "address", o->address);
	/* The first thread can stop before the response comes. */
	dap_client_on_event(ctx->client, on_event, &tid);
	rc = cli_request(ctx, "probing/debug", args, ctx->timeout_ms, &resp);
	if (rc == CLI_OK && !resp->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
		dap_message_free(resp);
	}
	if (rc != CLI_OK) {
		dap_client_on_event(ctx->client, NULL, NULL);
		return rc;
	}
	pid = num(resp->body, "pid");
	addr = cJSON_GetObjectItemCaseSensitive(resp->body, "address");
	if (cJSON_IsString(addr))
		snprintf(address, sizeof(address), "%s", addr->valuestring);
	dap_message_free(resp);
	report_pause(ctx, &tid);
	dap_client_on_event(ctx->client, NULL, NULL);
	print_config(pid, address[0] ? address : NULL);
	if (address[0])
		say_token(ctx);
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
		{"native", no_argument, NULL, 'N'},
		{"pause", no_argument, NULL, 'p'},
		{"resume", no_argument, NULL, 'r'},
		{"address", required_argument, NULL, 'a'},
		{"wait", required_argument, NULL, 'w'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	struct debug_opts o = {.what = SHOW, .wait_s = DEBUG_WAIT_DEFAULT};
	int c, n = 0, rc, native = 0;
	int w;

	while ((c = getopt_long(argc, argv, ":a:w:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.what = DUMP;
			n++;
			break;
		case 'N':
			native = 1;
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
			if (cli_parse_duration(optarg, 1000, &w) < 0 ||
			    w < 1000 || w > DEBUG_WAIT_MAX * 1000)
				return cli_usage_error(&cmd_debug_entry,
						       "--wait must be 1s to "
						       "%ds (a bare number: "
						       "seconds)",
						       DEBUG_WAIT_MAX);
			o.wait_s = w / 1000;
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
	if (cli_args_done(&cmd_debug_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (n > 1)
		return cli_usage_error(&cmd_debug_entry,
				       "--dump, --pause and "
				       "--resume go one at a time");
	if ((o.address || o.wait_s != DEBUG_WAIT_DEFAULT) && o.what != PAUSE)
		return cli_usage_error(&cmd_debug_entry,
				       "--address and --wait go with --pause");
	if (native && o.what != DUMP)
		return cli_usage_error(&cmd_debug_entry,
				       "--native goes with --dump");
	if (o.what == DUMP) {
		char *bt[] = {"backtrace", "--locals", "--native", NULL};

		optind = 1;
		return cmd_backtrace_entry.exec(ctx, native ? 3 : 2, bt);
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
	.alias = "d dbg",
	.usage = "[--dump [--native] | --pause [--address HOST:PORT] "
		 "[--wait S] | --resume]",
	.summary = "The debugger: state, stack dump, pause for an editor",
	.help = "Without options: whether a debugger is attached, which "
		"threads are paused,\n"
		"whether the frame-evaluation hook is installed.\n"
		"\n"
		"      --dump           every thread's stack with its locals "
		"(as\n"
		"                       backtrace --locals)\n"
		"      --native         with --dump: the C/C++ frames too (as "
		"backtrace\n"
		"                       --locals --native)\n"
		"      --pause          pause every thread at its next Python "
		"line and keep\n"
		"                       the target paused for an editor to "
		"attach; prints\n"
		"                       which threads stopped (where) and "
		"which still run\n"
		"                       in C (they stop when they return to "
		"Python), and\n"
		"                       the launch configuration.  Waits at "
		"most 5 s for\n"
		"                       the first thread to stop, 1 s for the "
		"others\n"
		"  -a, --address HOST:PORT  with --pause: also listen on this "
		"TCP address\n"
		"                       (loopback), print a host/port "
		"configuration and where\n"
		"                       the token clients need is "
		"(docs/security.md)\n"
		"  -w, --wait D         with --pause: resume by itself after D "
		"(30s, 5m; a bare\n"
		"                       number: seconds) when no debugger "
		"attached (default 5m)\n"
		"      --resume         let a paused target go (the attached "
		"editor, if\n"
		"                       any, is told)\n"
		"  -f, --format FORMAT  table or json (the state)\n",
	.flags = CMD_TARGET,
	.exec = cmd_debug_exec,
};
