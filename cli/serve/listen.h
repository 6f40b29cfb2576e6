/*
 * listen: what `probing web` and `probing exporter` share of where they
 * listen: "HOST:PORT" (or "[V6]:PORT") taken apart, and whether an
 * address is loopback (beyond it, each says who can reach it).
 */
#ifndef CLI_LISTEN_H
#define CLI_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

/* listen into host and port; 0, or -1 when it is not HOST:PORT. */
int listen_split(const char *listen, char *host, size_t hostlen, char *port,
		 size_t portlen);

/* 1 when sa is a loopback address (127/8, ::1). */
int listen_loopback(const struct sockaddr *sa);

#endif
