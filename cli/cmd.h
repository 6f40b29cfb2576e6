/*
 * cmd: the shape of a `probing` subcommand and what all of them share.
 *
 * Each subcommand lives in its own commands/cmd_<name>.c and exports one const
 * struct cmd_entry (tmux's cmd-*.c).  main.c holds the table, parses the
 * global options into a struct cmd_ctx, answers --help, and calls exec.
 *
 * exec gets argv with argv[0] the command's name and getopt reset, so it can
 * parse its own options.  It returns an exit code from enum cli_exit; it has
 * already printed what went wrong (to stderr, prefixed "probing: ").
 *
 * A connected command calls cli_connect() first: that resolves the target,
 * connects, and sends `initialize`.  cli_close() sends `disconnect` and
 * frees the connection; main calls it after exec in any case, so commands
 * may return early.
 *
 * The helpers declared here live in cmd.c (main.c holds only the table
 * and the dispatch).
 */
#ifndef CLI_CMD_H
#define CLI_CMD_H

#include <signal.h>
#include <stdint.h>

#include "dap_client.h"
#include "render/output.h"

/* Exit codes; each is documented in `probing --help` and docs/cli.md. */
enum cli_exit {
	CLI_OK = 0,
	CLI_EFAIL = 1,	   /* the request failed (success:false) */
	CLI_EUSAGE = 2,	   /* bad command line */
	CLI_ENOPROC = 3,   /* no such process */
	CLI_ENOAGENT = 4,  /* the process has no Probing agent */
	CLI_ETIMEOUT = 5,  /* the agent does not answer */
	CLI_EREFUSED = 6,  /* connection refused (TCP or unix path) */
	CLI_ESQL = 7,	   /* probing/query failed: bad SQL */
	CLI_EPERM = 8,	   /* inject: not allowed to ptrace the process */
	CLI_ENOTPY = 9,	   /* inject: an unsupported Python, or not ready */
	CLI_ELOAD = 10,	   /* inject: the library is missing or dlopen failed */
	CLI_EINJECT = 11,  /* inject: the injection itself failed */
	CLI_EAUTH = 12,	   /* the agent refused the token (missing or wrong) */
	CLI_EPARTIAL = 13, /* cluster: some nodes did not answer */
	CLI_EPEER = 14,	   /* the socket is held by another process or user */
	CLI_EINTR = 130,   /* given up on after Ctrl-C */
};

#define CLI_TIMEOUT_DEFAULT 10000 /* ms */

struct cmd_entry;

/* Command flags. */
#define CMD_TARGET 0x1 /* needs -t / $PROBING_TARGET */
#define CMD_NOTABLE 0x2 /* prints no table: the global -f is refused */
#define CMD_RECORDED 0x4 /* also reads a recording (a process that ended) */
#define CMD_PAGED 0x8 /* long output: through a pager on a tty (pager.h) */

struct cmd_ctx {
	const struct cmd_entry *entry; /* the command running */
	const char *target;	   /* -t or $PROBING_TARGET; NULL when none */
	int timeout_ms;		   /* --timeout / $PROBING_TIMEOUT */
	int timeout_given;	   /* the user chose timeout_ms */
	enum cli_format format;	   /* -f; CLI_FORMAT_AUTO when not given */
	struct dap_client *client; /* after cli_connect() */
	cJSON *init_body;	   /* initialize's response body, owned */
	struct recorded *rec;	   /* a recording instead of an agent
				    * (recorded.h): cli_request answers */
};

struct cmd_entry {
	const char *name;
	const char *alias;   /* other names, space-separated; or NULL */
	const char *usage;   /* arguments after the name */
	const char *summary; /* one line for the command list */
	const char *help;    /* options and details, ends with a newline */
	int flags;	     /* CMD_* */
	int (*exec)(struct cmd_ctx *ctx, int argc, char **argv);
};

