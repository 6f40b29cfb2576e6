/*
 * server: the loop, its listeners and accept, and the server's lifetime.
 * See server.h; the rest of the server is in server_sock.c (sockets),
 * server_session.c (connections), server_auth.c (the token gate),
 * server_request.c (dispatch) and server_events.c (posted events).
 */
#include "server.h"

#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/auth.h"
#include "core/config.h"
#include "core/log.h"
#include "dap_addr.h"
#include "server_events.h"
#include "server_intern.h"
#include "server_request.h"
#include "server_session.h"
#include "server_sock.h"

static struct server *current_server;
static int listen_watched; /* on_listen_set is a config listener */

struct server *server_current(void)
{
	return current_server;
}

/* ---- accept ----------------------------------------------------------- */

static void on_reap(struct ev_loop *loop, ev_prepare *w, int revents)
{
	(void)loop, (void)revents;
	server_session_reap(w->data);
}

static void listener_lost(struct server *srv, struct listener *l);

/* Whether a new session of this kind may be had (server.h: how many at
 * once); makes room among the sessions owing the token.  addr: the
 * listener's, for the log. */
static int room_for(struct server *srv, int local, int authed,
		    const char *addr)
{
	int nlocal, ntcp, npending, n;

	n = server_session_count(srv, &nlocal, &ntcp, &npending);
	if (n >= SERVER_SESSIONS_MAX) {
		log_warn("refused a client on %s: %d sessions open", addr, n);
		return 0;
	}
	if (local) {
		if (nlocal < SERVER_LOCAL_MAX)
			return 1;
		log_warn("refused a client on %s: %d sessions of this user "
			 "connected already", addr, nlocal);
		return 0;
	}
	if (authed) {
		int max = (int)config_int("server.max_clients");

		if (ntcp < max)
			return 1;
		log_warn("refused a TCP client on %s: %d connected already "
			 "(server.max_clients)", addr, ntcp);
		return 0;
	}
	if (npending >= SERVER_PENDING_MAX) {
		struct session *old = server_session_oldest_pending(srv);

		log_info("session %llu: still no token, and a newer client "
			 "needs the room: closing",
			 (unsigned long long)old->id);
		server_session_close(old);
	}
	return 1;
}

static void on_accept(struct ev_loop *loop, ev_io *w, int revents)
{
	struct listener *l = w->data;
	struct server *srv = current_server;
	struct fdown c;
	int one = 1, authed, rc;

	(void)loop;
	if ((revents & EV_ERROR) || !fdown_ours(&l->sock)) {
		listener_lost(srv, l);
		return;
	}
	/* A session's descriptor lives above the program's own numbers, or
	 * the session is refused (fdown.h: fdown_take_high): under a low
	 * RLIMIT_NOFILE it would take a number the program is about to
	 * need. */
	rc = fdown_take_high(&c, accept4(l->sock.fd, NULL, NULL,
					 SOCK_NONBLOCK | SOCK_CLOEXEC));
	if (rc == -EMFILE) {
		struct rlimit rl;

		getrlimit(RLIMIT_NOFILE, &rl);
		log_warn("refused a client on %s: no descriptor is free at %d "
			 "or above short of the limit's last %d (RLIMIT_NOFILE "
			 "%llu), and the program's own numbers are not taken",
			 l->addr, FDOWN_MIN, FDOWN_SPARE,
			 (unsigned long long)rl.rlim_cur);
	}
	if (rc)
		return;
	if (l->is_unix && !server_sock_peer_allowed(c.fd)) {
		log_warn("refused a client of another user on %s", l->addr);
		fdown_close(&c);
		return;
	}
	/* Decided once, now: a TCP client needs the token unless the user
	 * chose none (auth.h).  An agent with neither (no listener is bound
	 * so: server_sock.c) lets no TCP client in. */
	authed = l->is_unix || auth_tokenless();
	if (!room_for(srv, l->is_unix, authed, l->addr)) {
		fdown_close(&c);
		return;
	}
	if (!l->is_unix)
		setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	server_session_new(srv, &c, l->is_unix, authed);
}

/* ---- listeners -------------------------------------------------------- */

/* Takes *sock (emptied) as a listener on addr. */
static void add_listener(struct server *srv, struct fdown *sock, int is_unix,
			 const char *addr)
{
	struct listener *l;

	if (srv->nlisteners >= SERVER_LISTENERS_MAX) {
		fdown_close(sock);
		return;
	}
	l = &srv->listeners[srv->nlisteners];
	l->sock = *sock;
	fdown_forget(sock);
	srv->nlisteners++;
	l->is_unix = is_unix;
	snprintf(l->addr, sizeof(l->addr), "%s", addr);
	ev_io_init(&l->io, on_accept, l->sock.fd, EV_READ);
	l->io.data = l;
	ev_io_start(srv->loop, &l->io);
}

