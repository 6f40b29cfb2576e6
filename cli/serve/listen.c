/*
 * listen: see listen.h.
 */
#include "serve/listen.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int listen_split(const char *listen, char *host, size_t hostlen, char *port,
		 size_t portlen)
{
	const char *colon = strrchr(listen, ':');
	size_t n;

	if (!colon || !colon[1] || strlen(colon + 1) >= portlen)
		return -1;
	n = (size_t)(colon - listen);
	if (n >= 2 && listen[0] == '[' && listen[n - 1] == ']') {
		listen++;
		n -= 2;
	}
	if (!n || n >= hostlen)
		return -1;
	memcpy(host, listen, n);
	host[n] = '\0';
	snprintf(port, portlen, "%s", colon + 1);
	return 0;
}

int listen_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)
				      ->sin_addr.s_addr) >>
			24) == 127;
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(
		       &((const struct sockaddr_in6 *)sa)->sin6_addr);
}
