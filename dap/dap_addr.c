/*
 * dap_addr: parsing and formatting agent addresses.
 */
#include "dap_addr.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

static int fail(char *err, size_t errlen, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

static int all_digits(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* Parses n digits as a number in [1, max]; -1 when out of range. */
static long parse_num(const char *s, size_t n, long max)
{
	long v = 0;

	if (!all_digits(s, n))
		return -1;
	for (size_t i = 0; i < n; i++) {
		v = v * 10 + (s[i] - '0');
		if (v > max)
			return -1;
	}
	return v >= 1 ? v : -1;
}

/* Host names, IPv4 and IPv6 literals (with a %zone): no spaces, no
 * control characters, nothing that separates addresses. */
static int host_ok(const char *h, size_t n, int ipv6)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];

		if (c <= ' ' || c >= 0x7f || c == '[' || c == ']' || c == '/' ||
		    c == '@' || (c == ':' && !ipv6))
			return 0;
	}
	return 1;
}

static int parse_tcp(const char *text, struct dap_addr *out, char *err,
		     size_t errlen)
{
	const char *host = text, *port, *colon;
	size_t hlen;
	int ipv6 = 0;
	long p;

	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close)
			return fail(err, errlen,
				    "missing ']' after IPv6 address");
		host = text + 1;
		hlen = (size_t)(close - host);
		if (close[1] != ':')
			return fail(err, errlen,
				    "missing port: use [address]:port");
		port = close + 2;
		ipv6 = 1;
	} else {
		colon = strrchr(text, ':');
		if (!colon)
			return fail(err, errlen,
				    "not an address: use a pid, @name, "
				    "/path or host:port");
		if (memchr(text, ':', (size_t)(colon - text)))
			return fail(err, errlen,
				    "IPv6 addresses need brackets: [::1]:port");
		hlen = (size_t)(colon - text);
		port = colon + 1;
		if (hlen == 0) {
			host = "127.0.0.1";
			hlen = strlen(host);
		}
	}
	if (!host_ok(host, hlen, ipv6))
		return fail(err, errlen, "invalid host name");
	if (!*port)
		return fail(err, errlen, "missing port after ':'");
	p = parse_num(port, strlen(port), 65535);
	if (p < 0)
		return fail(err, errlen,
			    "port must be a number from 1 to 65535");
	out->kind = DAP_ADDR_TCP;
	memcpy(out->host, host, hlen);
	out->host[hlen] = '\0';
	out->port = (int)p;
	return 0;
}

int dap_addr_parse(const char *text, struct dap_addr *out, char *err,
		   size_t errlen)
{
	struct dap_addr a;
	size_t n;
	long pid;
	int rc;

	memset(&a, 0, sizeof(a));
	if (!text || !*text)
		return fail(err, errlen, "empty address");
	n = strnlen(text, DAP_ADDR_TEXT_MAX);
	if (n >= DAP_ADDR_TEXT_MAX)
		return fail(err, errlen, "address too long");

	if (all_digits(text, n)) {
		pid = parse_num(text, n, INT_MAX);
		if (pid < 0)
			return fail(err, errlen, "not a valid pid");
		dap_addr_for_pid((pid_t)pid, out);
		return 0;
	}
	if (text[0] == '@') {
		if (n < 2)
			return fail(err, errlen, "empty abstract socket name");
		if (n > SUN_PATH_MAX) /* '@' becomes the leading NUL */
			return fail(err, errlen,
				    "abstract socket name too long");
		a.kind = DAP_ADDR_UNIX;
		memcpy(a.host, text, n + 1);
		*out = a;
		return 0;
	}
	if (strchr(text, '/')) {
		if (n >= SUN_PATH_MAX)
			return fail(err, errlen, "unix socket path too long");
		a.kind = DAP_ADDR_UNIX;
		memcpy(a.host, text, n + 1);
		*out = a;
		return 0;
	}
	rc = parse_tcp(text, &a, err, errlen);
	if (rc < 0)
		return rc;
	*out = a;
	return 0;
}

void dap_addr_for_pid(pid_t pid, struct dap_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = DAP_ADDR_UNIX;
	out->pid = pid;
	snprintf(out->host, sizeof(out->host), "@probing-%ld", (long)pid);
}

void dap_addr_format(const struct dap_addr *addr, char *out, size_t outlen)
{
	if (!outlen)
		return;
	if (addr->kind == DAP_ADDR_TCP && strchr(addr->host, ':'))
		snprintf(out, outlen, "[%s]:%d", addr->host, addr->port);
	else if (addr->kind == DAP_ADDR_TCP)
		snprintf(out, outlen, "%s:%d", addr->host, addr->port);
	else
		snprintf(out, outlen, "%s", addr->host);
}

int dap_addr_unix_sockaddr(const struct dap_addr *addr,
			   struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)ss;
	size_t n = strnlen(addr->host, sizeof(addr->host));

	if (addr->kind != DAP_ADDR_UNIX || n == 0 || n >= sizeof(addr->host))
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	sun->sun_family = AF_UNIX;
	if (addr->host[0] == '@') {
		/* Abstract: a leading NUL, then the name, no terminator.  The
		 * length counts only the name: the kernel compares all of it.
		 */
		if (n - 1 > sizeof(sun->sun_path) - 1 || n < 2)
			return n < 2 ? -EINVAL : -ENAMETOOLONG;
		memcpy(sun->sun_path + 1, addr->host + 1, n - 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
		return 0;
	}
	if (n >= sizeof(sun->sun_path))
		return -ENAMETOOLONG;
	memcpy(sun->sun_path, addr->host, n + 1);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

int dap_addr_node_line(char *line, const char **addr, long long *rank)
{
	char *save = NULL, *tok[3] = {NULL, NULL, NULL}, *end;
	int k = 0;

	*addr = NULL;
	*rank = -1;
	line[strcspn(line, "#\r\n")] = 0;
	for (char *t = strtok_r(line, " \t", &save); t && k < 3;
	     t = strtok_r(NULL, " \t", &save))
		tok[k++] = t;
	if (k == 0)
		return 0;
	if (k == 3)
		return -EINVAL;
	if (k == 2) {
		errno = 0;
		*rank = strtoll(tok[1], &end, 10);
		if (errno || *end || *rank < 0)
			return -EINVAL;
	}
	*addr = tok[0];
	return 1;
}
