/*
 * cmd: the helpers every subcommand shares; see cmd.h.
 */
#include "cmd.h"
#include "dap_frame.h"

#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorded.h"
#include "target.h"
#include "units.h"

#define DISCONNECT_WAIT_MS 2000

void cli_put_lines(FILE *f, const char *s)
{
	size_t len = strlen(s);
	/* A line, and its escaped form: at most 4 bytes for each byte. */
	char *line = malloc(len + 1), *out = malloc(4 * len + 1);

	if (!line || !out) {
		fputs("(text not shown: out of memory)\n", f);
		goto done;
	}
	while (*s) {
		size_t n = strcspn(s, "\n");

		memcpy(line, s, n);
		line[n] = '\0';
		fputs(cli_text_fit(line, 0, out, 4 * len + 1), f);
		fputc('\n', f);
		s += n;
		if (*s == '\n')
			s++;
	}
done:
	free(line);
	free(out);
}

int cli_error(int code, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	int n;

	fflush(stdout);
	fputs("probing: ", stderr);
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	/* Messages quote the agent, which quotes the target (a function's
	 * name, an exception's text): escaped, never sent to the terminal
	 * as they are. */
	if (n < 0)
		fputs("(message not shown: out of memory)\n", stderr);
	else
		cli_put_lines(stderr, n ? msg : "\n");
	free(msg);
	return code;
}

static void usage_line(FILE *f, const struct cmd_entry *e)
{
	fprintf(f, "usage: probing %s%s%s%s\n",
		e->flags & CMD_TARGET ? "[-t TARGET] " : "", e->name,
		e->usage && *e->usage ? " " : "", e->usage ? e->usage : "");
}

int cli_usage_error(const struct cmd_entry *e, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("probing: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage_line(stderr, e);
	fprintf(stderr, "Try 'probing %s --help'.\n", e->name);
	return CLI_EUSAGE;
}

int cli_args_done(const struct cmd_entry *e, int argc, char **argv)
{
	if (optind < argc)
		return cli_usage_error(e, "unexpected argument '%s'",
				       argv[optind]);
	return CLI_OK;
}

const char *cli_hint_target;

/* The original Probing's short options that mean something else here
 * (one meaning per short option): the long option each stands for, in
 * its command. */
static const struct {
	const char *command;
	char opt;
	const char *is;
	int value; /* takes one: -lADDR as -l ADDR */
} originals[] = {
	{"inject", 'l', "--listen", 1},
	{"debug", 'p', "--pause", 0},
	{"debug", 'r', "--resume", 0},
};

/* The original's long option for -opt of command, or NULL. */
static int original_of(const char *command, char opt)
{
	for (size_t i = 0; i < sizeof(originals) / sizeof(originals[0]); i++)
		if (!strcmp(command, originals[i].command) &&
		    originals[i].opt == opt)
			return (int)i;
	return -1;
}

/* Appends word to line (at, cap), quoted for a shell when it needs it. */
static void add_word(char *line, size_t *at, size_t cap, const char *w)
{
	int plain = *w != '\0';

	for (const char *p = w; *p && plain; p++)
		plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			       "0123456789-_.,:/@=+%", *p) != NULL;
	if (*at >= cap)
		return;
	if (plain) {
		*at += (size_t)snprintf(line + *at, cap - *at, " %s", w);
		return;
	}
	*at += (size_t)snprintf(line + *at, cap - *at, " '");
	for (const char *p = w; *p && *at < cap; p++)
		*at += (size_t)snprintf(line + *at, cap - *at,
					*p == '\'' ? "'\\''" : "%c", *p);
	if (*at < cap)
		*at += (size_t)snprintf(line + *at, cap - *at, "'");
}

/* An unknown -X of command e that the original had: says the exact
 * command here (argv with each such option spelled out, bundled -pr and
 * attached -lADDR too).  1 when said. */