extern const struct cmd_entry cmd_list_entry;
extern const struct cmd_entry cmd_runs_entry;
extern const struct cmd_entry cmd_backtrace_entry;
extern const struct cmd_entry cmd_eval_entry;
extern const struct cmd_entry cmd_query_entry;
extern const struct cmd_entry cmd_repl_entry;
extern const struct cmd_entry cmd_config_entry;
extern const struct cmd_entry cmd_flamegraph_entry;
extern const struct cmd_entry cmd_perf_entry;
extern const struct cmd_entry cmd_dap_entry;
extern const struct cmd_entry cmd_inject_entry;
extern const struct cmd_entry cmd_launch_entry;
extern const struct cmd_entry cmd_debug_entry;
extern const struct cmd_entry cmd_memory_entry;
extern const struct cmd_entry cmd_hangs_entry;
extern const struct cmd_entry cmd_report_entry;
extern const struct cmd_entry cmd_cluster_entry;
extern const struct cmd_entry cmd_mcp_entry;
extern const struct cmd_entry cmd_diagnose_entry;
extern const struct cmd_entry cmd_web_entry;
extern const struct cmd_entry cmd_top_entry;
extern const struct cmd_entry cmd_trace_entry;
extern const struct cmd_entry cmd_exporter_entry;

/* The pids of the agents on this machine (their @probing-<pid> sockets
 * in /proc/net/unix), sorted, at most max (cmd_list.c).  Returns how
 * many, or -1 when /proc/net/unix cannot be read. */
int cli_list_agents(pid_t *pids, int max);

/*
 * A duration, the one vocabulary of every option that takes one: a
 * number with a unit ("500ms", "10s", "2m", "1h"; fractions allowed), or a
 * bare number in bare_ms milliseconds (1000: seconds, the --duration and
 * --wait options; 1: milliseconds, the --timeout options; 0: refused, for
 * options whose bare numbers meant another unit before).  Into *ms, 1 ms
 * to 24 h.  0, or -1 (no message: see CLI_DURATION_HELP).
 */
int cli_parse_duration(const char *text, int bare_ms, int *ms);
#define CLI_DURATION_HELP "a duration like 10s, 500ms, 2m or 1h"

/* cli_usage_error for option opt whose value text is no duration, for
 * options that take no bare number: a bare number gets the two readings
 * to choose from ("5000ms or 5000s"). */
int cli_duration_error(const struct cmd_entry *e, const char *opt,
		       const char *text);

/* `perf --torch` (cmd_perf_torch.c): cmd_perf hands its argv over. */
int cmd_perf_torch(struct cmd_ctx *ctx, int argc, char **argv);

/* Prints "probing: <fmt>\n" to stderr, control characters escaped as by
 * cli_put_lines.  Returns code, for `return`. */
