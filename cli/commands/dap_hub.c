/*
 * dap_hub: how the ranks' debug sessions of one job hear of each other.
 * See dap_hub.h.
 */
#include "dap_hub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct peer {
	int fd;
	long long rank;
	size_t have;
	char buf[DAP_HUB_LINE_MAX];
};

struct dap_hub {
	int fd;
	long long deaf_until; /* accept() failed (EMFILE...): the listener
			       * is not polled until then (ms, monotonic),
			       * or until a peer goes */
	struct peer *peers;
	int npeers;
};

/* Accepts and lines taken in one dap_hub_ready(): the editor's messages
 * wait no longer than that much work. */
#define TURN_MAX 32
#define DEAF_MS 1000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static socklen_t address(const char *name, struct sockaddr_un *sa)
{
	size_t len = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (len < 2 || name[0] != '@' || len > sizeof(sa->sun_path))
		return 0;
	memcpy(sa->sun_path + 1, name + 1, len - 1); /* sun_path[0]: 0 */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

/* Is the process at the other end of fd this user's? */
static int same_user(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
	       cred.uid == geteuid();
}

int dap_hub_new(struct dap_hub **out, char *name, size_t namelen)
{
	static unsigned serial;
	struct dap_hub *h = calloc(1, sizeof(*h));
	struct sockaddr_un sa;
	socklen_t len;
	int rc;

	*out = NULL;
	if (!h)
		return -ENOMEM;
	snprintf(name, namelen, "@probing-job-%d-%u", (int)getpid(), serial++);
	h->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->fd < 0)
		goto fail;
	len = address(name, &sa);
	if (!len) {
		errno = ENAMETOOLONG;
		goto fail;
	}
	if (bind(h->fd, (struct sockaddr *)&sa, len) < 0 ||
	    listen(h->fd, 64) < 0)
		goto fail;
	*out = h;
	return 0;
fail:
	rc = -errno;
	if (h->fd >= 0)
		close(h->fd);
	free(h);
	return rc;
}

int dap_hub_pollfds(const struct dap_hub *h, struct pollfd *p, int max)
{
	int n = 0;

	if (max > 0)
		p[n++] = (struct pollfd){.fd = now_ms() < h->deaf_until ? -1
									: h->fd,
					 .events = POLLIN};
	for (int i = 0; i < h->npeers && n < max; i++)
		p[n++] = (struct pollfd){.fd = h->peers[i].fd,
					 .events = POLLIN};
	return n;
}

static void hang_up(struct peer *p)
{
	close(p->fd);
	p->fd = -1;
}