static int original_hint(const struct cmd_entry *e, int argc, char **argv)
{
	char line[1024], flag[3] = "-?";
	size_t at = 0;

	if (original_of(e->name, (char)optopt) < 0)
		return 0;
	at = (size_t)snprintf(line, sizeof(line), "%s", e->name);
	for (int a = 1; a < argc && at < sizeof(line); a++) {
		const char *w = argv[a];
		int k;

		if (w[0] != '-' || w[1] == '-' || !w[1] ||
		    original_of(e->name, w[1]) < 0) {
			add_word(line, &at, sizeof(line), w);
			continue;
		}
		/* -X..., X the original's: each letter of the bundle. */
		for (const char *p = w + 1; *p; p++) {
			k = original_of(e->name, *p);
			if (k < 0) {
				flag[1] = *p;
				add_word(line, &at, sizeof(line), flag);
				continue;
			}
			add_word(line, &at, sizeof(line), originals[k].is);
			if (originals[k].value && p[1]) {
				add_word(line, &at, sizeof(line), p + 1);
				break;
			}
		}
	}
	cli_error(CLI_EUSAGE,
		  "-%c is not %s's here (a short option has one meaning "
		  "across the commands); the original's words are, here: "
		  "probing -t %s %s",
		  optopt, e->name, cli_hint_target ? cli_hint_target : "TARGET",
		  line);
	return 1;
}

int cli_option_error(const struct cmd_entry *e, int c, int argc, char **argv)
{
	const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
	char opt[64];
	size_t n;

	if (optopt == 0 || (c == ':' && !strncmp(arg, "--", 2))) {
		/* A long option: as typed, without "=value". */
		n = strcspn(arg, "=");
		snprintf(opt, sizeof(opt), "%.*s", (int)(n < 60 ? n : 60), arg);
	} else {
		snprintf(opt, sizeof(opt), "-%c", optopt);
	}
	if (!e) {
		cli_error(CLI_EUSAGE, "%s '%s'",
			  c == ':' ? "missing value for option"
				   : "unknown option",
			  opt);
		fprintf(stderr, "Try 'probing --help'.\n");
		return CLI_EUSAGE;
	}
	if (c != ':' && optopt && original_hint(e, argc, argv))
		return CLI_EUSAGE;
	return cli_usage_error(
		e, "%s '%s'",
		c == ':' ? "missing value for option" : "unknown option", opt);
}

void cli_help_print(const struct cmd_entry *e)
{
	usage_line(stdout, e);
	if (e->alias)
		printf("       (also named: %s)\n", e->alias);
	printf("\n%s.\n", e->summary);
	if (e->help && *e->help)
		printf("\n%s", e->help);
	if (e->flags & CMD_TARGET)
		printf("\nTARGET (-t or $PROBING_TARGET) is a pid, HOST:PORT, "
		       "@name or a socket path.\nSee 'probing --help' for "
		       "the global options and the exit codes.\n");
}

int cli_format_parse(const char *text, enum cli_format *out)
{
	if (!strcmp(text, "table"))
		*out = CLI_FORMAT_TABLE;
	else if (!strcmp(text, "json"))
		*out = CLI_FORMAT_JSON;
	else if (!strcmp(text, "csv"))
		*out = CLI_FORMAT_CSV;
	else
		return cli_error(CLI_EUSAGE,
				 "unknown format '%s' (use table, json or "
				 "csv)",
				 text);
	return 0;
}

int cli_parse_ms(const char *text, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || *end || v <= 0 || v > 86400000L)
		return -1;
	*out = (int)v;
	return 0;
}

int cli_parse_duration(const char *text, int bare_ms, int *ms)
{
	const struct unit units[] = {
		{"ms", 1},	   {"s", 1000},	  {"m", 60000},
		{"min", 60000}, {"h", 3600000}, {"", bare_ms},
	};
	size_t n = sizeof(units) / sizeof(units[0]) - (bare_ms <= 0);
	double v;

	if (units_parse(text, units, n, &v) || v < 1 || v > 86400000)
		return -1;
	*ms = (int)v;
	return 0;
}