/* Binds l's address again after the program closed its socket: the
 * name or port was let go with it. */
static void listener_lost(struct server *srv, struct listener *l)
{
	struct dap_addr addr;
	char err[256], c[DAP_ADDR_TEXT_MAX];
	int rc;

	ev_io_stop(srv->loop, &l->io);
	fdown_forget(&l->sock);
	if ((rc = dap_addr_parse(l->addr, &addr, err, sizeof(err))))
		;
	else if (addr.kind == DAP_ADDR_UNIX)
		rc = server_sock_bind_unix(&addr, &l->sock, err, sizeof(err));
	else
		rc = server_sock_bind_tcp(&addr, &l->sock, c, sizeof(c), err,
					  sizeof(err));
	if (rc) {
		log_warn("the program closed the agent's socket on %s and it "
			 "cannot listen there again: %s",
			 l->addr, err);
		return;
	}
	log_info("the program closed the agent's socket on %s; listening "
		 "again", l->addr);
	ev_io_set(&l->io, l->sock.fd, EV_READ);
	ev_io_start(srv->loop, &l->io);
}

/* Every second: a listener or session whose descriptor the program
 * closed (or closed and reused) is seen to even when nothing happens on
 * it. */
static void on_fdcheck(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct server *srv = t->data;

	(void)loop, (void)revents;
	for (int i = 0; i < srv->nlisteners; i++)
		if (!fdown_ours(&srv->listeners[i].sock))
			listener_lost(srv, &srv->listeners[i]);
	server_session_check_fds(srv);
}

/* Closes the listener on canon, if any; the others keep their order. */
static void close_listener(struct server *srv, const char *canon)
{
	int i;

	for (i = 0; i < srv->nlisteners; i++)
		if (!strcmp(srv->listeners[i].addr, canon))
			break;
	if (i == srv->nlisteners)
		return;
	/* libev holds the watchers' addresses: the ones that move are
	 * stopped first and started again where they land. */
	for (int j = i; j < srv->nlisteners; j++)
		ev_io_stop(srv->loop, &srv->listeners[j].io);
	fdown_close(&srv->listeners[i].sock);
	log_info("no longer listening on %s", canon);
	srv->nlisteners--;
	memmove(&srv->listeners[i], &srv->listeners[i + 1],
		sizeof(srv->listeners[0]) * (size_t)(srv->nlisteners - i));
	for (int j = i; j < srv->nlisteners; j++) {
		struct listener *l = &srv->listeners[j];

		ev_io_init(&l->io, on_accept, l->sock.fd, EV_READ);
		l->io.data = l;
		ev_io_start(srv->loop, &l->io);
	}
}

static void on_wake(void *data)
{
	struct server *srv = data;
	struct ev_loop *loop = srv->loop;
	struct pending_listener p[SERVER_LISTENERS_MAX];
	char gone[SERVER_LISTENERS_MAX][DAP_ADDR_TEXT_MAX];
	struct posted_event *events;
	int n, ngone, stop;

	pthread_mutex_lock(&srv->lock);
	n = srv->npending;
	memcpy(p, srv->pending, sizeof(p[0]) * (size_t)n);
	srv->npending = 0;
	ngone = srv->nunlisten;
	memcpy(gone, srv->unlisten, sizeof(gone[0]) * (size_t)ngone);
	srv->nunlisten = 0;
	stop = srv->stop_requested;
	events = server_events_take_locked(srv);
	pthread_mutex_unlock(&srv->lock);
	for (int i = 0; i < n; i++)
		add_listener(srv, &p[i].sock, p[i].is_unix, p[i].addr);
	for (int i = 0; i < ngone; i++)
		close_listener(srv, gone[i]);
	server_events_deliver(srv, events);
	if (stop)
		ev_break(loop, EVBREAK_ALL);
}

static int note_address(struct server *srv, const char *canon)
{
	for (int i = 0; i < srv->naddresses; i++)
		if (strcmp(srv->addresses[i], canon) == 0)
			return 1;
	if (srv->naddresses < SERVER_LISTENERS_MAX)
		snprintf(srv->addresses[srv->naddresses++], DAP_ADDR_TEXT_MAX,
			 "%s", canon);
	return 0;
}

