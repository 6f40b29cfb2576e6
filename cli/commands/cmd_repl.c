/*
 * cmd_repl: an interactive Python prompt running in the target.
 *
 * Each statement (a line, or a block) goes to the agent as one `evaluate`
 * with context "repl".  Continuation is decided here (pysource), as in
 * Python's REPL: ">>> " starts a statement, "... " continues it, an empty
 * line ends a block.  On a terminal, libedit edits lines and keeps the
 * history in ~/.probing_history; otherwise lines are read plainly and no
 * prompt is shown, so the REPL can be fed from a pipe.
 *
 * Ctrl-C: SIGINT only sets cli_sigint.  While a statement runs,
 * cli_request_cancellable turns it into DAP `cancel`; at the prompt the
 * libedit getc hook turns it into an accepted line that is thrown away.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cmd.h"
#include "pysource.h"

#define REPL_BLOCK_MAX (1u << 20) /* bytes of one statement */
#define REPL_HISTORY_MAX 1000	  /* lines kept in the history file */
#define REPL_SIGINT_MAX 2 /* Ctrl-Cs before giving up on a statement */

struct repl {
	struct cmd_ctx *ctx;
	int tty;
	char *buf; /* the pending statement, lines joined by '\n' */
	size_t len, cap;
	int failed; /* a statement raised */
	char history[PATH_MAX];
};

/* Set by repl_getc when Ctrl-C ended the line being edited. */
static int repl_interrupted;

/*
 * libedit's character source.  Waits with poll() so that SIGINT (which
 * interrupts poll even under SA_RESTART) is seen at once; on Ctrl-C it
 * returns a newline, which makes readline() return, and flags the line as
 * interrupted.
 *
 * NUL bytes are dropped: a ^D typed in the instant between the prompt and
 * libedit's switch to raw mode is stored by the cooked line discipline as
 * a NUL, which raw mode then hands over; libedit would put it in the line,
 * and every later ^D would be taken as "delete" on a non-empty line.
 */
static int repl_getc(FILE *f)
{
	unsigned char ch;

	for (;;) {
		struct pollfd p = {.fd = fileno(f), .events = POLLIN};
		ssize_t n;

		if (cli_sigint) {
			cli_sigint = 0;
			repl_interrupted = 1;
			return '\n';
		}
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return EOF;
		}
		n = read(fileno(f), &ch, 1);
		if (n == 1 && ch == '\0')
			continue; /* see above */
		if (n == 1)
			return ch;
		if (n < 0 && errno == EINTR)
			continue;
		return EOF;
	}
}

/* Reads a line without its newline (caller frees), or NULL at the end of
 * input.  *interrupted tells a Ctrl-C. */
static char *read_line(struct repl *r, const char *prompt, int *interrupted)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	*interrupted = 0;
	if (r->tty) {
		repl_interrupted = 0;
		line = readline(prompt);
		if (repl_interrupted) {
			*interrupted = 1;
			free(line);
			return NULL;
		}
		return line;
	}
	errno = 0;
	n = getline(&line, &cap, stdin);
	if (n < 0) {
		*interrupted = errno == EINTR && cli_sigint;
		free(line);
		return NULL;
	}
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	return line;
}

/* Runs the pending statement and empties it.  Returns CLI_OK, or an exit
 * code when the agent is lost. */
static int flush(struct repl *r)
{
	struct cmd_ctx *ctx = r->ctx;
	struct dap_message *resp = NULL;
	int rc, wait = -1;
	cJSON *args;

	if (r->len == 0)
		return CLI_OK;
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "expression", r->buf);
	cJSON_AddStringToObject(args, "context", "repl");
	r->len = 0;
	r->buf[0] = '\0';
	/* On a terminal a statement may run as long as it likes (Ctrl-C is
	 * there); from a pipe, or with --timeout, it is bounded. */
	if (ctx->timeout_given || !r->tty) {
		cJSON_AddNumberToObject(args, "timeoutMs", ctx->timeout_ms);
		wait = ctx->timeout_ms + CLI_EVAL_GRACE_MS;
	}
	rc = cli_request_cancellable(ctx, "evaluate", args, wait,
				     REPL_SIGINT_MAX, &resp);
	if (rc == CLI_OK && cli_evaluate_show(resp) != CLI_OK)
		r->failed = 1;
	if (resp)
		dap_message_free(resp);
	if (rc == CLI_EINTR) {
		r->failed = 1;
		return CLI_OK;
	}
	return rc;
}

static int append(struct repl *r, const char *line)
{
	size_t n = strlen(line);

	if (r->len + n + 2 > REPL_BLOCK_MAX) {
		r->len = 0;
		r->buf[0] = '\0';
		r->failed = 1;
		cli_error(CLI_EFAIL, "statement over %u bytes: dropped",
			  REPL_BLOCK_MAX);
		return -1;
	}
	if (r->len + n + 2 > r->cap) {
		size_t cap = (r->len + n + 2) * 2;
		char *nb = realloc(r->buf, cap);
		if (!nb)
			return -1;
		r->buf = nb;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, line, n);
	r->len += n;
	r->buf[r->len++] = '\n';
	r->buf[r->len] = '\0';
	return 0;
}

static int blank(const char *s)
{
	return s[strspn(s, " \t\f\r")] == '\0';
}

/* Whether the last line of the pending statement opens a block (ends in
 * ':' or is a decorator), so that what follows must be its body. */
static int last_opens(const struct repl *r)
{
	size_t i = r->len ? r->len - 1 : 0; /* the final '\n' */

	while (i > 0 && r->buf[i - 1] != '\n')
		i--;
	return cli_pysource_opens(r->buf + i);
}

