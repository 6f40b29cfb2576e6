/*
 * cmd_backtrace: every thread's Python stack now (probing/backtrace),
 * without pausing the target.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

#define BT_THREADS_MAX 64 /* --thread given at most */
#define BT_VALUE_COLS_MIN                                                      \
	20 /* columns of a local's value on a TTY, at least                    \
	    */
#define BT_TEXT_BUF 4096
#define BT_NAME_BUF 1024 /* a name shown, escaped (cut with "…" past it) */

struct bt_opts {
	int locals;
	int nthreads;
	long long threads[BT_THREADS_MAX];
	enum cli_format fmt;
};

static int parse_id(const char *text, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(text, &end, 10);
	return errno || end == text || *end || *out <= 0 ? -1 : 0;
}

static cJSON *bt_args(const struct bt_opts *o, int filter)
{
	cJSON *args = cJSON_CreateObject();

	cJSON_AddBoolToObject(args, "locals", o->locals);
	if (filter && o->nthreads) {
		cJSON *ids = cJSON_AddArrayToObject(args, "threads");
		for (int i = 0; i < o->nthreads; i++)
			cJSON_AddItemToArray(
				ids, cJSON_CreateNumber((double)o->threads[i]));
	}
	return args;
}

static long long num_field(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

static const char *str_field(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int true_field(const cJSON *obj, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

/* Whether thread th is one the user asked for (by Python ident or kernel
 * id); every thread when none was named. */
static int wanted(const struct bt_opts *o, const cJSON *th)
{
	long long id = num_field(th, "threadId");
	long long nid = num_field(th, "nativeId");

	if (!o->nthreads)
		return 1;
	for (int i = 0; i < o->nthreads; i++)
		if (o->threads[i] == id || o->threads[i] == nid)
			return 1;
	return 0;
}

static int count_wanted(const struct bt_opts *o, const cJSON *body)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(body, "threads");
	const cJSON *th;
	int n = 0;

	cJSON_ArrayForEach(th, threads) n += wanted(o, th);
	return n;
}

/* Locals asked for and not given: why (the reprs found no place, or
 * did not end), so --locals never shows none without a word. */
static void locals_warning(const cJSON *body)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(body, "localsError");
	char safe[512];

	if (!cJSON_IsString(e))
		return;
	fflush(stdout);
	fprintf(stderr, "probing: warning: no locals: %s\n",
		cli_text_fit(e->valuestring, 0, safe, sizeof(safe)));
}

static void gil_warning(const cJSON *body)
{
	const cJSON *gil = cJSON_GetObjectItemCaseSensitive(body, "gil");
	const cJSON *holder, *nid;
	char who[128] = "another thread";

	if (!cJSON_IsObject(gil) ||
	    !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(gil, "acquired")))
		return;
	holder = cJSON_GetObjectItemCaseSensitive(gil, "holder");
	nid = cJSON_GetObjectItemCaseSensitive(gil, "holderNativeId");
	char safe[96];
	const cJSON *call = cJSON_GetObjectItemCaseSensitive(gil, "holderCall");

	/* The agent's own call holds it: never one of the program's
	 * threads named for it. */
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gil,
							   "holderIsAgent")))
		snprintf(who, sizeof(who), "the agent's own call (%s)",
			 cJSON_IsString(call)
				 ? cli_text_fit(call->valuestring, 0, safe,
						sizeof(safe))
				 : "another request");
	else

	/* The holder's name is the program's: escaped (cli_text_fit). */
	if (cJSON_IsNumber(nid)) {
		char *h = cli_json_text(holder);
		if (h && cJSON_IsString(holder))
			snprintf(who, sizeof(who), "thread %lld \"%s\"",
				 (long long)nid->valuedouble,
				 cli_text_fit(h, 0, safe, sizeof(safe)));
		else
			snprintf(who, sizeof(who), "thread %lld",
				 (long long)nid->valuedouble);
		free(h);
	} else if (holder && !cJSON_IsNull(holder)) {
		char *h = cli_json_text(holder);
		snprintf(who, sizeof(who), "thread %s",
			 cli_text_fit(h ? h : "?", 0, safe, sizeof(safe)));
		free(h);
	}
	fflush(stdout);
	fprintf(stderr,
		"probing: warning: the GIL is held by %s; stacks were read "
		"without it (no locals)\n",
		who);
}

