/*
 * dap_client: a blocking DAP client over a non-blocking socket.
 *
 * Every wait is a poll() with what is left of the caller's timeout, so a
 * silent or stuck agent costs the caller its timeout and nothing more.
 */
#include "dap_client.h"
#include "dap_frame.h"
#include "errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_READ_CHUNK (16u << 10) /* on the stack */
#define CLIENT_SEND_TIMEOUT_MS 30000

struct dap_client {
	int fd;
	int64_t next_seq;
	dap_event_cb on_event;
	void *on_event_arg;
	int failed; /* sticky: the stream is closed or out of sync */
	struct dap_framer fr;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Deadline for timeout_ms (< 0: none). */
static int64_t deadline_of(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

/* What is left until deadline, as a poll() timeout. */
static int left_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	if (left <= 0)
		return 0;
	return left > 1000000000 ? 1000000000 : (int)left;
}

/* Polls fd for events until deadline.  Returns 1 ready, 0 timed out, or
 * -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};

	for (;;) {
		int rc = poll(&p, 1, left_ms(deadline));

		if (rc > 0)
			return 1;
		if (rc == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

/* ---- connecting ---- */

/* Whether the process at the other end of unix socket fd may be trusted
 * with what we send (code, the token): the target itself when addr names
 * a pid, else a process of ours or root's.  0, or DAP_EPEER with why. */
static int peer_check(int fd, const struct dap_addr *addr, char *err,
		      size_t errlen)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	uid_t me = geteuid();

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
	    len != sizeof(cr)) {
		errbuf_set(err, errlen, "%s: cannot tell who listens there",
			addr->host);
		return DAP_EPEER;
	}
	if (addr->pid > 0 && cr.pid != addr->pid) {
		errbuf_set(err, errlen,
			"%s is held by process %ld (uid %ld), not by process "
			"%ld: not its agent, nothing sent (someone may have "
			"taken the name first)",
			addr->host, (long)cr.pid, (long)cr.uid,
			(long)addr->pid);
		return DAP_EPEER;
	}
	if (addr->pid <= 0 && cr.uid != me && cr.uid != 0 && me != 0) {
		errbuf_set(err, errlen,
			"%s is held by process %ld of another user (uid %ld): "
			"nothing sent",
			addr->host, (long)cr.pid, (long)cr.uid);
		return DAP_EPEER;
	}
	return 0;
}

static int connect_unix(const struct dap_addr *addr, int64_t deadline, int *fdp,
			char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	int fd, rc;

	rc = dap_addr_unix_sockaddr(addr, &ss, &len);
	if (rc < 0) {
		errbuf_set(err, errlen, "%s: %s", addr->host, strerror(-rc));
		return rc;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		errbuf_set(err, errlen, "socket: %s", strerror(errno));
		return rc;
	}
	/* A unix connect either completes at once or, with a full backlog,
	 * fails with EAGAIN: retry until the deadline. */
	for (;;) {
		if (connect(fd, (struct sockaddr *)&ss, len) == 0)
			break;
		rc = -errno;
		if (rc == -EINTR)
			continue;
		if (rc == -EAGAIN && left_ms(deadline) != 0) {
			struct timespec ts = {0, 10 * 1000000};

			nanosleep(&ts, NULL);
			continue;
		}
		close(fd);
		if (rc == -EAGAIN) {
			errbuf_set(err, errlen, "connecting to %s timed out",
				addr->host);
			return DAP_ETIMEDOUT;
		}
		if (rc == -ECONNREFUSED || rc == -ENOENT) {
			if (addr->pid > 0 && kill(addr->pid, 0) < 0 &&
			    errno == ESRCH)
				errbuf_set(err, errlen, "no process %ld",
					(long)addr->pid);
			else if (addr->pid > 0)
				errbuf_set(err, errlen,
					"no probing agent in process %ld "
					"(nothing listens at %s)",
					(long)addr->pid, addr->host);
			else
				errbuf_set(err, errlen, "nothing listens at %s",
					addr->host);
			return DAP_ECONNREFUSED;
		}
		errbuf_set(err, errlen, "connecting to %s: %s", addr->host,
			strerror(-rc));
		return rc;
	}
	rc = peer_check(fd, addr, err, errlen);
	if (rc) {
		close(fd);
		return rc;
	}
	*fdp = fd;
	return 0;
}

