/*
 * dap_addr: where an agent listens.
 *
 * Text forms (what the CLI's -t, PROBING_LISTEN and init(listen=) take):
 *   "1234"            the agent of pid 1234: abstract unix socket @probing-1234
 *   "@name"           an abstract unix socket
 *   "/path/sock"      a unix socket in the file system
 *   "host:port"       TCP; host may be a name, IPv4 or [IPv6]
 *   ":port"           TCP on 127.0.0.1
 *
 * All digits is always a pid (so a bare port cannot be written: use
 * ":port" or "127.0.0.1:port").  Any text with a '/' is a path (so
 * "./agent.sock" works).  Unix paths must fit sun_path with their NUL
 * (< 108 bytes), abstract names without the '@' at most 107 bytes; ports
 * are 1..65535; IPv6 hosts need brackets and are stored without them.
 */
#ifndef DAP_ADDR_H
#define DAP_ADDR_H

#include <sys/socket.h>
#include <sys/types.h>

#define DAP_ADDR_TEXT_MAX 256

enum dap_addr_kind { DAP_ADDR_UNIX = 1, DAP_ADDR_TCP };

struct dap_addr {
	enum dap_addr_kind kind;
	pid_t pid;                    /* > 0 when given as a pid */
	char host[DAP_ADDR_TEXT_MAX]; /* TCP host, or unix path ("@x" = abstract) */
	int port;
};

/* Parses text.  Returns 0, or -EINVAL with a reason in err. */
int dap_addr_parse(const char *text, struct dap_addr *out, char *err,
		   size_t errlen);

/* The agent address of pid: @probing-<pid>. */
void dap_addr_for_pid(pid_t pid, struct dap_addr *out);

/* Writes the canonical text of addr ("@probing-12", "127.0.0.1:9922"). */
void dap_addr_format(const struct dap_addr *addr, char *out, size_t outlen);

/*
 * Fills a sockaddr for a unix address (abstract when host starts with '@').
 * Returns 0 and sets *len, or -ENAMETOOLONG (-EINVAL when addr is not a
 * unix address or its name is empty).  An abstract address's length counts
 * its name only (offsetof(sun_path) + 1 + strlen(name)), as the kernel
 * compares every byte up to it.
 */
int dap_addr_unix_sockaddr(const struct dap_addr *addr,
			   struct sockaddr_storage *ss, socklen_t *len);

/*
 * Splits one line of a node file (PROBING_NODES, `cluster --nodes`):
 * "ADDR [RANK]", '#' to the end of the line a comment.  Cuts line in
 * place; *addr points into it, *rank is -1 when not given.  Returns 1 for
 * a node, 0 for a blank or comment line, -EINVAL for anything else (more
 * than two words, a rank that is not a number >= 0).  The address itself
 * is not checked: callers parse it with dap_addr_parse().
 */
int dap_addr_node_line(char *line, const char **addr, long long *rank);

#endif
