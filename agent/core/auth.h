/*
 * auth: the agent's access token, which TCP sessions present as
 * arguments.probingToken of their first request (`initialize` or
 * `attach`); format, file and comparison in dap/dap_token.h, the rules for
 * users in docs/security.md.
 *
 * Where the token comes from, the first that applies:
 *   1. PROBING_TOKEN in the environment (auth_init, at start) or
 *      probing.init(token=...) (auth_token_set): the user's own;
 *   2. auth_token_adopt(): a token received from elsewhere, e.g. the
 *      cluster's rendezvous store, so that every rank of a job shares one;
 *   3. auth_token_ensure(): the per-user token file, loaded when it
 *      exists (ours, 0600), else generated (getrandom: 32 bytes, 64 hex
 *      digits) and created 0600 in a 0700 directory.  server_listen()
 *      calls it before it listens on any TCP address, loopback too:
 *      every local user can reach loopback.
 * Setting or adopting replaces the token; ensure never does.  There is
 * no way back to "no token" while the process runs.
 *
 * The one way to go without: the user says so, PROBING_TOKEN=none (or
 * probing.init(token="none")) before the agent has a token
 * (AUTH_TOKEN_NONE; a token has at least 16 characters, so it is never
 * one).  Then TCP on loopback takes every session without a token, and
 * an address beyond loopback is still refused (auth_token_ensure fails).
 *
 * Who must present it (server.c): every session accepted on a TCP
 * listener, unless auth_tokenless().  The unix socket never asks: the
 * kernel tells us the peer's uid (SO_PEERCRED), which is checked instead.
 *
 * Threads: every function, from any thread.  A string auth_token()
 * returned stays valid for the life of the process (a replaced token is
 * kept, not freed).  Not async-signal-safe.
 */
#ifndef AUTH_H
#define AUTH_H

#include <stddef.h>

/* The value of PROBING_TOKEN (and probing.init's token) that says: no
 * token, TCP on loopback open to every local user. */
#define AUTH_TOKEN_NONE "none"

/* The current token, or NULL when none is set (then a TCP session gets
 * in only when auth_tokenless()). */
const char *auth_token(void);

/* 1 when the user chose AUTH_TOKEN_NONE and the agent has no token:
 * TCP sessions need none.  Else 0. */
int auth_tokenless(void);

/*
 * Uses token (received from the rendezvous store) as the agent's token,
 * replacing any other, and stores it in the token file (replaced
 * atomically) so that the CLI on this machine finds it; a file that
 * cannot be written is logged, not an error.  Returns 0, or -EINVAL when
 * token is not well formed (why in err; nothing changes).
 */
int auth_token_adopt(const char *token, char *err, size_t errlen);

/*
 * Makes sure the agent has a token: a no-op when it has one; else loads
 * the token file, or generates a token and creates the file.  Returns 0;
 * -EPERM when the file exists but is refused (another owner, a mode
 * looser than 0600, a link: err says which and how to fix it), or when
 * the user chose AUTH_TOKEN_NONE (no token is made then); -EINVAL when
 * PROBING_TOKEN is set but not a token; or -errno when no place for the
 * file could be made (err says where it tried).
 */
int auth_token_ensure(char *err, size_t errlen);

/*
 * A new random token (getrandom: 32 bytes as 64 hex digits) into out
 * (at least AUTH_TOKEN_GENERATED_LEN + 1 bytes); nothing is set or
 * written.  0, -EINVAL (out too small) or -errno with err.
 */
#define AUTH_TOKEN_GENERATED_LEN 64
int auth_token_generate(char *out, size_t outlen, char *err, size_t errlen);

/* 1 when the token is the user's own (PROBING_TOKEN, probing.init), or
 * PROBING_TOKEN is set but malformed, or the user chose AUTH_TOKEN_NONE
 * (then there is none and must not be one from elsewhere): a token to
 * keep, never replaced by a shared one. */
int auth_token_is_users(void);

/*
 * Reads PROBING_TOKEN.  Returns 0 (also when unset, or AUTH_TOKEN_NONE),
 * or -EINVAL when it is not a token: the agent then has no token, and
 * auth_token_ensure() fails with the same reason rather than making
 * another one.
 */
int auth_init(char *err, size_t errlen);

/* The user's own token (probing.init(token=...)); source names it for
 * server.token.  AUTH_TOKEN_NONE: no token (see above), -EPERM once the
 * agent has one.  Returns 0 or -EINVAL (why in err). */
int auth_token_set(const char *token, const char *source, char *err,
		   size_t errlen);

/* 1 when the agent has a token and given is it (constant time), else 0. */
int auth_check(const char *given);


/* In a forked child: makes the lock usable again. */
void auth_atfork_child(void);

#endif
