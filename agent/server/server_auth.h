/*
 * server_auth: the token gate of the server's sessions.
 *
 * A session accepted on TCP starts unauthenticated (loopback too; the
 * one exception is the user's own PROBING_TOKEN=none, auth.h): its first request must be initialize or attach with
 * the right arguments.probingToken (DAP_TOKEN_ARG).  Until then it gets
 * no events, its messages are capped at SERVER_AUTH_MESSAGE_MAX (the
 * session's framer) and it is closed after SERVER_AUTH_TIMEOUT_S.
 * Anything else, or a wrong token, is refused: answered with error
 * DAP_ERROR_AUTH, and once that answer is out the session lingers — FIN
 * sent, what the client still sends read and dropped until it closes, for
 * at most SERVER_LINGER_S — then closes.  (Closing with unread input
 * would send a reset, which may destroy the answer in the client's buffer
 * before it is read.)
 *
 * Threads: the loop thread only.
 */
#ifndef SERVER_AUTH_H
#define SERVER_AUTH_H

#include <stdint.h>

struct session;
struct dap_message;

/* Sets up s's timer (the token's deadline, later the linger's) and
 * starts it when s is not authed.  Once, when s is made. */
void server_auth_init(struct session *s);

/*
 * The first message of a session that must present the token.  Returns
 * 1 when the session may go on (s is authed now, msg is still the
 * caller's to dispatch), else 0 (msg freed, the session refused).
 */
int server_auth_check(struct session *s, struct dap_message *msg);

/* Refuses unauthenticated s with an error answer to request seq/command;
 * nothing it sends is read any more, and it is closed once the answer is
 * out. */
void server_auth_refuse(struct session *s, int64_t seq, const char *command,
			const char *why);

/* The refusal is out: FIN, drain the input, close (see above). */
void server_auth_linger(struct session *s);

#endif