/* One TCP attempt.  Returns 0 with the socket in *fdp or -errno. */
static int connect_one(const struct addrinfo *ai, int64_t deadline, int *fdp)
{
	int fd, rc, soerr = 0, one = 1;
	socklen_t slen = sizeof(soerr);

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS && errno != EINTR) {
			rc = -errno;
			goto fail;
		}
		rc = wait_fd(fd, POLLOUT, deadline);
		if (rc == 0)
			rc = -ETIMEDOUT;
		if (rc < 0)
			goto fail;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) < 0) {
			rc = -errno;
			goto fail;
		}
		if (soerr) {
			rc = -soerr;
			goto fail;
		}
	}
	/* Requests are small and answered one by one: no Nagle delay. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*fdp = fd;
	return 0;
fail:
	close(fd);
	return rc;
}

static int connect_tcp(const struct dap_addr *addr, int64_t deadline, int *fdp,
		       char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	char port[16], text[DAP_ADDR_TEXT_MAX + 16];
	int rc, last = -ECONNREFUSED;

	dap_addr_format(addr, text, sizeof(text));
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%d", addr->port);
	rc = getaddrinfo(addr->host, port, &hints, &res);
	if (rc != 0) {
		errbuf_set(err, errlen, "%s: %s", addr->host,
			rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		last = connect_one(ai, deadline, fdp);
		if (last == 0 || last == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (last == 0)
		return 0;
	if (last == -ETIMEDOUT) {
		errbuf_set(err, errlen, "connecting to %s timed out", text);
		return DAP_ETIMEDOUT;
	}
	if (last == -ECONNREFUSED) {
		errbuf_set(err, errlen, "nothing listens at %s", text);
		return DAP_ECONNREFUSED;
	}
	errbuf_set(err, errlen, "connecting to %s: %s", text, strerror(-last));
	return last;
}

int dap_client_connect(const struct dap_addr *addr, int timeout_ms,
		       struct dap_client **out, char *err, size_t errlen)
{
	int64_t deadline = deadline_of(timeout_ms);
	struct dap_client *c;
	int fd = -1, rc;

	*out = NULL;
	if (addr->kind == DAP_ADDR_UNIX)
		rc = connect_unix(addr, deadline, &fd, err, errlen);
	else if (addr->kind == DAP_ADDR_TCP)
		rc = connect_tcp(addr, deadline, &fd, err, errlen);
	else {
		errbuf_set(err, errlen, "invalid address");
		rc = -EINVAL;
	}
	if (rc < 0)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->fd = fd;
	c->next_seq = 1;
	dap_framer_init(&c->fr, 0);
	*out = c;
	return 0;
}

void dap_client_free(struct dap_client *c)
{
	if (!c)
		return;
	close(c->fd);
	dap_framer_release(&c->fr);
	free(c);
}

void dap_client_on_event(struct dap_client *c, dap_event_cb cb, void *arg)
{
	c->on_event = cb;
	c->on_event_arg = arg;
}

int dap_client_fd(const struct dap_client *c)
{
	return c->fd;
}

/* ---- sending ---- */

static int send_all(struct dap_client *c, const char *data, size_t len,
		    char *err, size_t errlen)
{
	int64_t deadline = deadline_of(CLIENT_SEND_TIMEOUT_MS);

	if (c->failed) {
		errbuf_set(err, errlen, "%s", dap_strerror(c->failed));
		return c->failed;
	}
	while (len > 0) {
		ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
		int rc;

		if (n > 0) {
			data += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			rc = errno == EPIPE || errno == ECONNRESET ? DAP_ECLOSED
								   : -errno;
			errbuf_set(err, errlen, "send: %s", strerror(errno));
			/* Part of a message may be out: out of sync. */
			return c->failed = rc;
		}
		rc = wait_fd(c->fd, POLLOUT, deadline);
		if (rc <= 0) {
			errbuf_set(err, errlen, "send: %s",
				rc == 0 ? "agent stopped reading"
					: strerror(-rc));
			return c->failed = rc == 0 ? DAP_ETIMEDOUT : rc;
		}
	}
	return 0;
}

int dap_client_write_raw(struct dap_client *c, const char *data, size_t len)
{
	return send_all(c, data, len, NULL, 0);
}

