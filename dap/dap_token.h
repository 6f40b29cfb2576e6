/*
 * dap_token: the access token of TCP sessions, as the agent and its
 * clients share it: what a token looks like, where the per-user token file
 * lives, reading that file safely, comparing tokens in constant time.
 *
 * A token is DAP_TOKEN_MIN..DAP_TOKEN_MAX printable ASCII characters, no
 * spaces (a generated one is 64 hex digits: 32 random bytes).  A client
 * presents it as arguments.probingToken (DAP_TOKEN_ARG) of its first
 * request, `initialize` or `attach`.  The agent answers a missing or wrong
 * token with error id DAP_ERROR_AUTH and closes the connection; a request
 * refused by read-only mode gets DAP_ERROR_READONLY (docs/protocol.md,
 * docs/security.md).
 *
 * The token file: $XDG_RUNTIME_DIR/probing/token when XDG_RUNTIME_DIR names
 * a directory, else ~/.probing/token (HOME, or the password database when
 * HOME is unset).  Its directory is ours and not writable by others; the
 * file is a regular file (not a link), owned by the effective user, with
 * no permission for group or others (0600).  A file that is not so is
 * refused, never read: a token others can read or replace is no secret.
 * The text is the token, optionally followed by a newline.
 *
 * Pure file-system and string code: no globals, no threads.  Any thread.
 */
#ifndef DAP_TOKEN_H
#define DAP_TOKEN_H

#include <stddef.h>

#include "dap_msg.h" /* DAP_ERROR_AUTH, DAP_ERROR_READONLY */

#define DAP_TOKEN_MIN 16
#define DAP_TOKEN_MAX 128	  /* characters, NUL excluded */
#define DAP_TOKEN_ARG "probingToken"
#define DAP_TOKEN_PATH_MAX 4096

/* The places of the token file, in the order a client looks. */
enum dap_token_place { DAP_TOKEN_RUNTIME = 0, DAP_TOKEN_HOME = 1 };

/* Returns 0 when text is a well-formed token, else -EINVAL with why. */
int dap_token_check(const char *text, char *err, size_t errlen);

/*
 * 1 when given equals expected, else 0.  The time taken depends on the
 * length of expected only, never on where the two differ (given may be
 * NULL: 0).
 */
int dap_token_equal(const char *expected, const char *given);

/*
 * Writes the token file's directory (dir) and path (out) for place.
 * Returns 0, -ENOENT when that place does not exist (no XDG_RUNTIME_DIR
 * directory; no home), or -ENAMETOOLONG.  dir may be NULL.
 */
int dap_token_path(enum dap_token_place place, char *dir, char *out,
		   size_t outlen);

/*
 * Reads the token file at path into out (>= DAP_TOKEN_MAX + 1 bytes).
 * Returns 0; -ENOENT when there is no file; -EPERM when it is not ours,
 * not a regular file, or readable or writable by others (err says which
 * and how to fix it); -EINVAL when its text is not a token; or -errno.
 */
int dap_token_read(const char *path, char *out, size_t outlen, char *err,
		   size_t errlen);

/*
 * The token file a client uses: the first place whose file exists.
 * Returns 0 with the token in out and its path in path (pathlen >=
 * DAP_TOKEN_PATH_MAX is enough), -ENOENT when there is none, or the error
 * of dap_token_read for the first one that exists (path names it).
 */
int dap_token_find(char *out, size_t outlen, char *path, size_t pathlen,
		   char *err, size_t errlen);

#endif