/* Listening on canon (not listened on) failed for reason: a
 * server.listen setting that names it (as the environment put it there
 * before the agent could try) is emptied, so that `config` never shows an
 * address the agent refused, and server.listen_error says why (else only
 * the program's stderr would).  A setting naming another address is left
 * alone: a failed move keeps the old listener, and its setting, and the
 * client that asked for it has the reason in its reply. */
static void setting_failed(const char *canon, const char *reason)
{
	char v[CONFIG_VALUE_MAX], c[DAP_ADDR_TEXT_MAX], why[128];
	struct dap_addr addr;
	int n;

	if (config_get("server.listen", v, sizeof(v)) || !v[0] ||
	    dap_addr_parse(v, &addr, why, sizeof(why)))
		return;
	dap_addr_format(&addr, c, sizeof(c));
	if (strcmp(c, canon))
		return;
	config_set_info("server.listen", "");
	n = snprintf(v, sizeof(v), "%s: %s", canon, reason);
	if (n >= (int)sizeof(v)) /* cut: say so */
		memcpy(v + sizeof(v) - 4, "...", 4);
	config_set_info("server.listen_error", v);
}

/* server.listen was set (listened on, or emptied): an earlier refusal is
 * no longer what the setting shows.  Runs on the setter's thread. */
static void on_listen_set(const char *name)
{
	if (!strcmp(name, "server.listen"))
		config_set_info("server.listen_error", "");
}

int server_listen(struct server *srv, const char *text, char *canon,
		  size_t canonlen, char *err, size_t errlen)
{
	struct dap_addr addr;
	char c[DAP_ADDR_TEXT_MAX];
	struct fdown sock;
	int rc;

	rc = dap_addr_parse(text, &addr, err, errlen);
	if (rc)
		return rc;
	dap_addr_format(&addr, c, sizeof(c));
	pthread_mutex_lock(&srv->lock);
	for (int i = 0; i < srv->naddresses; i++) {
		if (strcmp(srv->addresses[i], c) == 0) {
			pthread_mutex_unlock(&srv->lock);
			snprintf(canon, canonlen, "%s", c);
			return 0;  /* already there: starting twice is a no-op */
		}
	}
	if (srv->naddresses >= SERVER_LISTENERS_MAX) {
		pthread_mutex_unlock(&srv->lock);
		snprintf(err, errlen, "too many listeners (max %d)",
			 SERVER_LISTENERS_MAX);
		return -ENOSPC;
	}
	pthread_mutex_unlock(&srv->lock);

	if (addr.kind == DAP_ADDR_UNIX)
		rc = server_sock_bind_unix(&addr, &sock, err, errlen);
	else
		rc = server_sock_bind_tcp(&addr, &sock, c, sizeof(c), err,
					  errlen);
	if (rc) {
		setting_failed(c, err);
		return rc;
	}

	pthread_mutex_lock(&srv->lock);
	note_address(srv, c);
	struct pending_listener *p = &srv->pending[srv->npending++];
	p->sock = sock;
	p->is_unix = addr.kind == DAP_ADDR_UNIX;
	snprintf(p->addr, sizeof(p->addr), "%s", c);
	pthread_mutex_unlock(&srv->lock);
	wake_send(&srv->wake);
	snprintf(canon, canonlen, "%s", c);
	return 0;
}

static void on_syserr(const char *msg)
{
	/* libev's default is abort(); the target comes first. */
	log_warn("libev: %s", msg);
}

