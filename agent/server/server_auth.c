/*
 * server_auth: the token gate.  See server_auth.h.
 */
#include "server_auth.h"

#include <ev.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "core/auth.h"
#include "core/config.h"
#include "core/log.h"
#include "dap_msg.h"
#include "dap_token.h"
#include "handler.h"
#include "server.h"
#include "server_session.h"

static void on_auth_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct session *s = w->data;

	(void)loop, (void)revents;
	if (!s->refused)
		log_info("session %llu: no token within %d s, closing",
			 (unsigned long long)s->id, SERVER_AUTH_TIMEOUT_S);
	server_session_close(s);
}

void server_auth_init(struct session *s)
{
	ev_timer_init(&s->auth_timer, on_auth_timeout, SERVER_AUTH_TIMEOUT_S,
		      0.);
	s->auth_timer.data = s;
	if (!s->authed)
		ev_timer_start(server_loop(s->srv), &s->auth_timer);
}

void server_auth_linger(struct session *s)
{
	s->lingering = 1;
	if (fdown_ours(&s->sock))
		shutdown(s->sock.fd, SHUT_WR);
	ev_timer_stop(server_loop(s->srv), &s->auth_timer);
	ev_timer_set(&s->auth_timer, SERVER_LINGER_S, 0.);
	ev_timer_start(server_loop(s->srv), &s->auth_timer);
}

void server_auth_refuse(struct session *s, int64_t seq, const char *command,
			const char *why)
{
	log_info("session %llu: refused: %s", (unsigned long long)s->id, why);
	s->refused = 1;
	server_session_send(s, dap_error_new(seq, command, DAP_ERROR_AUTH, "%s",
				      why));
	if (!s->closed && !s->out_head && !s->lingering)
		server_auth_linger(s);
}

int server_auth_check(struct session *s, struct dap_message *msg)
{
	const cJSON *t = msg->arguments ? cJSON_GetObjectItemCaseSensitive(
						  msg->arguments, DAP_TOKEN_ARG)
					: NULL;
	const struct handler *h = msg->type == DAP_REQUEST
					  ? handler_find(msg->command)
					  : NULL;
	const char *why = NULL;
	char room[128];

	if (!h || !(h->flags & HANDLER_OPENS))
		why = "this agent needs a token: the first request must be "
		      "initialize (or attach) with arguments." DAP_TOKEN_ARG;
	else if (!cJSON_IsString(t))
		why = "this agent needs a token: none was given (give it "
		      "in arguments." DAP_TOKEN_ARG "; probing: --token or "
		      "PROBING_TOKEN)";
	else if (!auth_token())
		why = "this agent has no token, so no TCP client gets in "
		      "(its listener was made without one)";
	else if (!auth_check(t->valuestring))
		why = "wrong token: the agent refused it";
	if (!why) {
		int ntcp, max = (int)config_int("server.max_clients");

		server_session_count(s->srv, NULL, &ntcp, NULL);
		if (ntcp >= max) {
			snprintf(room, sizeof(room),
				 "too many clients: server.max_clients (%d) "
				 "are connected over TCP",
				 max);
			why = room;
		}
	}
	if (!why) {
		s->authed = 1;
		ev_timer_stop(server_loop(s->srv), &s->auth_timer);
		s->framer.max_body = DAP_MESSAGE_MAX;
		return 1;
	}
	server_auth_refuse(s, msg->type == DAP_REQUEST ? msg->seq : 0,
		    msg->type == DAP_REQUEST ? msg->command : "", why);
	dap_message_free(msg);
	return 0;
}
