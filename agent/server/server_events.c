/*
 * server_events: the cross-thread event queue.  See server_events.h.
 */
#include "server_events.h"

#include <errno.h>
#include <stdlib.h>

#include "dap_msg.h"
#include "server_intern.h"
#include "server_session.h"

struct posted_event {
	struct posted_event *next;
	uint64_t session;          /* 0: every session */
	struct dap_message *msg;
};

void server_events_deliver(struct server *srv, struct posted_event *ev)
{
	struct posted_event *next;

	for (; ev; ev = next) {
		struct session *s;

		next = ev->next;
		if (!ev->session) {
			server_session_send_all(srv, ev->msg);
		} else if ((s = server_session_find(srv, ev->session)) &&
			   s->authed) {
			server_session_send(s, ev->msg); /* takes it */
		} else {
			dap_message_free(ev->msg);
		}
		free(ev);
	}
}

struct posted_event *server_events_take_locked(struct server *srv)
{
	struct posted_event *ev = srv->events_head;

	srv->events_head = srv->events_tail = NULL;
	srv->nevents = 0;
	return ev;
}

void server_events_free(struct posted_event *ev)
{
	for (struct posted_event *next; ev; ev = next) {
		next = ev->next;
		dap_message_free(ev->msg);
		free(ev);
	}
}

int server_post_event(struct server *srv, uint64_t session,
		      struct dap_message *ev)
{
	struct posted_event *pe;

	if (!srv || !ev) {
		dap_message_free(ev);
		return -EINVAL;
	}
	pe = calloc(1, sizeof(*pe));
	if (!pe) {
		dap_message_free(ev);
		return -ENOMEM;
	}
	pe->session = session;
	pe->msg = ev;
	pthread_mutex_lock(&srv->lock);
	if (srv->stop_requested || srv->nevents >= SERVER_EVENTS_MAX) {
		pthread_mutex_unlock(&srv->lock);
		dap_message_free(ev);
		free(pe);
		return -EAGAIN;
	}
	if (srv->events_tail)
		srv->events_tail->next = pe;
	else
		srv->events_head = pe;
	srv->events_tail = pe;
	srv->nevents++;
	pthread_mutex_unlock(&srv->lock);
	wake_send(&srv->wake);
	return 0;
}