int server_new(struct server **out, char *err, size_t errlen)
{
	struct server *srv;
	struct dap_addr addr;
	char canon[DAP_ADDR_TEXT_MAX];
	struct fdown sock;
	int rc;

	ev_set_syserr_cb(on_syserr);
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&srv->lock, NULL);
	/* select(): no descriptor of the loop's own that the program could
	 * close or reuse (epoll's), and a closed one is dropped from the set
	 * instead of libev asserting or calling back forever; inotify and
	 * timerfd off for the same reason.  A few dozen descriptors at most:
	 * select is as fast as epoll here. */
	srv->loop = ev_loop_new(EVBACKEND_SELECT | EVFLAG_NOSIGMASK |
				EVFLAG_NOENV | EVFLAG_NOINOTIFY |
				EVFLAG_NOTIMERFD);
	if (!srv->loop) {
		snprintf(err, errlen, "cannot create an event loop");
		free(srv);
		return -ENOMEM;
	}
	dap_addr_for_pid(getpid(), &addr);
	rc = server_sock_bind_unix(&addr, &sock, err, errlen);
	if (rc) {
		ev_loop_destroy(srv->loop);
		free(srv);
		return rc;
	}
	dap_addr_format(&addr, canon, sizeof(canon));
	note_address(srv, canon);
	if (wake_init(&srv->wake, srv->loop, on_wake, srv)) {
		snprintf(err, errlen, "cannot make the loop's wake-up pipe");
		fdown_close(&sock);
		ev_loop_destroy(srv->loop);
		free(srv);
		return -EMFILE;
	}
	ev_timer_init(&srv->fdcheck, on_fdcheck, WAKE_CHECK_S, WAKE_CHECK_S);
	srv->fdcheck.data = srv;
	ev_timer_start(srv->loop, &srv->fdcheck);
	ev_unref(srv->loop);
	ev_prepare_init(&srv->reaper, on_reap);
	srv->reaper.data = srv;
	ev_prepare_start(srv->loop, &srv->reaper);
	current_server = srv;
	if (!listen_watched &&
	    config_on_change("server.listen", on_listen_set) == 0)
		listen_watched = 1;
	add_listener(srv, &sock, 1, canon);
	*out = srv;
	return 0;
}

struct ev_loop *server_loop(struct server *srv)
{
	return srv->loop;
}

void server_run(struct server *srv)
{
	ev_run(srv->loop, 0);
}

int server_unlisten(struct server *srv, const char *canon)
{
	int found = 0;

	pthread_mutex_lock(&srv->lock);
	for (int i = 0; i < srv->naddresses; i++) {
		if (strcmp(srv->addresses[i], canon))
			continue;
		found = 1;
		memmove(srv->addresses[i], srv->addresses[i + 1],
			sizeof(srv->addresses[0]) *
				(size_t)(srv->naddresses - i - 1));
		srv->naddresses--;
		break;
	}
	/* Not taken by the loop yet: closed here. */
	for (int i = 0; found && i < srv->npending; i++) {
		if (strcmp(srv->pending[i].addr, canon))
			continue;
		fdown_close(&srv->pending[i].sock);
		srv->pending[i] = srv->pending[--srv->npending];
		pthread_mutex_unlock(&srv->lock);
		return 0;
	}
	if (found && srv->nunlisten < SERVER_LISTENERS_MAX)
		snprintf(srv->unlisten[srv->nunlisten++], DAP_ADDR_TEXT_MAX,
			 "%s", canon);
	pthread_mutex_unlock(&srv->lock);
	if (!found)
		return -ENOENT;
	wake_send(&srv->wake);
	return 0;
}

void server_stop(struct server *srv)
{
	pthread_mutex_lock(&srv->lock);
	srv->stop_requested = 1;
	pthread_mutex_unlock(&srv->lock);
	wake_send(&srv->wake);
}

void server_addresses(struct server *srv, char *out, size_t outlen)
{
	size_t n = 0;

	out[0] = 0;
	pthread_mutex_lock(&srv->lock);
	for (int i = 0; i < srv->naddresses && n < outlen; i++)
		n += (size_t)snprintf(out + n, outlen - n, "%s%s",
				      i ? "," : "", srv->addresses[i]);
	pthread_mutex_unlock(&srv->lock);
}

void server_free(struct server *srv)
{
	if (!srv)
		return;
	server_session_free_all(srv);
	for (int i = 0; i < srv->nlisteners; i++) {
		ev_io_stop(srv->loop, &srv->listeners[i].io);
		fdown_close(&srv->listeners[i].sock);
	}
	for (int i = 0; i < srv->npending; i++)
		fdown_close(&srv->pending[i].sock);
	ev_ref(srv->loop);
	ev_timer_stop(srv->loop, &srv->fdcheck);
	server_events_free(server_events_take_locked(srv));
	/* Requests still on workers keep pointing at their messages: leave
	 * them (and the loop they would wake) to the exiting process. */
	if (!server_request_any(srv)) {
		wake_release(&srv->wake);
		ev_loop_destroy(srv->loop);
		pthread_mutex_destroy(&srv->lock);
		free(srv);
	}
	if (current_server == srv)
		current_server = NULL;
}

void server_atfork_child(struct server *srv)
{
	if (!srv)
		return;
	for (int i = 0; i < srv->nlisteners; i++)
		fdown_close(&srv->listeners[i].sock);
	server_session_atfork_child(srv);
	for (int i = 0; i < srv->npending; i++)
		fdown_close(&srv->pending[i].sock);
	wake_atfork_child(&srv->wake);
	current_server = NULL;
}