/* "        name = line1" and the other lines of value indented under
 * line1; each line's control characters escaped (cli_text_fit). */
static void print_lines(const char *name, const char *value, char *buf,
			size_t buflen)
{
	int indent = 8 + (int)strlen(name) + 3;
	const char *line = value;

	for (int first = 1; first || *line; first = 0) {
		size_t n = strcspn(line, "\n");
		char *one = strndup(line, n);

		cli_text_fit(one ? one : "", 0, buf, buflen);
		free(one);
		if (first)
			printf("        %s = %s\n", name, buf);
		else
			printf("%*s%s\n", indent, "", buf);
		line += n;
		if (*line == '\n')
			line++;
	}
}

static void print_locals(const cJSON *frame, int tty)
{
	const cJSON *locals = cJSON_GetObjectItemCaseSensitive(frame, "locals");
	const cJSON *l;
	char buf[BT_TEXT_BUF];

	cJSON_ArrayForEach(l, locals)
	{
		const char *name = str_field(l, "name");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(l, "value");
		char *value = cli_json_text(v);

		size_t cols = 0;

		char safe[BT_NAME_BUF];

		/* The name is the program's too (a module's globals). */
		name = cli_text_fit(name ? name : "?", 0, safe, sizeof(safe));
		if (tty) {
			/* One line each on a terminal. */
			int w = cli_term_width() - 12 - (int)strlen(name);
			cols = w < BT_VALUE_COLS_MIN ? BT_VALUE_COLS_MIN : w;
			cli_text_fit(value ? value : "?", cols, buf,
				     sizeof(buf));
			printf("        %s = %s\n", name, buf);
		} else {
			/* Elsewhere (a file, an editor) a repr of several
			 * lines (a module, a tensor) keeps them, each under
			 * the first. */
			print_lines(name, value ? value : "?", buf,
				    sizeof(buf));
		}
		free(value);
	}
}

static void print_thread(const cJSON *th, int locals, int tty)
{
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
	const cJSON *fr;
	const char *name = str_field(th, "name");
	const char *state = str_field(th, "state");
	long long id = num_field(th, "nativeId");
	char attrs[128] = "", buf[BT_NAME_BUF], buf2[BT_NAME_BUF];
	int depth = 0;

	if (id < 0)
		id = num_field(th, "threadId");
	if (true_field(th, "isMain"))
		strcat(attrs, "main, ");
	if (true_field(th, "daemon"))
		strcat(attrs, "daemon, ");
	if (true_field(th, "holdsGil"))
		strcat(attrs, "holds GIL, ");
	if (state && strlen(state) < 64)
		strcat(attrs, state);
	else if (*attrs)
		attrs[strlen(attrs) - 2] = '\0';
	/* Names of threads, functions and files are the program's: their
	 * control characters are escaped, never sent to the terminal. */
	printf("Thread %lld \"%s\"%s%s%s\n", id,
	       cli_text_fit(name ? name : "?", 0, buf, sizeof(buf)),
	       *attrs ? " (" : "", cli_text_fit(attrs, 0, buf2, sizeof(buf2)),
	       *attrs ? ")" : "");
	cJSON_ArrayForEach(fr, frames)
	{
		const char *func = str_field(fr, "func");
		const char *file = str_field(fr, "file");
		long long line = num_field(fr, "line");

		printf("  #%-2d %s (%s:%lld)\n", depth++,
		       cli_text_fit(func ? func : "?", 0, buf, sizeof(buf)),
		       cli_text_fit(file ? file : "?", 0, buf2, sizeof(buf2)),
		       line);
		if (locals)
			print_locals(fr, tty);
	}
	if (depth == 0)
		printf("  (no Python frames)\n");
	if (true_field(th, "truncated"))
		printf("  ... (more frames not shown)\n");
}