int cli_error(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Prints the usage line and "try --help" for e to stderr; returns
 * CLI_EUSAGE. */
int cli_usage_error(const struct cmd_entry *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * For getopt_long returning '?' or ':' (optstrings start with ':', opterr
 * is 0): says which option is unknown or lacks its value, then as
 * cli_usage_error (e NULL: the global options).  Returns CLI_EUSAGE.
 */
int cli_option_error(const struct cmd_entry *e, int c, int argc, char **argv);

/* The target as given, for the commands an error suggests (NULL: none
 * given).  Set by main before the command runs. */
extern const char *cli_hint_target;

/* After getopt_long: CLI_OK when every argument was an option, else
 * cli_usage_error's "unexpected argument" for the first that was not. */
int cli_args_done(const struct cmd_entry *e, int argc, char **argv);

/* Prints e's full help to stdout. */
void cli_help_print(const struct cmd_entry *e);

/*
 * Parses a -f argument into *out.  Returns 0, or CLI_EUSAGE after saying
 * why.
 */
int cli_format_parse(const char *text, enum cli_format *out);

/*
 * Parses a positive number of milliseconds (or rows, a count, an id) in
 * text into *out.
 * Returns 0 or -1 (no message).
 */
int cli_parse_ms(const char *text, int *out);

/*
 * Connects to ctx->target and sends `initialize`; on success ctx->client
 * and ctx->init_body are set.  With send_init false only the socket is
 * opened (the dap bridge).  Returns CLI_OK or an exit code after printing
 * the reason (see target.h for which).
 */
int cli_connect(struct cmd_ctx *ctx, int send_init);

/* CLI_OK when the command has a target (-t, PROBING_TARGET); else the
 * usage error that says how to give one. */
int cli_need_target(struct cmd_ctx *ctx);

/*
 * Sends a request (takes ownership of args) and waits up to timeout_ms
 * (< 0: forever).  Returns CLI_OK with *resp set (caller frees; it may
 * carry success false), or CLI_ETIMEOUT after printing the reason.
 */
int cli_request(struct cmd_ctx *ctx, const char *command, cJSON *args,
		int timeout_ms, struct dap_message **resp);

/* cli_request for a response that must succeed: one that says success
 * false is said on stderr (its message) and freed, CLI_EFAIL.  CLI_OK
 * with *resp a success (caller frees). */
int cli_request_ok(struct cmd_ctx *ctx, const char *command, cJSON *args,
		   int timeout_ms, struct dap_message **resp);

/*
 * Set by the SIGINT handler that cli_sigint_catch() installs.  The handler
 * only sets it (async-signal-safe); whoever waits polls it and clears it.
 */
extern volatile sig_atomic_t cli_sigint;

/* Catches SIGINT into cli_sigint (no SA_RESTART, so blocking calls return
 * EINTR) for the rest of the process. */
void cli_sigint_catch(void);

/*
 * Like cli_request, but Ctrl-C sends DAP `cancel` {requestId} for it and
 * keeps waiting for its (interrupted) response.  After max_sigint Ctrl-Cs
 * it stops waiting and returns CLI_EINTR with *resp NULL (a late response
 * is then dropped by the client).  Needs cli_sigint_catch().
 */
int cli_request_cancellable(struct cmd_ctx *ctx, const char *command,
			    cJSON *args, int timeout_ms, int max_sigint,
			    struct dap_message **resp);

/*
 * A JSON value as text for a table cell: strings as they are, numbers in
 * their shortest exact form (integers without a point), true/false, other
 * values as compact JSON.  Returns a heap string (caller frees), or NULL
 * for null, a missing value, or no memory.
 */
char *cli_json_text(const cJSON *v);

/* How much longer than its timeoutMs an evaluate is waited for: the
 * agent's wait for the GIL (python.gil_timeout_ms, 500 by default) and its
 * hard limit (2 s after it interrupts code that does not stop:
 * agent/python/pygil.h), so that its answer, even "it goes on running", comes
 * before the CLI gives up; then 1.5 s for the reply itself. */
#define CLI_EVAL_GRACE_MS 4000

/*
 * Writes s to f a line at a time, each line's control characters escaped
 * (cli_text_fit: \t, \x1b, ...) and ended with a newline (one after the
 * last line too; nothing for ""): for text from the target, which keeps
 * its lines but sends no escape sequence to the terminal.
 */
void cli_put_lines(FILE *f, const char *s);

/*
 * Prints an `evaluate` response: body.output to stdout (as the code
 * printed it), then body.result and a newline when not empty; on failure
 * the message (the traceback) to stderr.  Result and message go through
 * cli_put_lines.  Returns CLI_OK or CLI_EFAIL.
 */
int cli_evaluate_show(const struct dap_message *resp);

/* Sends `disconnect` (briefly waiting for its response) and frees the
 * connection and init_body.  Safe to call when not connected. */
void cli_close(struct cmd_ctx *ctx);

/* The response's error text: its message, or a sentence saying none
 * was given. */
const char *cli_resp_message(const struct dap_message *resp);

/* Sleeps ms (a signal cuts it short). */
void cli_sleep_ms(int ms);

/* Waits ms, or until Ctrl-C (cli_sigint_catch()): 1 when Ctrl-C ended
 * it, else 0; cli_sigint is cleared either way. */
int cli_wait_ms(int ms);

/* Sends probing/config with set (owned; NULL: read only), for good or
 * (lease_ms > 0) for a while: the agent puts the settings back that long
 * after, should this client not do it first (config_lease.h).  *resp on
 * CLI_OK, else the exit code after saying why. */
int cli_config(struct cmd_ctx *ctx, cJSON *set, int lease_ms,
	       struct dap_message **resp);

/* A lease for settings changed for a window of ms: the window and time
 * to put them back in. */
#define CLI_LEASE_MS(ms) ((ms) + 10000)

/* A setting's value in a probing/config response; "" when absent. */
const char *cli_setting(const struct dap_message *resp, const char *name);

#endif