static void accept_peers(struct dap_hub *h)
{
	for (int turn = 0; turn < TURN_MAX; turn++) {
		int fd = accept4(h->fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct peer *more;

		if (fd < 0) {
			/* Out of descriptors: the connection stays queued and
			 * the listener readable; not polled again (a spin)
			 * until a peer goes. */
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				h->deaf_until = now_ms() + DEAF_MS;
			return;
		}
		if (!same_user(fd) || h->npeers >= DAP_HUB_PEERS_MAX) {
			close(fd);
			continue;
		}
		more = realloc(h->peers, (h->npeers + 1) * sizeof(*more));
		if (!more) {
			close(fd);
			continue;
		}
		h->peers = more;
		h->peers[h->npeers++] = (struct peer){.fd = fd, .rank = -1};
	}
}

/* Reads what a peer sent; its whole lines to heard().  A peer that
 * closed, failed or sent a line too long is hung up. */
static void read_peer(struct peer *p, dap_hub_heard_fn heard, void *arg)
{
	char line[DAP_HUB_LINE_MAX];
	int rc = 0;

	for (int turn = 0; turn < TURN_MAX &&
			   (rc = dap_hub_hear(p->fd, p->buf, &p->have, line,
					      sizeof(line))) == 1;
	     turn++) {
		long long rank;

		if (sscanf(line, "rank %lld", &rank) == 1 && rank >= 0)
			p->rank = rank;
		else if (p->rank >= 0)
			heard(arg, p->rank, line);
	}
	if (rc < 0)
		hang_up(p);
}

void dap_hub_ready(struct dap_hub *h, const struct pollfd *p, int n,
		   dap_hub_heard_fn heard, void *arg)
{
	int npeers = h->npeers, kept = 0;

	/* p[i + 1] is peers[i] as dap_hub_pollfds() gave them: the array
	 * is not grown before the peers are read. */
	for (int i = 0; i < npeers && i + 1 < n; i++)
		if (p[i + 1].revents && h->peers[i].fd == p[i + 1].fd)
			read_peer(&h->peers[i], heard, arg);
	for (int i = 0; i < h->npeers; i++)
		if (h->peers[i].fd >= 0)
			h->peers[kept++] = h->peers[i];
	if (kept < h->npeers)
		h->deaf_until = 0; /* a descriptor came free */
	h->npeers = kept;
	if (n > 0 && p[0].revents)
		accept_peers(h);
}

static int say(int fd, const char *line)
{
	char text[DAP_HUB_LINE_MAX + 1];
	int len = snprintf(text, sizeof(text), "%s\n", line);
	ssize_t n;

	if (len < 0 || len >= (int)sizeof(text))
		return -EMSGSIZE;
	n = send(fd, text, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n == len)
		return 0;
	return n < 0 ? -errno : -EAGAIN; /* a part: the line is lost */
}

int dap_hub_tell(struct dap_hub *h, const char *line, long long except)
{
	int told = 0;

	for (int i = 0; i < h->npeers; i++) {
		struct peer *p = &h->peers[i];

		if (p->fd < 0 || p->rank < 0 || p->rank == except)
			continue;
		if (say(p->fd, line) == 0)
			told++;
		else
			hang_up(p); /* reaped at the next dap_hub_ready() */
	}
	return told;
}

int dap_hub_ranks(const struct dap_hub *h)
{
	int n = 0;

	for (int i = 0; i < h->npeers; i++)
		n += h->peers[i].fd >= 0 && h->peers[i].rank >= 0;
	return n;
}

void dap_hub_free(struct dap_hub *h)
{
	if (!h)
		return;
	for (int i = 0; i < h->npeers; i++)
		if (h->peers[i].fd >= 0)
			close(h->peers[i].fd);
	close(h->fd);
	free(h->peers);
	free(h);
}

int dap_hub_join(const char *name, long long rank)
{
	struct sockaddr_un sa;
	socklen_t len = address(name, &sa);
	char line[64];
	int fd, rc = 0;

	if (!len)
		return -EINVAL;
	/* Non-blocking from the start: a unix socket's connect() then
	 * fails at once (EAGAIN) where the hub's backlog is full — another
	 * user's listener under the name that never accepts, say — instead
	 * of holding the bridge before its peer is checked. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, len) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!same_user(fd)) {
		close(fd);
		return -EPERM;
	}
	snprintf(line, sizeof(line), "rank %lld", rank);
	rc = say(fd, line);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int dap_hub_say(int fd, const char *line)
{
	return say(fd, line);
}

int dap_hub_hear(int fd, char *buf, size_t *have, char *line,
		 size_t linelen)
{
	for (;;) {
		char *nl = memchr(buf, '\n', *have);
		ssize_t n;

		if (nl) {
			size_t len = (size_t)(nl - buf);

			if (len >= linelen)
				return -1;
			memcpy(line, buf, len);
			line[len] = '\0';
			*have -= len + 1;
			memmove(buf, nl + 1, *have);
			return 1;
		}
		if (*have >= DAP_HUB_LINE_MAX)
			return -1; /* a line too long */
		n = recv(fd, buf + *have, DAP_HUB_LINE_MAX - *have,
			 MSG_DONTWAIT);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		*have += (size_t)n;
	}
}
