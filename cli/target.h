/*
 * target: from what the user typed after -t to a DAP session, and from
 * every failure on the way to an exit code (enum cli_exit) and a sentence a
 * person understands.
 *
 * The taxonomy:
 *   CLI_EUSAGE    the text is not an address
 *   CLI_ENOPROC   a pid that is not in /proc
 *   CLI_ENOAGENT  a pid whose process has no agent socket (@probing-<pid>):
 *                 the message says how to start one
 *   CLI_EREFUSED  a TCP or unix-path address where nothing listens (or the
 *                 connection could not be made at all)
 *   CLI_ETIMEOUT  connected but no answer in time, or the agent closed the
 *                 connection (another user's process: SO_PEERCRED)
 *   CLI_EFAIL     the agent answered `initialize` with success:false
 *   CLI_EAUTH     ... because the token was missing or wrong
 *                 (DAP_ERROR_AUTH): the message says where one is found
 *
 * The token (docs/security.md): the one given (--token, PROBING_TOKEN) is
 * sent to every target; else a TCP target gets the one in the per-user
 * token file (dap_token_find), when there is one.  Unix sockets need none.
 * CLI_TOKEN_NONE given (the agent's own opt-out, PROBING_TOKEN=none, may
 * well be in the CLI's environment too) means: send no token, not even
 * the file's.
 */
#ifndef CLI_TARGET_H
#define CLI_TARGET_H

#include <stddef.h>
#include <sys/types.h>

#include "dap_addr.h"
#include "dap_client.h"

/* Longest command line shown for a process, in bytes. */
#define CLI_CMDLINE_MAX 60

/*
 * Parses text (a pid, "host:port", "@name", "/path") into *addr; a pid must
 * be in /proc.  Returns CLI_OK, CLI_EUSAGE or CLI_ENOPROC with the reason
 * in err.
 */
int cli_target_resolve(const char *text, struct dap_addr *addr, char *err,
		       size_t errlen);

/* The value of --token and PROBING_TOKEN that says "no token": the same
 * word the agent takes as its user's opt-out (AUTH_TOKEN_NONE,
 * agent/core/auth.h); never a token, which has at least 16 characters. */
#define CLI_TOKEN_NONE "none"

/* The token given on the command line or in PROBING_TOKEN (borrowed; NULL:
 * none; CLI_TOKEN_NONE: send none), for every later connection.  Called
 * once, by main. */
void cli_target_set_token(const char *token);

/* What cli_target_set_token was given (CLI_TOKEN_NONE included, so that
 * commands run by this one say the same), or NULL. */
const char *cli_target_given_token(void);

/*
 * The token to present to the agent at addr, as above.  Returns 1 with it
 * in out (>= DAP_TOKEN_MAX + 1 bytes) and where it came from in src
 * ("--token or PROBING_TOKEN", or the file's path), or 0 when there is
 * none (src then says why, e.g. that a token file was refused, or that
 * the user said CLI_TOKEN_NONE).
 */
int cli_target_token(const struct dap_addr *addr, char *out, size_t outlen,
		     char *src, size_t srclen);

/*
 * Says on stdout where the token of an agent that now listens on TCP is,
 * for the user to give to clients, from config (the body of its
 * probing/config reply): its server.token setting names the token file,
 * PROBING_TOKEN or probing.init, or says "none (...)" when the target's
 * user chose no token.  Never the token itself.  For the commands that
 * open a TCP listener (inject --listen, debug --pause --address).
 */
void cli_target_say_token(const cJSON *config);

/*
 * Resolves text, connects within timeout_ms and, when init_body is not
 * NULL, sends `initialize` ({clientID: "probing-cli", adapterID:
 * "probing", probingToken when cli_target_token has one}) and waits
 * timeout_ms for it.  Returns CLI_OK with a new
 * client in *out (caller frees) and the response body in *init_body
 * (caller frees; an empty object when the agent sent none), or an exit
 * code from the taxonomy above with the reason in err and nothing to free.
 */
int cli_target_open(const char *text, int timeout_ms, struct dap_client **out,
		    cJSON **init_body, char *err, size_t errlen);

/*
 * The exit code for an error (negative, from dap_client_wait/read) met
 * while talking to a connected agent, with the reason in err: every such
 * error is CLI_ETIMEOUT ("not answering", "closed the connection").
 */
int cli_target_lost(int dap_err, const char *what, int timeout_ms, char *err,
		    size_t errlen);

/*
 * Writes pid's command line (arguments joined by spaces, cut to max bytes
 * with "...", or "[comm]" for kernel threads) into out.  Returns 0 or
 * -errno (out then holds "?").
 */
int cli_target_cmdline(pid_t pid, char *out, size_t outlen, size_t max);

#endif