int cli_duration_error(const struct cmd_entry *e, const char *opt,
		       const char *text)
{
	char *end;

	(void)strtod(text, &end);
	if (end != text && !*end)
		return cli_usage_error(e,
				       "%s takes a unit: %sms or %ss (a bare "
				       "number was milliseconds here; say "
				       "which)",
				       opt, text, text);
	return cli_usage_error(e, "%s must be " CLI_DURATION_HELP ", not '%s'",
			       opt, text);
}

/* -t names a recording (a process that ended, recorded.h): opened for
 * the commands that read one, a sentence for the others.  -1 when it
 * names none. */
static int connect_recording(struct cmd_ctx *ctx)
{
	char dir[RUNDIR_PATH_MAX], err[512], line[1024];
	struct run_info ri;
	int rc;

	if (recorded_find(ctx->target, dir, sizeof(dir)) != 1)
		return -1;
	if (!(ctx->entry->flags & CMD_RECORDED)) {
		if (recorded_info(dir, &ri) == 0)
			recorded_describe(&ri, line, sizeof(line));
		else
			snprintf(line, sizeof(line), "%s is a recording",
				 ctx->target);
		return cli_error(CLI_ENOPROC,
				 "%s needs a running process: %s; its "
				 "recording %s is read by query, hangs, "
				 "flamegraph and memory",
				 ctx->entry->name, line, dir);
	}
	rc = recorded_open(dir, &ctx->rec, err, sizeof(err));
	if (rc)
		return cli_error(CLI_EFAIL, "cannot read the recording %s: %s",
				 dir, err);
	recorded_describe(recorded_run(ctx->rec), line, sizeof(line));
	fprintf(stderr, "probing: %s: reading its recording %s\n", line, dir);
	return CLI_OK;
}

int cli_need_target(struct cmd_ctx *ctx)
{
	if (ctx->target)
		return CLI_OK;
	return cli_usage_error(
		ctx->entry,
		"no target: give -t PID (or -t HOST:PORT), or set "
		"PROBING_TARGET; 'probing list' shows the agents on this "
		"machine");
}

int cli_connect(struct cmd_ctx *ctx, int send_init)
{
	char err[512];
	int rc;

	if ((rc = cli_need_target(ctx)) != CLI_OK)
		return rc;
	rc = connect_recording(ctx);
	if (rc != -1)
		return rc;
	rc = cli_target_open(ctx->target, ctx->timeout_ms, &ctx->client,
			     send_init ? &ctx->init_body : NULL, err,
			     sizeof(err));
	if (rc == CLI_ENOAGENT &&
	    strspn(ctx->target, "0123456789") == strlen(ctx->target)) {
		char run[160];

		/* The pid is another process's now: an earlier one's
		 * recording may be what was meant. */
		if (recorded_earlier(atoi(ctx->target), run, sizeof(run)))
			return cli_error(rc,
					 "%s\nprobing: an earlier process %s "
					 "left a recording: probing -t %s ...",
					 err, ctx->target, run);
	}
	if (rc != CLI_OK)
		return cli_error(rc, "%s", err);
	return CLI_OK;
}

/* A request to a recording: answered from its files (args taken). */
static int request_recording(struct cmd_ctx *ctx, const char *command,
			     cJSON *args, struct dap_message **resp)
{
	int rc = recorded_request(ctx->rec, command, args, resp);

	cJSON_Delete(args);
	if (rc == -ENOTSUP)
		return cli_error(CLI_EFAIL,
				 "a recording has no answer to %s: "
				 "it needs the running process",
				 command);
	if (rc)
		return cli_error(CLI_EFAIL, "%s: %s", command, strerror(-rc));
	return CLI_OK;
}

