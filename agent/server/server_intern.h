/*
 * server_intern: the server's instance, one per agent (server_current()),
 * private to the files of agent/server.
 *
 * Each group of fields below belongs to one file, and only that file
 * touches it; the others call its functions:
 *   server.c          the loop, listeners (pending and unlisten too),
 *                     stop_requested, the addresses;
 *   server_session.c  the session table and the close hooks;
 *   server_request.c  the requests in flight on workers;
 *   server_events.c   the posted events.
 * Everything belongs to the loop thread except what `lock` guards: the
 * listeners bound by server_listen() on other threads and not yet taken
 * by the loop (pending), those server_unlisten() asked the loop to close
 * (unlisten), stop_requested, the posted events and the addresses.
 */
#ifndef SERVER_INTERN_H
#define SERVER_INTERN_H

#include <ev.h>
#include <pthread.h>
#include <stdint.h>

#include "fdown.h"
#include "core/wake.h"
#include "dap_addr.h"
#include "server.h"

struct session;
struct request;
struct posted_event;

struct listener {
	struct fdown sock; /* fdown.h */
	int is_unix;
	ev_io io;
	char addr[DAP_ADDR_TEXT_MAX];
};

/* Bound by server_listen(), waiting for the loop to watch it. */
struct pending_listener {
	struct fdown sock; /* bound and listening; the loop takes it */
	int is_unix;
	char addr[DAP_ADDR_TEXT_MAX];
};

struct server {
	/* server.c */
	struct ev_loop *loop;
	struct wake wake;         /* new listeners, posted events, stop */
	ev_timer fdcheck;         /* are listeners and sessions still ours */
	ev_prepare reaper;        /* frees closed sessions */
	struct listener listeners[SERVER_LISTENERS_MAX];
	int nlisteners;
	pthread_mutex_t lock; /* pending[], stop_requested, addresses,
				 the posted events */
	struct pending_listener pending[SERVER_LISTENERS_MAX];
	int npending;
	char unlisten[SERVER_LISTENERS_MAX][DAP_ADDR_TEXT_MAX]; /* to close */
	int nunlisten;
	int stop_requested;
	char addresses[SERVER_LISTENERS_MAX][DAP_ADDR_TEXT_MAX];
	int naddresses;
	/* server_session.c */
	struct session *sessions[SERVER_SESSIONS_MAX];
	int nsessions;
	uint64_t next_session;
	server_close_fn close_hooks[SERVER_CLOSE_HOOKS_MAX];
	int nclose_hooks;
	/* server_request.c */
	struct request *inflight; /* every request handed to a worker */
	/* server_events.c (under lock) */
	struct posted_event *events_head, *events_tail;
	int nevents;
};

#endif
