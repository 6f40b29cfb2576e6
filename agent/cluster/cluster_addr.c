/*
 * cluster_addr: see cluster_addr.h.
 */
#include "cluster_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdown.h"

int cluster_listen_host_canon(const char *text, char *canon, size_t canonlen,
			      char *err, size_t errlen)
{
	unsigned char buf[sizeof(struct in6_addr)];

	if (!*text)
		text = "auto";
	if (strcmp(text, "auto") && strcmp(text, "loopback") &&
	    strcmp(text, "route") && inet_pton(AF_INET, text, buf) != 1 &&
	    inet_pton(AF_INET6, text, buf) != 1) {
		snprintf(err, errlen,
			 "'%s': give auto, loopback, route or an "
			 "IP address",
			 text);
		return -EINVAL;
	}
	snprintf(canon, canonlen, "%s", text);
	return 0;
}

int cluster_addr_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (!strcmp(host, "localhost"))
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6) ||
		       (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
	return 0;
}

int cluster_addr_is_any(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (inet_pton(AF_INET, host, &a4) == 1)
		return a4.s_addr == htonl(INADDR_ANY);
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_UNSPECIFIED(&a6);
	return 0;
}

static int sockaddr_text(const struct sockaddr *sa, char *out, size_t outlen)
{
	const void *a;

	if (sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)sa)->sin_addr;
	else if (sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	else
		return -EAFNOSUPPORT;
	return inet_ntop(sa->sa_family, a, out, (socklen_t)outlen) ? 0 : -errno;
}

/* The first non-loopback address of an interface that is up (IPv4
 * first), into out.  0 or -ENOENT. */
static int first_address(char *out, size_t outlen)
{
	struct ifaddrs *ifs, *i;
	int rc = -ENOENT;

	if (getifaddrs(&ifs) < 0)
		return -errno;
	for (int fam = AF_INET; rc && fam;
	     fam = fam == AF_INET ? AF_INET6 : 0) {
		for (i = ifs; i && rc; i = i->ifa_next) {
			char text[INET6_ADDRSTRLEN];

			if (!i->ifa_addr || i->ifa_addr->sa_family != fam ||
			    !(i->ifa_flags & IFF_UP) ||
			    (i->ifa_flags & IFF_LOOPBACK))
				continue;
			if (fam == AF_INET6 &&
			    IN6_IS_ADDR_LINKLOCAL(
				    &((struct sockaddr_in6 *)i->ifa_addr)
					     ->sin6_addr))
				continue; /* needs a scope id to be reached */
			if (sockaddr_text(i->ifa_addr, text, sizeof(text)) ==
				    0 &&
			    !cluster_addr_is_loopback(text)) {
				snprintf(out, outlen, "%s", text);
				rc = 0;
			}
		}
	}
	freeifaddrs(ifs);
	return rc;
}

/* The local address of the route to master, into out (CLUSTER_HOST_MAX);
 * a loopback one is replaced by the first address of an interface. */
static int route_to(const char *master, int port, char *out, char *err,
		    size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char sport[16];
	struct fdown s = {.fd = -1};
	int fd, rc;

	snprintf(sport, sizeof(sport), "%d", port);
	rc = getaddrinfo(master, sport, &hints, &res);
	if (rc || !res) {
		snprintf(err, errlen, "cannot resolve MASTER_ADDR %s: %s",
			 master, rc ? gai_strerror(rc) : "no address");
		return -EHOSTUNREACH;
	}
	/* A UDP connect picks the route and the source address; nothing is
	 * sent. */
	fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	rc = fd < 0 ? -errno : fdown_take(&s, fd);
	if (!rc && connect(s.fd, res->ai_addr, res->ai_addrlen) < 0)
		rc = -errno;
	if (!rc && getsockname(s.fd, (struct sockaddr *)&ss, &sl) < 0)
		rc = -errno;
	if (!rc)
		rc = sockaddr_text((struct sockaddr *)&ss, out,
				   CLUSTER_HOST_MAX);
	fdown_close(&s);
	freeaddrinfo(res);
	if (rc) {
		snprintf(err, errlen, "no route to MASTER_ADDR %s: %s", master,
			 strerror(-rc));
		return rc;
	}
	if (cluster_addr_is_loopback(out) &&
	    first_address(out, CLUSTER_HOST_MAX)) {
		snprintf(err, errlen,
			 "MASTER_ADDR %s is reached through "
			 "loopback and no interface has another address",
			 master);
		return -EADDRNOTAVAIL;
	}
	return 0;
}

/* 1 when the job runs on this host only. */
static int one_host(const char *master, int64_t world, int64_t local_world)
{
	if (local_world >= 1)
		return local_world >= world;
	return cluster_addr_is_loopback(master);
}

int cluster_addr_choose(const char *setting, const char *master,
			int master_port, int64_t world, int64_t local_world,
			char *bind, char *adv, int *remote, char *err,
			size_t errlen)
{
	int rc;

	if (!*setting || !strcmp(setting, "auto"))
		setting = one_host(master, world, local_world) ? "loopback"
							       : "route";
	*remote = 0;
	if (!strcmp(setting, "loopback") || cluster_addr_is_loopback(setting)) {
		snprintf(bind, CLUSTER_HOST_MAX, "%s",
			 strcmp(setting, "loopback") ? setting : "127.0.0.1");
		snprintf(adv, CLUSTER_HOST_MAX, "%s", bind);
		return 0;
	}
	*remote = 1;
	if (!strcmp(setting, "route") || cluster_addr_is_any(setting)) {
		rc = route_to(master, master_port, adv, err, errlen);
		if (rc)
			return rc;
		snprintf(bind, CLUSTER_HOST_MAX, "%s",
			 strcmp(setting, "route") ? setting : adv);
		return 0;
	}
	snprintf(bind, CLUSTER_HOST_MAX, "%s", setting);
	snprintf(adv, CLUSTER_HOST_MAX, "%s", setting);
	return 0;
}
