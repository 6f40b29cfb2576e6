/*
 * tcpstore: see tcpstore.h.
 */
#include "tcpstore.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fdown.h"

#define VALIDATE_MAGIC 0x3C85F7CEu

enum { Q_VALIDATE, Q_SET, Q_COMPARE_SET, Q_GET, Q_CHECK };

/* The query-type byte of each query in each generation (-1: none). */
static const int qtype[3][5] = {
	[TCPSTORE_PROTO_1] = {-1, 0, 1, 2, 4},
	[TCPSTORE_PROTO_2] = {0, 1, 2, 3, 5},
};

struct tcpstore {
	struct fdown sock; /* checked before each send and recv */
	enum tcpstore_proto proto;
	int timeout_ms;
};

/* A growing output buffer; a failed append leaves it marked. */
struct obuf {
	unsigned char *p;
	size_t len, cap;
	int oom;
};

static void put(struct obuf *b, const void *data, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		unsigned char *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void put_u8(struct obuf *b, int v)
{
	unsigned char c = (unsigned char)v;

	put(b, &c, 1);
}

static void put_u64(struct obuf *b, uint64_t v)
{
	put(b, &v, sizeof(v)); /* host order, as torch sends it */
}

static void put_str(struct obuf *b, const void *s, size_t n)
{
	put_u64(b, n);
	put(b, s, n);
}

int tcpstore_proto_for(const char *v, enum tcpstore_proto *out)
{
	int major, minor;

	if (!v || sscanf(v, "%d.%d", &major, &minor) != 2 || major < 1)
		return -ENOTSUP;
	*out = major > 2 || (major == 2 && minor >= 2) ? TCPSTORE_PROTO_2
						       : TCPSTORE_PROTO_1;
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Waits for events on fd until deadline (ms).  0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, double deadline)
{
	struct pollfd p = {.fd = fd, .events = events};

	for (;;) {
		double left = deadline - now_ms();
		int rc;

		if (left <= 0)
			return -ETIMEDOUT;
		rc = poll(&p, 1, (int)left + 1);
		if (rc > 0)
			return 0;
		if (rc == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_all(struct tcpstore *ts, const void *data, size_t n,
		    double deadline)
{
	const unsigned char *p = data;

	while (n > 0) {
		ssize_t w;

		/* A number the program closed and reused is not written. */
		if (!fdown_ours(&ts->sock))
			return -EBADF;
		w = send(ts->sock.fd, p, n, MSG_NOSIGNAL);

		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int rc = wait_fd(ts->sock.fd, POLLOUT, deadline);
			if (rc)
				return rc;
			continue;
		}
		return w < 0 ? -errno : -EPIPE;
	}
	return 0;
}

static int recv_all(struct tcpstore *ts, void *data, size_t n, double deadline)
{
	unsigned char *p = data;

	while (n > 0) {
		ssize_t r;

		/* Nor read: the program's data would be taken. */
		if (!fdown_ours(&ts->sock))
			return -EBADF;
		r = recv(ts->sock.fd, p, n, 0);

		if (r > 0) {
			p += r;
			n -= (size_t)r;
			continue;
		}
		if (r == 0)
			return -ECONNRESET; /* the store hung up */
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			int rc = wait_fd(ts->sock.fd, POLLIN, deadline);
			if (rc)
				return rc;
			continue;
		}
		return -errno;
	}
	return 0;
}

static int flush(struct tcpstore *ts, struct obuf *b, double deadline)
{
	int rc = b->oom ? -ENOMEM : send_all(ts, b->p, b->len, deadline);

	free(b->p);
	memset(b, 0, sizeof(*b));
	return rc;
}

static int fail(int rc, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: %s", what,
		 rc == -ECONNRESET ? "the store closed the connection"
				   : strerror(-rc));
	return rc;
}

/* Connects *s to ai within deadline: 0, or -errno (s->fd -1). */
static int connect_one(const struct addrinfo *ai, double deadline,
		       struct fdown *s)
{
	int fd, one = 1, soerr = 0, rc;
	socklen_t sl = sizeof(soerr);

	fd = socket(ai->ai_family,
		    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		s->fd = -1;
		return -errno;
	}
	if ((rc = fdown_take(s, fd)))
		return rc;
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(s->fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return 0;
	rc = errno == EINPROGRESS ? 0 : -errno;
	while (rc == 0) {
		struct pollfd p = {.fd = s->fd, .events = POLLOUT};
		double left = deadline - now_ms();

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		rc = poll(&p, 1, (int)left + 1);
		if (rc < 0)
			rc = errno == EINTR ? 0 : -errno;
		else if (rc > 0)
			break;
	}
	if (rc > 0) {
		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		rc = -soerr;
	}
	if (rc)
		fdown_close(s);
	return rc;
}

int tcpstore_connect(const char *host, int port, enum tcpstore_proto proto,
		     int timeout_ms, struct tcpstore **out, char *err,
		     size_t errlen)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res, *ai;
	double deadline = now_ms() + timeout_ms;
	struct tcpstore *ts;
	struct fdown sock = {.fd = -1};
	char sport[16];
	int rc, crc = -ECONNREFUSED;

	*out = NULL;
	if (proto != TCPSTORE_PROTO_1 && proto != TCPSTORE_PROTO_2) {
		snprintf(err, errlen, "unknown store protocol %d", proto);
		return -EINVAL;
	}
	snprintf(sport, sizeof(sport), "%d", port);
	rc = getaddrinfo(host, sport, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve %s: %s", host,
			 gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		crc = connect_one(ai, deadline, &sock);
		if (crc == 0)
			break;
	}
	freeaddrinfo(res);
	if (crc) {
		snprintf(err, errlen,
			 "cannot connect to the store at %s:%d: %s", host, port,
			 strerror(-crc));
		return crc;
	}
	ts = calloc(1, sizeof(*ts));
	if (!ts) {
		fdown_close(&sock);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ts->sock = sock;
	ts->proto = proto;
	ts->timeout_ms = timeout_ms;
	if (proto == TCPSTORE_PROTO_2) {
		struct obuf b = {0};
		uint32_t magic = VALIDATE_MAGIC;

		put_u8(&b, qtype[proto][Q_VALIDATE]);
		put(&b, &magic, sizeof(magic));
		rc = flush(ts, &b, deadline);
		if (rc) {
			tcpstore_free(ts);
			return fail(rc, "store validation", err, errlen);
		}
	}
	*out = ts;
	return 0;
}

void tcpstore_free(struct tcpstore *ts)
{
	if (!ts)
		return;
	fdown_close(&ts->sock);
	free(ts);
}

static int key_ok(const char *key, char *err, size_t errlen)
{
	if (!key || !*key || strlen(key) > TCPSTORE_KEY_MAX) {
		snprintf(err, errlen, "bad store key");
		return -EINVAL;
	}
	return 0;
}

int tcpstore_set(struct tcpstore *ts, const char *key, const void *value,
		 size_t len, char *err, size_t errlen)
{
	struct obuf b = {0};
	int rc;

	if ((rc = key_ok(key, err, errlen)))
		return rc;
	if (len > TCPSTORE_VALUE_MAX) {
		snprintf(err, errlen, "store value too long");
		return -E2BIG;
	}
	put_u8(&b, qtype[ts->proto][Q_SET]);
	put_str(&b, key, strlen(key));
	put_str(&b, value, len);
	rc = flush(ts, &b, now_ms() + ts->timeout_ms);
	return rc ? fail(rc, "store set", err, errlen) : 0;
}

int tcpstore_compare_set(struct tcpstore *ts, const char *key,
			 const char *expected, const char *desired,
			 char **value, char *err, size_t errlen)
{
	double deadline = now_ms() + ts->timeout_ms;
	struct obuf b = {0};
	uint64_t len;
	int rc;

	*value = NULL;
	if ((rc = key_ok(key, err, errlen)))
		return rc;
	if (strlen(expected) > TCPSTORE_VALUE_MAX ||
	    strlen(desired) > TCPSTORE_VALUE_MAX) {
		snprintf(err, errlen, "store value too long");
		return -E2BIG;
	}
	put_u8(&b, qtype[ts->proto][Q_COMPARE_SET]);
	put_str(&b, key, strlen(key));
	put_str(&b, expected, strlen(expected));
	put_str(&b, desired, strlen(desired));
	rc = flush(ts, &b, deadline);
	if (!rc)
		rc = recv_all(ts, &len, sizeof(len), deadline);
	if (!rc && len > TCPSTORE_VALUE_MAX)
		rc = -E2BIG;
	if (!rc && !(*value = malloc(len + 1)))
		rc = -ENOMEM;
	if (!rc)
		rc = recv_all(ts, *value, len, deadline);
	if (rc) {
		free(*value);
		*value = NULL;
		return fail(rc, "store compare-set", err, errlen);
	}
	(*value)[len] = 0;
	return 0;
}

/* Sends n requests of type q (Q_CHECK or Q_GET), one per key, in one
 * write; what names them in errors.  0 or -errno with err. */
static int send_each(struct tcpstore *ts, int q, const char *const *keys,
		     size_t n, double deadline, const char *what, char *err,
		     size_t errlen)
{
	struct obuf b = {0};
	int rc;

	if (n > TCPSTORE_BATCH_MAX) {
		snprintf(err, errlen, "too many keys at once");
		return -E2BIG;
	}
	for (size_t i = 0; i < n; i++) {
		if ((rc = key_ok(keys[i], err, errlen))) {
			free(b.p);
			return rc;
		}
		put_u8(&b, qtype[ts->proto][q]);
		if (q == Q_CHECK)
			put_u64(&b, 1); /* keys in this check */
		put_str(&b, keys[i], strlen(keys[i]));
	}
	rc = flush(ts, &b, deadline);
	return rc ? fail(rc, what, err, errlen) : 0;
}

int tcpstore_check_each(struct tcpstore *ts, const char *const *keys, size_t n,
			unsigned char *ready, char *err, size_t errlen)
{
	double deadline = now_ms() + ts->timeout_ms;
	int rc;

	rc = send_each(ts, Q_CHECK, keys, n, deadline, "store check", err,
		       errlen);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		unsigned char r;

		rc = recv_all(ts, &r, 1, deadline);
		if (rc)
			return fail(rc, "store check", err, errlen);
		ready[i] = r == 0; /* READY */
	}
	return 0;
}

int tcpstore_get_each(struct tcpstore *ts, const char *const *keys, size_t n,
		      char **values, char *err, size_t errlen)
{
	double deadline = now_ms() + ts->timeout_ms;
	size_t got = 0;
	int rc;

	rc = send_each(ts, Q_GET, keys, n, deadline, "store get", err, errlen);
	if (rc)
		return rc;
	for (; got < n; got++) {
		uint64_t len;

		rc = recv_all(ts, &len, sizeof(len), deadline);
		if (rc)
			goto fail;
		if (len > TCPSTORE_VALUE_MAX) {
			rc = -E2BIG;
			goto fail;
		}
		values[got] = malloc(len + 1);
		if (!values[got]) {
			rc = -ENOMEM;
			goto fail;
		}
		rc = recv_all(ts, values[got], len, deadline);
		if (rc) {
			got++;
			goto fail;
		}
		values[got][len] = 0;
	}
	return 0;
fail:
	for (size_t i = 0; i < got; i++) {
		free(values[i]);
		values[i] = NULL;
	}
	return fail(rc, "store get", err, errlen);
}
