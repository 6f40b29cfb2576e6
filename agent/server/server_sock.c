/*
 * server_sock: listening sockets and peer checks.  See server_sock.h.
 */
#include "server_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/auth.h"
#include "fdown.h"
#include "dap_addr.h"

pid_t server_sock_unix_holder(const struct dap_addr *addr)
{
	struct sockaddr_storage ss;
	struct ucred cr = {0};
	socklen_t len, crlen = sizeof(cr);
	struct fdown s;

	if (dap_addr_unix_sockaddr(addr, &ss, &len))
		return 0;
	if (fdown_take(&s, socket(AF_UNIX,
				  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
				  0)))
		return 0;
	if (connect(s.fd, (struct sockaddr *)&ss, len) < 0 ||
	    getsockopt(s.fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0)
		cr.pid = 0;
	fdown_close(&s);
	return cr.pid;
}

/* A new socket into *out: 0, or -errno with err. */
static int new_socket(int family, struct fdown *out, char *err,
		      size_t errlen)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int rc = fd < 0 ? -errno : fdown_take(out, fd);

	if (rc)
		snprintf(err, errlen, "socket: %s", strerror(-rc));
	return rc;
}

int server_sock_bind_unix(const struct dap_addr *addr, struct fdown *out,
			  char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc;

	out->fd = -1;
	rc = dap_addr_unix_sockaddr(addr, &ss, &len);
	if (rc) {
		snprintf(err, errlen, "unix address too long: %s", addr->host);
		return rc;
	}
	rc = new_socket(AF_UNIX, out, err, errlen);
	if (rc)
		return rc;
	if (bind(out->fd, (struct sockaddr *)&ss, len) < 0 ||
	    listen(out->fd, 16) < 0) {
		rc = -errno;
		if (rc == -EADDRINUSE)
			snprintf(err, errlen,
				 "cannot listen on %s: another process holds "
				 "that name (it bound it first; `ss -xlp | "
				 "grep %s` tells which); clients check who "
				 "listens and will not talk to it",
				 addr->host, addr->host);
		else
			snprintf(err, errlen, "cannot listen on %s: %s",
				 addr->host, strerror(-rc));
		fdown_close(out);
		return rc;
	}
	return 0;
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return 0;
}

/* Whether a listener on sa may be had now: 1 when the agent has a token
 * (made first when need be) or the user chose none and sa is loopback;
 * else 0 with why in err.  Every local user can reach loopback, so it
 * gets no exception of its own. */
static int token_for(const struct sockaddr *sa, const char *host,
		     char *err, size_t errlen)
{
	char why[512];

	if (is_loopback(sa) && auth_tokenless())
		return 1;
	if (auth_token_ensure(why, sizeof(why)) == 0)
		return 1;
	snprintf(err, errlen,
		 "refusing to listen on %s (TCP%s) without a token: %s; "
		 "give one (PROBING_TOKEN, probing.init(token=...)) or, for "
		 "loopback only, say PROBING_TOKEN=" AUTH_TOKEN_NONE,
		 host, is_loopback(sa) ? ": every local user can reach loopback"
				       : ", not loopback",
		 why);
	return 0;
}

/* Listens on ai into out: 0, or -errno with why in err (out closed). */
static int listen_on(const struct addrinfo *ai, const struct dap_addr *addr,
		     struct fdown *out, char *err, size_t errlen)
{
	int rc, one = 1;

	/* The token must exist before the first client comes. */
	if (!token_for(ai->ai_addr, addr->host, err, errlen))
		return -EPERM;
	if ((rc = new_socket(ai->ai_family, out, err, errlen)))
		return rc;
	setsockopt(out->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(out->fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
	    listen(out->fd, 16) == 0)
		return 0;
	rc = -errno;
	snprintf(err, errlen, "cannot listen on %s:%d: %s", addr->host,
		 addr->port, strerror(-rc));
	fdown_close(out);
	return rc;
}

int server_sock_bind_tcp(const struct dap_addr *addr, struct fdown *out,
			 char *canon, size_t canonlen, char *err,
			 size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char port[16];
	int rc;

	out->fd = -1;
	snprintf(port, sizeof(port), "%d", addr->port);
	rc = getaddrinfo(addr->host, port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve %s: %s", addr->host,
			 gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	snprintf(err, errlen, "no address for %s", addr->host);
	/* One socket: a name's IPv4 address first.  getaddrinfo puts ::1
	 * before 127.0.0.1 for "localhost" where /etc/hosts has both
	 * (Debian 13), and a listener on [::1] alone refuses the clients
	 * that reach localhost by 127.0.0.1.  "[::1]:P" still listens on
	 * IPv6. */
	for (int pass = 0; pass < 2 && out->fd < 0; pass++)
		for (ai = res; ai && out->fd < 0; ai = ai->ai_next)
			if ((ai->ai_family == AF_INET) == (pass == 0))
				rc = listen_on(ai, addr, out, err, errlen);
	freeaddrinfo(res);
	if (out->fd < 0)
		return rc;
	dap_addr_format(addr, canon, canonlen);
	return 0;
}

int server_sock_peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return 0;
	return cred.uid == geteuid() || cred.uid == 0;
}