static int print_body(const struct bt_opts *o, const cJSON *body)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(body, "threads");
	const cJSON *th;
	int tty = cli_isatty(stdout), n = 0;

	if (o->fmt == CLI_FORMAT_JSON) {
		char *text = cJSON_Print(body);
		if (!text)
			return cli_error(CLI_EFAIL, "out of memory");
		printf("%s\n", text);
		free(text);
		gil_warning(body);
		return CLI_OK;
	}
	gil_warning(body);
	locals_warning(body);
	cJSON_ArrayForEach(th, threads)
	{
		if (!wanted(o, th))
			continue;
		if (n++)
			putchar('\n');
		print_thread(th, o->locals, tty);
	}
	if (n == 0 && !o->nthreads)
		printf("(no Python threads)\n");
	return CLI_OK;
}

static int request(struct cmd_ctx *ctx, const struct bt_opts *o, int filter,
		   struct dap_message **resp)
{
	int rc = cli_request(ctx, "probing/backtrace", bt_args(o, filter),
			     ctx->timeout_ms, resp);

	if (rc != CLI_OK)
		return rc;
	if (!(*resp)->success)
		return CLI_EFAIL;
	if (!cJSON_IsObject((*resp)->body))
		return cli_error(CLI_EFAIL, "probing/backtrace: no body");
	return CLI_OK;
}

static int cmd_backtrace_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"locals", no_argument, NULL, 'l'},
		{"thread", required_argument, NULL, 'T'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	struct bt_opts o = {.fmt = ctx->format};
	struct dap_message *resp = NULL;
	int c, rc;

	while ((c = getopt_long(argc, argv, ":lT:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.locals = 1;
			break;
		case 'T':
			if (o.nthreads == BT_THREADS_MAX)
				return cli_usage_error(&cmd_backtrace_entry,
						       "too many --thread");
			if (parse_id(optarg, &o.threads[o.nthreads++]))
				return cli_usage_error(
					&cmd_backtrace_entry,
					"--thread takes a thread id, not '%s'",
					optarg);
			break;
		case 'f':
			if (cli_format_parse(optarg, &o.fmt))
				return CLI_EUSAGE;
			if (o.fmt == CLI_FORMAT_CSV)
				return cli_usage_error(&cmd_backtrace_entry,
						       "backtrace prints text "
						       "or json, not csv");
			break;
		default:
			return cli_option_error(&cmd_backtrace_entry, c, argc,
						argv);
		}
	}
	if (cli_args_done(&cmd_backtrace_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (o.fmt == CLI_FORMAT_CSV)
		o.fmt = CLI_FORMAT_TABLE;
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	rc = request(ctx, &o, 1, &resp);
	/* --thread may name a kernel id, which the agent's filter (Python
	 * idents) does not know: ask for every thread and pick here. */
	if (o.nthreads && (rc == CLI_EFAIL ||
			   (rc == CLI_OK && !count_wanted(&o, resp->body)))) {
		if (resp)
			dap_message_free(resp);
		resp = NULL;
		rc = request(ctx, &o, 0, &resp);
	}
	if (rc == CLI_EFAIL && resp && !resp->success)
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	else if (rc == CLI_OK && o.nthreads && !count_wanted(&o, resp->body))
		rc = cli_error(CLI_EFAIL, "no such thread: %lld%s",
			       o.threads[0],
			       o.nthreads > 1 ? " (nor the others)" : "");
	else if (rc == CLI_OK)
		rc = print_body(&o, resp->body);
	if (resp)
		dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_backtrace_entry = {
	.name = "backtrace",
	.alias = "bt dump",
	.usage = "[--locals] [--thread ID]... [-f json]",
	.summary = "Show every thread's Python stack, innermost frame first",
	.help = "Reads the stacks now, without pausing the target.  Each "
		"thread is shown as\n"
		"  Thread 4242 \"MainThread\" (main, running)\n"
		"    #0  train (/app/train.py:12)\n"
		"with the kernel thread id.  When the agent could not take the "
		"GIL in time\n"
		"(a thread holds it in C code), the stacks are read without "
		"it, without\n"
		"locals, and a warning on stderr names the thread holding "
		"it.\n"
		"\n"
		"Options:\n"
		"  -l, --locals         show each frame's local variables "
		"(name = repr)\n"
		"  -T, --thread ID      only this thread (kernel id or Python "
		"ident);\n"
		"                       may be repeated\n"
		"  -f, --format json    print the agent's reply as JSON\n",
	.flags = CMD_TARGET,
	.exec = cmd_backtrace_exec,
};