int cli_request(struct cmd_ctx *ctx, const char *command, cJSON *args,
		int timeout_ms, struct dap_message **resp)
{
	char err[512];
	int rc;

	*resp = NULL;
	if (ctx->rec)
		return request_recording(ctx, command, args, resp);
	rc = dap_client_request(ctx->client, command, args, timeout_ms, resp,
				err, sizeof(err));
	if (rc < 0) {
		char why[600];
		rc = cli_target_lost(rc, command, timeout_ms, why, sizeof(why));
		return cli_error(rc, "%s", why);
	}
	return CLI_OK;
}

int cli_request_ok(struct cmd_ctx *ctx, const char *command, cJSON *args,
		   int timeout_ms, struct dap_message **resp)
{
	int rc = cli_request(ctx, command, args, timeout_ms, resp);

	if (rc == CLI_OK && !(*resp)->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(*resp));
		dap_message_free(*resp);
		*resp = NULL;
	}
	return rc;
}

int cli_evaluate_show(const struct dap_message *resp)
{
	const cJSON *body = resp->body;
	const cJSON *out = cJSON_GetObjectItemCaseSensitive(body, "output");
	const cJSON *res = cJSON_GetObjectItemCaseSensitive(body, "result");

	if (cJSON_IsString(out) && *out->valuestring)
		fputs(out->valuestring, stdout);
	if (!resp->success) {
		/* The traceback quotes the target: an exception's text may
		 * be anything. */
		fflush(stdout);
		cli_put_lines(stderr, cli_resp_message(resp));
		return CLI_EFAIL;
	}
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(body, "type");
	/* Like Python's prompt: a value of None is not echoed. */
	int is_none = cJSON_IsString(type) &&
		      strcmp(type->valuestring, "NoneType") == 0;
	/* A repr is the target's text (a __repr__ of its own). */
	if (cJSON_IsString(res) && *res->valuestring && !is_none)
		cli_put_lines(stdout, res->valuestring);
	fflush(stdout);
	return CLI_OK;
}

void cli_close(struct cmd_ctx *ctx)
{
	struct dap_message *resp = NULL;
	int wait = ctx->timeout_ms < DISCONNECT_WAIT_MS ? ctx->timeout_ms
							: DISCONNECT_WAIT_MS;

	if (ctx->client && ctx->init_body) {
		dap_client_request(ctx->client, "disconnect", NULL, wait, &resp,
				   NULL, 0);
		if (resp)
			dap_message_free(resp);
	}
	dap_client_free(ctx->client);
	ctx->client = NULL;
	recorded_free(ctx->rec);
	ctx->rec = NULL;
	cJSON_Delete(ctx->init_body);
	ctx->init_body = NULL;
}

void cli_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL); /* a signal (Ctrl-C) cuts it short */
}

int cli_wait_ms(int ms)
{
	int cut;

	for (int left = ms; left > 0 && !cli_sigint; left -= 100)
		cli_sleep_ms(left < 100 ? left : 100);
	cut = cli_sigint != 0;
	cli_sigint = 0;
	return cut;
}

int cli_config(struct cmd_ctx *ctx, cJSON *set, int lease_ms,
	       struct dap_message **resp)
{
	cJSON *args = cJSON_CreateObject();
	int rc;

	if (set)
		cJSON_AddItemToObject(args, "set", set);
	if (set && lease_ms > 0)
		cJSON_AddNumberToObject(args, "restoreAfterMs", lease_ms);
	rc = cli_request(ctx, "probing/config", args, ctx->timeout_ms, resp);
	if (rc == CLI_OK && !(*resp)->success) {
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(*resp));
		dap_message_free(*resp);
		*resp = NULL;
	}
	return rc;
}

const char *cli_setting(const struct dap_message *resp, const char *name)
{
	const cJSON *s,
		*arr = cJSON_GetObjectItemCaseSensitive(resp->body, "settings");

	cJSON_ArrayForEach(s, arr)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "value");
		if (cJSON_IsString(n) && !strcmp(n->valuestring, name) &&
		    cJSON_IsString(v))
			return v->valuestring;
	}
	return "";
}