/* Takes one input line.  Returns CLI_OK or a fatal exit code. */
static int feed(struct repl *r, const char *line)
{
	enum cli_pysource_state st;

	if (r->len == 0) {
		if (blank(line))
			return CLI_OK;
		if (append(r, line) < 0)
			return CLI_OK;
		if (cli_pysource_scan(r->buf) == CLI_PY_COMPLETE)
			return flush(r);
		return CLI_OK;
	}
	st = cli_pysource_scan(r->buf);
	if (st == CLI_PY_BLOCK && blank(line))
		return flush(r);
	if (st == CLI_PY_BLOCK && !cli_pysource_continues(line) &&
	    !last_opens(r)) {
		/* A new statement after a block's body without the empty
		 * line (pasted code, a pipe): run the block first.  Python's
		 * REPL would call it a syntax error. */
		int rc = flush(r);
		return rc != CLI_OK ? rc : feed(r, line);
	}
	if (append(r, line) < 0)
		return CLI_OK;
	if (cli_pysource_scan(r->buf) == CLI_PY_COMPLETE)
		return flush(r);
	return CLI_OK;
}

static void banner(struct repl *r)
{
	const cJSON *p =
		cJSON_GetObjectItemCaseSensitive(r->ctx->init_body, "probing");
	const cJSON *py = cJSON_GetObjectItemCaseSensitive(p, "python");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(p, "pid");
	const cJSON *exe = cJSON_GetObjectItemCaseSensitive(p, "executable");

	/* sys.version's first word: "3.11.7 (main, ...) [GCC ...]". */
	printf("Python %.*s in process %lld (%s)\n",
	       cJSON_IsString(py) ? (int)strcspn(py->valuestring, " ") : 1,
	       cJSON_IsString(py) ? py->valuestring : "?",
	       cJSON_IsNumber(pid) ? (long long)pid->valuedouble : -1LL,
	       cJSON_IsString(exe) ? exe->valuestring : "?");
	printf("Code runs in the target's __main__.  Ctrl-C interrupts, "
	       "Ctrl-D leaves.\n");
}

static void history_open(struct repl *r)
{
	const char *home = getenv("HOME");

	using_history();
	stifle_history(REPL_HISTORY_MAX);
	if (!home || !*home ||
	    snprintf(r->history, sizeof(r->history), "%s/.probing_history",
		     home) >= (int)sizeof(r->history)) {
		r->history[0] = '\0';
		return;
	}
	read_history(r->history);
}

static void history_close(struct repl *r)
{
	if (!r->history[0])
		return;
	/* Lines typed into a process may hold secrets: owner only. */
	if (write_history(r->history) == 0)
		chmod(r->history, 0600);
}

static int cmd_repl_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	struct repl r = {.ctx = ctx, .tty = isatty(0)};
	int rc = CLI_OK;

	(void)argv;
	if (argc > 1)
		return cli_usage_error(&cmd_repl_entry,
				       "repl takes no arguments");
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	cli_sigint_catch();
	if (r.tty) {
		rl_catch_signals = 0;
		rl_getc_function = repl_getc;
		history_open(&r);
		banner(&r);
	}
	for (;;) {
		int interrupted;
		char *line =
			read_line(&r, r.len ? "... " : ">>> ", &interrupted);

		if (interrupted) {
			r.len = 0;
			if (!r.tty) {
				rc = CLI_EINTR;
				break;
			}
			printf("KeyboardInterrupt\n");
			continue;
		}
		if (!line) {
			if (r.tty)
				putchar('\n');
			else
				rc = flush(&r);
			break;
		}
		if (r.tty && !blank(line))
			add_history(line);
		rc = feed(&r, line);
		free(line);
		if (rc != CLI_OK)
			break;
	}
	if (r.tty)
		history_close(&r);
	free(r.buf);
	if (rc == CLI_OK && r.failed && !r.tty)
		rc = CLI_EFAIL;
	return rc;
}

const struct cmd_entry cmd_repl_entry = {
	.name = "repl",
	.alias = NULL,
	.usage = "",
	.summary = "An interactive Python prompt running inside the target",
	.help = "Each statement runs in the target's __main__ namespace, as "
		"with eval.\n"
		"\">>> \" starts a statement and \"... \" continues it: inside "
		"brackets or a\n"
		"triple-quoted string, after a trailing backslash, and in a "
		"block (a line\n"
		"ending in ':', or starting with if, for, while, try, with, "
		"def, class,\n"
		"async or a decorator).  An empty line ends a block, as in "
		"Python; so\n"
		"does an unindented line after the block's body (pasted "
		"code).  Line\n"
		"editing and history (~/.probing_history, the last 1000 "
		"lines) come from\n"
		"libedit.\n"
		"\n"
		"Ctrl-C while a statement runs interrupts it in the target "
		"(a\n"
		"KeyboardInterrupt there); one blocked in C (a sleep, a lock) "
		"is given up\n"
		"on 2 s later and runs on in the target.  A second Ctrl-C "
		"stops waiting at\n"
		"once.  What was typed meanwhile runs next.  Ctrl-C at the "
		"prompt drops\n"
		"the line.  Ctrl-D leaves; the target keeps running.\n"
		"\n"
		"When stdin is not a terminal, lines are read as they come, "
		"without\n"
		"prompts, with the same block rules; each statement is "
		"bounded by\n"
		"--timeout, and the exit code is 1 when any of them raised:\n"
		"  echo 'print(1)' | probing -t 1234 repl\n"
		"On a terminal statements are bounded only when --timeout is "
		"given.\n",
	.flags = CMD_TARGET | CMD_NOTABLE,
	.exec = cmd_repl_exec,
};
