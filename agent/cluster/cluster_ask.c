/*
 * cluster_ask: a DAP request to another agent.  See cluster_ask.h.
 */
#include "cluster_ask.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster_intern.h"
#include "fdown.h"
#include "dap_addr.h"
#include "dap_frame.h"
#include "dap_msg.h"
#include "dap_token.h"

#define ASK_BODY_MAX (64u << 20) /* a response's body at most */

struct conn {
	struct fdown sock;
	struct dap_framer fr;
	double deadline; /* monotonic ms */
};

/* Waits for events on the socket until the deadline: 1 ready, 0 time
 * out, -errno. */
static int wait_for(struct conn *c, short events)
{
	for (;;) {
		double left = c->deadline - cluster_mono_ms();
		struct pollfd p = {c->sock.fd, events, 0};
		int rc;

		if (left <= 0)
			return 0;
		rc = poll(&p, 1, (int)left + 1);
		if (rc < 0 && errno == EINTR)
			continue;
		return rc < 0 ? -errno : rc > 0;
	}
}

static int dial(struct conn *c, const char *addr, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	struct dap_addr a;
	char port[16];
	int fd, rc, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (dap_addr_parse(addr, &a, err, errlen) || a.kind != DAP_ADDR_TCP) {
		if (a.kind != DAP_ADDR_TCP)
			snprintf(err, errlen, "%s is not HOST:PORT", addr);
		return -EINVAL;
	}
	snprintf(port, sizeof(port), "%d", a.port);
	rc = getaddrinfo(a.host, port, &hints, &res);
	if (rc || !res) {
		snprintf(err, errlen, "cannot resolve %s: %s", a.host,
			 gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0 || fdown_take(&c->sock, fd)) {
		freeaddrinfo(res);
		snprintf(err, errlen, "no socket");
		return -EMFILE;
	}
	rc = connect(c->sock.fd, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	if (rc && errno != EINPROGRESS) {
		rc = -errno;
		snprintf(err, errlen, "connect to %s: %s", addr, strerror(-rc));
		return rc;
	}
	if (rc && wait_for(c, POLLOUT) <= 0) {
		snprintf(err, errlen, "connect to %s: no answer in time", addr);
		return -ETIMEDOUT;
	}
	if (!fdown_ours(&c->sock) ||
	    getsockopt(c->sock.fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) ||
	    soerr) {
		snprintf(err, errlen, "connect to %s: %s", addr,
			 strerror(soerr ? soerr : EBADF));
		return -(soerr ? soerr : EBADF);
	}
	return 0;
}

static int send_all(struct conn *c, const char *p, size_t len)
{
	while (len) {
		ssize_t n;

		if (!fdown_ours(&c->sock))
			return -EBADF;
		n = send(c->sock.fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (wait_for(c, POLLOUT) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_request(struct conn *c, int64_t seq, const char *command,
			cJSON *args)
{
	struct dap_message *m = dap_request_new(seq, command, args);
	size_t len;
	char *text = m ? dap_message_encode(m, seq, &len) : NULL;
	int rc = text ? send_all(c, text, len) : -ENOMEM;

	free(text);
	dap_message_free(m);
	return rc;
}

/* The next message whose response answers seq; events skipped. */
static int read_response(struct conn *c, int64_t seq, struct dap_message **out)
{
	char buf[65536];

	for (;;) {
		char *body = NULL;
		size_t len = 0;
		int rc = dap_framer_next(&c->fr, &body, &len);
		struct dap_message *m = NULL;
		ssize_t n;

		if (rc < 0)
			return rc;
		if (rc > 0) {
			rc = dap_message_parse(body, len, &m, NULL, NULL, NULL,
					       0);
			free(body);
			if (rc)
				return rc;
			if (m->type == DAP_RESPONSE && m->request_seq == seq) {
				*out = m;
				return 0;
			}
			dap_message_free(m);
			continue;
		}
		if ((rc = wait_for(c, POLLIN)) <= 0)
			return rc ? rc : -ETIMEDOUT;
		if (!fdown_ours(&c->sock))
			return -EBADF;
		n = recv(c->sock.fd, buf, sizeof(buf), 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		if ((rc = dap_framer_feed(&c->fr, buf, (size_t)n)) < 0)
			return rc;
	}
}

int cluster_ask(const char *addr, const char *token, const char *command,
		cJSON *args, int timeout_ms, cJSON **body, int *success,
		char *err, size_t errlen)
{
	struct conn c = {.sock = {.fd = -1}};
	struct dap_message *resp = NULL;
	cJSON *init = cJSON_CreateObject();
	int rc;

	*body = NULL;
	*success = 0;
	c.deadline = cluster_mono_ms() + timeout_ms;
	dap_framer_init(&c.fr, ASK_BODY_MAX);
	if (init) {
		cJSON_AddStringToObject(init, "clientID", "probing-agent");
		if (token && *token)
			cJSON_AddStringToObject(init, DAP_TOKEN_ARG, token);
	}
	rc = dial(&c, addr, err, errlen);
	if (!rc) {
		rc = send_request(&c, 1, "initialize", init);
		init = NULL;
	}
	if (!rc)
		rc = read_response(&c, 1, &resp);
	if (!rc && !resp->success) {
		snprintf(err, errlen, "initialize: %s",
			 resp->message ? resp->message : "refused");
		rc = -EACCES;
	}
	dap_message_free(resp);
	resp = NULL;
	if (!rc) {
		rc = send_request(&c, 2, command, args);
		args = NULL;
	}
	if (!rc)
		rc = read_response(&c, 2, &resp);
	if (!rc) {
		*success = resp->success;
		if (!resp->success)
			snprintf(err, errlen, "%s",
				 resp->message ? resp->message : "failed");
		*body = resp->body ? cJSON_DetachItemViaPointer(resp->root,
								resp->body)
				   : NULL;
	} else if (!err[0] || rc == -ETIMEDOUT || rc == -ECONNRESET ||
		   rc == -EBADF) {
		snprintf(err, errlen, "%s: %s", addr,
			 rc == -ETIMEDOUT ? "no answer in time"
			 : rc < -1000	  ? dap_strerror(rc)
					  : strerror(-rc));
	}
	dap_message_free(resp);
	cJSON_Delete(init);
	cJSON_Delete(args);
	dap_framer_release(&c.fr);
	fdown_close(&c.sock);
	return rc;
}
