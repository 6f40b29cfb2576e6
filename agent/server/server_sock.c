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
#include "core/fdown.h"
#include "dap_addr.h"

pid_t server_sock_unix_holder(const struct dap_addr *addr)
{
	struct sockaddr_storage ss;
	struct ucred cr = {0};
	socklen_t len, crlen = sizeof(cr);
	int fd;

	if (dap_addr_unix_sockaddr(addr, &ss, &len))
		return 0;
	fd = fdown_new(
		socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0)
		cr.pid = 0;
	close(fd);
	return cr.pid;
}

int server_sock_bind_unix(const struct dap_addr *addr, char *err,
			  size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, rc;

	rc = dap_addr_unix_sockaddr(addr, &ss, &len);
	if (rc) {
		snprintf(err, errlen, "unix address too long: %s", addr->host);
		return rc;
	}
	fd = fdown_new(
		socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (fd < 0) {
		rc = fd == -1 ? -errno : fd;
		snprintf(err, errlen, "socket: %s", strerror(-rc));
		return rc;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 16) < 0) {
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
				 addr->host, strerror(errno));
		close(fd);
		return rc;
	}
	return fd;
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

int server_sock_bind_tcp(const struct dap_addr *addr, char *canon,
			 size_t canonlen, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	char port[16], why[512];
	int fd = -1, rc, one = 1, token = 0;

	snprintf(port, sizeof(port), "%d", addr->port);
	rc = getaddrinfo(addr->host, port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve %s: %s", addr->host,
			 gai_strerror(rc));
		return -EINVAL;
	}
	rc = -EADDRNOTAVAIL;
	snprintf(err, errlen, "no address for %s", addr->host);
	for (ai = res; ai; ai = ai->ai_next) {
		if (!is_loopback(ai->ai_addr) && !token) {
			/* Other machines may connect: only with the token,
			 * which must exist before the first of them. */
			if (auth_token_ensure(why, sizeof(why))) {
				snprintf(err, errlen,
					 "refusing to listen on %s (not "
					 "loopback) without a token: %s",
					 addr->host, why);
				rc = -EPERM;
				continue;
			}
			token = 1;
		}
		fd = fdown_new(socket(
			ai->ai_family,
			ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 16) == 0)
			break;
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s:%d: %s", addr->host,
			 addr->port, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return rc;
	dap_addr_format(addr, canon, canonlen);
	return fd;
}

int server_sock_peer_allowed(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return 0;
	return cred.uid == geteuid() || cred.uid == 0;
}