const char *cli_resp_message(const struct dap_message *resp)
{
	if (resp->message && *resp->message)
		return resp->message;
	return "the request failed (no reason given)";
}

volatile sig_atomic_t cli_sigint;

static void on_sigint(int sig)
{
	(void)sig;
	cli_sigint = 1;
}

void cli_sigint_catch(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

/* Slices of a wait, so that Ctrl-C is noticed while the client polls (its
 * poll retries on EINTR). */
#define WAIT_SLICE_MS 50

/* Asks the agent to interrupt request seq; its response is not waited
 * for (the client drops it).  Returns 0 or a negative error. */
static int send_cancel(struct cmd_ctx *ctx, int64_t seq)
{
	cJSON *args = cJSON_CreateObject();
	int64_t rc;

	cJSON_AddNumberToObject(args, "requestId", (double)seq);
	rc = dap_client_send(ctx->client, "cancel", args, NULL, 0);
	return rc < 0 ? (int)rc : 0;
}

int cli_request_cancellable(struct cmd_ctx *ctx, const char *command,
			    cJSON *args, int timeout_ms, int max_sigint,
			    struct dap_message **resp)
{
	char err[512], why[600];
	int64_t seq;
	int waited = 0, sigints = 0, rc;

	*resp = NULL;
	if (ctx->rec)
		return request_recording(ctx, command, args, resp);
	cli_sigint = 0;
	seq = dap_client_send(ctx->client, command, args, err, sizeof(err));
	if (seq < 0) {
		rc = cli_target_lost((int)seq, command, timeout_ms, why,
				     sizeof(why));
		return cli_error(rc, "%s", why);
	}
	for (;;) {
		int slice = WAIT_SLICE_MS;

		if (timeout_ms >= 0 && timeout_ms - waited < slice)
			slice = timeout_ms - waited;
		rc = dap_client_wait(ctx->client, seq, slice, resp, err,
				     sizeof(err));
		if (rc == 0)
			return CLI_OK;
		if (rc != DAP_ETIMEDOUT ||
		    (timeout_ms >= 0 && (waited += slice) >= timeout_ms)) {
			if (rc == DAP_ETIMEDOUT)
				send_cancel(ctx,
					    seq); /* do not leave it running */
			rc = cli_target_lost(rc, command, timeout_ms, why,
					     sizeof(why));
			return cli_error(rc, "%s", why);
		}
		if (!cli_sigint)
			continue;
		cli_sigint = 0;
		if (isatty(2))
			fputc('\n', stderr); /* after the terminal's "^C" */
		if (++sigints >= max_sigint)
			return cli_error(CLI_EINTR,
					 "interrupted; stopped waiting for "
					 "%s",
					 command);
		if (send_cancel(ctx, seq) < 0) {
			rc = cli_target_lost(DAP_ECLOSED, command, timeout_ms,
					     why, sizeof(why));
			return cli_error(rc, "%s", why);
		}
	}
}

char *cli_json_text(const cJSON *v)
{
	char buf[64];

	if (!v || cJSON_IsNull(v))
		return NULL;
	if (cJSON_IsString(v))
		return strdup(v->valuestring ? v->valuestring : "");
	if (cJSON_IsBool(v))
		return strdup(cJSON_IsTrue(v) ? "true" : "false");
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;

		if (d > -9e15 && d < 9e15 && d == (double)(long long)d)
			snprintf(buf, sizeof(buf), "%lld", (long long)d);
		else /* the shortest form that reads back the same */
			for (int prec = 15; prec <= 17; prec++) {
				snprintf(buf, sizeof(buf), "%.*g", prec, d);
				if (strtod(buf, NULL) == d)
					break;
			}
		return strdup(buf);
	}
	return cJSON_PrintUnformatted(v);
}