int64_t dap_client_send(struct dap_client *c, const char *command, cJSON *args,
			char *err, size_t errlen)
{
	struct dap_message *m;
	char *buf;
	size_t len = 0;
	int64_t seq = c->next_seq;
	int rc;

	if (!command || !*command || strlen(command) >= DAP_COMMAND_MAX) {
		cJSON_Delete(args);
		errbuf_set(err, errlen, "invalid command name");
		return -EINVAL;
	}
	m = dap_request_new(seq, command, args);
	if (!m) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	buf = dap_message_encode(m, seq, &len);
	dap_message_free(m);
	if (!buf) {
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = send_all(c, buf, len, err, errlen);
	free(buf);
	if (rc < 0)
		return rc;
	c->next_seq++;
	return seq;
}

/* ---- receiving ---- */

/*
 * Takes the next whole body out of the framer, reading the socket until
 * deadline.  Returns 1 with *body (caller frees), 0 on timeout, or a
 * negative error.
 */
static int next_body(struct dap_client *c, int64_t deadline, char **body,
		     size_t *len, char *err, size_t errlen)
{
	char buf[CLIENT_READ_CHUNK];

	for (;;) {
		int rc;
		ssize_t n;

		if (c->failed) {
			errbuf_set(err, errlen, "%s", dap_strerror(c->failed));
			return c->failed;
		}
		rc = dap_framer_next(&c->fr, body, len);
		if (rc == 1)
			return 1;
		if (rc < 0) {
			errbuf_set(err, errlen, "from agent: %s",
				dap_strerror(rc));
			if (rc != -ENOMEM)
				c->failed = rc;
			return rc;
		}
		rc = wait_fd(c->fd, POLLIN, deadline);
		if (rc < 0) {
			errbuf_set(err, errlen, "poll: %s", strerror(-rc));
			return rc;
		}
		if (rc == 0)
			return 0;
		n = recv(c->fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			errbuf_set(err, errlen, "the agent closed the connection");
			return c->failed = DAP_ECLOSED;
		}
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == EWOULDBLOCK)
				continue;
			rc = -errno;
			errbuf_set(err, errlen, "recv: %s", strerror(errno));
			return c->failed = rc;
		}
		rc = dap_framer_feed(&c->fr, buf, (size_t)n);
		/* A feed error still lets earlier messages out: the next
		 * dap_framer_next call reports it after them. */
		(void)rc;
	}
}

int dap_client_read(struct dap_client *c, int timeout_ms,
		    struct dap_message **msg, char **raw, size_t *rawlen,
		    char *err, size_t errlen)
{
	char *body = NULL;
	size_t len = 0;
	int rc;

	if (msg)
		*msg = NULL;
	if (raw)
		*raw = NULL;
	rc = next_body(c, deadline_of(timeout_ms), &body, &len, err, errlen);
	if (rc <= 0)
		return rc;
	if (msg) {
		char perr[160];

		rc = dap_message_parse(body, len, msg, NULL, NULL, perr,
				       sizeof(perr));
		if (rc < 0) {
			errbuf_set(err, errlen, "bad message from agent: %s",
				perr);
			free(body);
			return rc;
		}
	}
	if (raw) {
		*raw = body;
		if (rawlen)
			*rawlen = len;
	} else {
		free(body);
	}
	return 0;
}

int dap_client_wait(struct dap_client *c, int64_t seq, int timeout_ms,
		    struct dap_message **resp, char *err, size_t errlen)
{
	int64_t deadline = deadline_of(timeout_ms);

	*resp = NULL;
	for (;;) {
		struct dap_message *m = NULL;
		int rc = dap_client_read(c, left_ms(deadline), &m, NULL, NULL,
					 err, errlen);

		if (rc < 0)
			return rc;
		if (!m) {
			errbuf_set(err, errlen,
				"no response to request %lld in %d ms",
				(long long)seq, timeout_ms);
			return DAP_ETIMEDOUT;
		}
		if (m->type == DAP_RESPONSE && m->request_seq == seq) {
			*resp = m;
			return 0;
		}
		if (m->type == DAP_EVENT && c->on_event)
			c->on_event(m, c->on_event_arg);
		dap_message_free(m);
	}
}

int dap_client_request(struct dap_client *c, const char *command, cJSON *args,
		       int timeout_ms, struct dap_message **resp, char *err,
		       size_t errlen)
{
	int64_t seq = dap_client_send(c, command, args, err, errlen);

	*resp = NULL;
	if (seq < 0)
		return (int)seq;
	return dap_client_wait(c, seq, timeout_ms, resp, err, errlen);
}
