/*
 * server_sock: the server's listening sockets and the peer check of the
 * unix socket.
 *
 * Sockets are made non-blocking and close-on-exec.  A TCP listener is
 * bound only once the agent has a token (auth_token_ensure() makes one
 * first), on loopback too: every local user can connect there.  The one
 * exception: loopback while the user chose no token (auth_tokenless()).
 *
 * Threads: any; nothing here touches the loop or the server.
 */
#ifndef SERVER_SOCK_H
#define SERVER_SOCK_H

#include <stddef.h>
#include <sys/types.h>

struct dap_addr;
struct fdown;

/* The process that holds unix address addr (listening there): its pid,
 * or 0 when none can be reached or told. */
pid_t server_sock_unix_holder(const struct dap_addr *addr);

/*
 * Binds and listens on a unix address (abstract or a path) into *out, an
 * owned descriptor from the moment the socket exists (fdown.h): a number
 * the program takes over meanwhile (closerange, then its own file there)
 * fails the bind and is left to the program, never closed.  0, or -errno
 * with err (out->fd -1).
 */
int server_sock_bind_unix(const struct dap_addr *addr, struct fdown *out,
			  char *err, size_t errlen);

/* The same on the first address host resolves to that works, with the
 * canonical address in canon; -EPERM: no token could be had (err says
 * why and how to give one). */
int server_sock_bind_tcp(const struct dap_addr *addr, struct fdown *out,
			 char *canon, size_t canonlen, char *err,
			 size_t errlen);

/* Is the peer of unix socket fd our uid or root (SO_PEERCRED)?  1 or 0. */
int server_sock_peer_allowed(int fd);

#endif
