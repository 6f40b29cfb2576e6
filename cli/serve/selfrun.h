/*
 * selfrun: runs this `probing` binary again with other arguments and keeps
 * what it prints.
 *
 * This is how the two doors that are not a terminal — `probing mcp` and
 * `probing web` — answer: every tool and every page is a command the CLI
 * already has (`backtrace -f json`, `query`, `cluster hang -f json`, ...),
 * run as its own process.  One implementation of each operation, recordings
 * and tokens and clusters included; and a command that fails, hangs or
 * crashes takes no server down with it.
 *
 * The child is /proc/self/exe (the running binary, even when the file was
 * replaced since), with stdin on /dev/null and the environment of the
 * caller: set PROBING_TOKEN there before threads start to hand a --token
 * down (it is not put on a command line other users can read).
 */
#ifndef CLI_SELFRUN_H
#define CLI_SELFRUN_H

#include <stddef.h>

#define SELFRUN_ERR_MAX (64 * 1024) /* stderr kept, bytes */

struct selfrun_result {
	int status;	/* the exit code; 128 + N after signal N; -1: it ran
			 * past its time and was killed */
	char *out;	/* stdout, NUL-terminated (owned) */
	size_t out_len; /* bytes in out */
	int out_cut;	/* stdout went past max_out: the rest was dropped */
	char *err;	/* stderr, NUL-terminated, at most SELFRUN_ERR_MAX */
};

/*
 * Runs `probing argv[0] argv[1] ...` (argv NULL-terminated, the command's
 * words: {"-t", "1234", "backtrace", NULL}) and waits for it, at most
 * timeout_ms (then SIGKILL).  Keeps max_out bytes of stdout.  Returns 0
 * with *r filled (free with selfrun_free), or -errno when it could not be
 * started (nothing to free).  Safe to call from several threads at once.
 */
int selfrun(const char *const *argv, int timeout_ms, size_t max_out,
	    struct selfrun_result *r);

void selfrun_free(struct selfrun_result *r);

/*
 * Hands what this CLI was given to the commands it runs: token (NULL:
 * none) as PROBING_TOKEN and timeout_ms (0: not given) as
 * PROBING_TIMEOUT, through the environment (a command line is readable by
 * every user).  Call before threads start.  0, or -ENOMEM.
 */
int selfrun_hand_down(const char *token, int timeout_ms);

#endif
