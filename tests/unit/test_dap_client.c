/*
 * Unit tests for dap/dap_client against a tiny scripted server thread
 * (abstract unix socket and loopback TCP).
 *
 * The server answers by command:
 *   echo     an "output" event, a stray response, then success with
 *            body {"args": <arguments>}
 *   silent   nothing
 *   garbage  a frame that is not JSON, then a normal response
 *   split    a normal response written one byte at a time
 *   big      a header announcing a body past the client's cap
 *   close    closes the connection
 */
#include "test.h"

#include "dap_client.h"
#include "dap_frame.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static char err[256];

struct server {
	int lfd;
	pthread_t th;
	int64_t seq;
};

static void put(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void put_msg(struct server *s, int fd, struct dap_message *m, int slow)
{
	size_t len = 0;
	char *buf = dap_message_encode(m, ++s->seq, &len);

	if (!buf)
		return;
	if (slow) {
		for (size_t i = 0; i < len; i++) {
			struct timespec ts = {0, 200000};

			put(fd, buf + i, 1);
			nanosleep(&ts, NULL);
		}
	} else {
		put(fd, buf, len);
	}
	free(buf);
	dap_message_free(m);
}

/* Returns 0 to go on, 1 to close. */
static int handle(struct server *s, int fd, struct dap_message *req)
{
	const char *c = req->command;
	struct dap_message *r;

	if (strcmp(c, "silent") == 0)
		return 0;
	if (strcmp(c, "close") == 0)
		return 1;
	if (strcmp(c, "big") == 0) {
		const char *h = "Content-Length: 999999999\r\n\r\n{";

		put(fd, h, strlen(h));
		return 0;
	}
	if (strcmp(c, "echo") == 0) {
		r = dap_event_new("output");
		cJSON_AddStringToObject(r->body, "output", "hello");
		put_msg(s, fd, r, 0);
		put_msg(s, fd, dap_response_new(9999, "stray", 1, NULL), 0);
	}
	if (strcmp(c, "garbage") == 0)
		put(fd, "Content-Length: 3\r\n\r\nxyz", 24);
	r = dap_response_new(req->seq, c, 1, NULL);
	if (req->arguments)
		cJSON_AddItemToObject(r->body, "args",
				      cJSON_Duplicate(req->arguments, 1));
	put_msg(s, fd, r, strcmp(c, "split") == 0);
	return 0;
}

static void *serve(void *arg)
{
	struct server *s = arg;
	struct dap_framer fr;
	char buf[4096];
	int fd = accept(s->lfd, NULL, NULL), done = 0;

	if (fd < 0)
		return NULL;
	dap_framer_init(&fr, 0);
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		char *body;
		size_t len;

		if (n <= 0 || dap_framer_feed(&fr, buf, (size_t)n) < 0)
			break;
		while (!done && dap_framer_next(&fr, &body, &len) == 1) {
			struct dap_message *m = NULL;

			if (dap_message_parse(body, len, &m, NULL, NULL, NULL,
					      0) == 0)
				done = handle(s, fd, m);
			dap_message_free(m);
			free(body);
		}
	}
	dap_framer_release(&fr);
	close(fd);
	return NULL;
}

static int listen_unix(const struct dap_addr *a)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	CHECK(dap_addr_unix_sockaddr(a, &ss, &len) == 0);
	CHECK(bind(fd, (struct sockaddr *)&ss, len) == 0);
	CHECK(listen(fd, 4) == 0);
	return fd;
}

static int listen_tcp(int *port, int backlog)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	CHECK(listen(fd, backlog) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&sin, &len) == 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static void start(struct server *s, int lfd)
{
	s->lfd = lfd;
	s->seq = 0;
	CHECK(pthread_create(&s->th, NULL, serve, s) == 0);
}

static void stop(struct server *s)
{
	pthread_join(s->th, NULL);
	close(s->lfd);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct seen {
	int events;
	char last[DAP_COMMAND_MAX];
};

static void on_event(const struct dap_message *ev, void *arg)
{
	struct seen *seen = arg;

	seen->events++;
	snprintf(seen->last, sizeof(seen->last), "%s", ev->command);
}

static void test_refused(void)
{
	struct dap_client *c = (struct dap_client *)1;
	struct dap_addr a;
	char text[64];
	int port, fd;

	snprintf(text, sizeof(text), "@probing-test-none-%d", (int)getpid());
	CHECK(dap_addr_parse(text, &a, err, sizeof(err)) == 0);
	CHECK(dap_client_connect(&a, 1000, &c, err, sizeof(err)) ==
	      DAP_ECONNREFUSED);
	CHECK(c == NULL);
	CHECK(strstr(err, "nothing listens at @probing-test-none") != NULL);

	CHECK(dap_addr_parse("/nonexistent/probing.sock", &a, err,
			     sizeof(err)) == 0);
	CHECK(dap_client_connect(&a, 1000, &c, err, sizeof(err)) ==
	      DAP_ECONNREFUSED);

	/* This process exists but has no agent. */
	dap_addr_for_pid(getpid(), &a);
	CHECK(dap_client_connect(&a, 1000, &c, err, sizeof(err)) ==
	      DAP_ECONNREFUSED);
	CHECK(strstr(err, "no probing agent in process") != NULL);

	/* No such process (pids stay far below this). */
	dap_addr_for_pid(2147483646, &a);
	CHECK(dap_client_connect(&a, 1000, &c, err, sizeof(err)) ==
	      DAP_ECONNREFUSED);
	CHECK(strstr(err, "no process 2147483646") != NULL);

	fd = listen_tcp(&port, 1);
	close(fd);
	snprintf(text, sizeof(text), "127.0.0.1:%d", port);
	CHECK(dap_addr_parse(text, &a, err, sizeof(err)) == 0);
	CHECK(dap_client_connect(&a, 1000, &c, err, sizeof(err)) ==
	      DAP_ECONNREFUSED);
	CHECK(strstr(err, "nothing listens at 127.0.0.1:") != NULL);

	CHECK(dap_addr_parse("no-such-host.invalid:80", &a, err, sizeof(err)) ==
	      0);
	CHECK(dap_client_connect(&a, 1000, &c, err, sizeof(err)) < 0);
	CHECK(c == NULL);
}

/* Requests "echo" with {"x": x} and checks the answer. */
static void echo(struct dap_client *c, int x)
{
	struct dap_message *r = NULL;
	cJSON *args = cJSON_CreateObject();
	int64_t got = -1;

	cJSON_AddNumberToObject(args, "x", x);
	CHECK(dap_client_request(c, "echo", args, 5000, &r, err, sizeof(err)) ==
	      0);
	CHECK(r && r->type == DAP_RESPONSE && r->success);
	CHECK_STR(r ? r->command : NULL, "echo");
	if (r) {
		const cJSON *a = cJSON_GetObjectItem(r->body, "args");

		CHECK(dap_arg_int(a, "x", &got, err, sizeof(err)) == 0);
		CHECK(got == x);
	}
	dap_message_free(r);
}

static void test_unix_session(void)
{
	struct dap_message *r = NULL;
	struct dap_client *c = NULL;
	struct seen seen = {0};
	struct server s;
	struct dap_addr a;
	int64_t seq, t0;
	int rc;

	dap_addr_for_pid(getpid(), &a);
	start(&s, listen_unix(&a));
	CHECK(dap_client_connect(&a, 2000, &c, err, sizeof(err)) == 0);
	if (!c) {
		stop(&s);
		return;
	}
	CHECK(dap_client_fd(c) >= 0);

	/* Without a callback events are dropped; then with one. */
	echo(c, 1);
	dap_client_on_event(c, on_event, &seen);
	echo(c, 2);
	CHECK(seen.events == 1);
	CHECK_STR(seen.last, "output");

	/* A response written byte by byte. */
	CHECK(dap_client_request(c, "split", NULL, 5000, &r, err,
				 sizeof(err)) == 0);
	CHECK(r && r->success && r->body);
	dap_message_free(r);

	/* Timeout. */
	t0 = now_ms();
	CHECK(dap_client_request(c, "silent", NULL, 200, &r, err,
				 sizeof(err)) == DAP_ETIMEDOUT);
	CHECK(r == NULL);
	CHECK(now_ms() - t0 >= 190 && now_ms() - t0 < 3000);
	CHECK(strstr(err, "no response") != NULL);

	/* A frame that is not JSON: an error, then the client goes on. */
	seq = dap_client_send(c, "garbage", NULL, err, sizeof(err));
	CHECK(seq > 0);
	CHECK(dap_client_wait(c, seq, 5000, &r, err, sizeof(err)) == DAP_EJSON);
	CHECK(dap_client_wait(c, seq, 5000, &r, err, sizeof(err)) == 0);
	CHECK(r && r->request_seq == seq);
	dap_message_free(r);

	/* Raw bytes, numbered by the caller. */
	char framed[256];
	const char *body = "{\"seq\":1000,\"type\":\"request\","
			   "\"command\":\"x\"}";
	int h = dap_frame_header(framed, sizeof(framed), strlen(body));
	strcpy(framed + h, body);
	CHECK(dap_client_write_raw(c, framed, strlen(framed)) == 0);
	CHECK(dap_client_wait(c, 1000, 5000, &r, err, sizeof(err)) == 0);
	CHECK(r && r->request_seq == 1000);
	dap_message_free(r);

	/* The bridge's view: every message in order, with its text. */
	seen.events = 0;
	seq = dap_client_send(c, "echo", NULL, err, sizeof(err));
	CHECK(seq > 0);
	int kinds[3] = {0};
	for (int i = 0; i < 3; i++) {
		struct dap_message *m = NULL;
		char *text = NULL;
		size_t len = 0;

		CHECK(dap_client_read(c, 5000, &m, &text, &len, err,
				      sizeof(err)) == 0);
		CHECK(m != NULL && text != NULL && len == strlen(text));
		if (m)
			kinds[i] = m->type;
		if (i == 2)
			CHECK(m && m->request_seq == seq);
		dap_message_free(m);
		free(text);
	}
	CHECK(kinds[0] == DAP_EVENT && kinds[1] == DAP_RESPONSE &&
	      kinds[2] == DAP_RESPONSE);
	CHECK(seen.events == 0);
	/* Nothing more: a timeout is 0 with nothing. */
	struct dap_message *none = (struct dap_message *)1;
	char *none_raw = (char *)1;
	CHECK(dap_client_read(c, 50, &none, &none_raw, NULL, err,
			      sizeof(err)) == 0);
	CHECK(none == NULL && none_raw == NULL);
	/* Frame only, no parse. */
	CHECK(dap_client_send(c, "split", NULL, err, sizeof(err)) > 0);
	char *text = NULL;
	size_t tlen = 0;
	CHECK(dap_client_read(c, 5000, NULL, &text, &tlen, err, sizeof(err)) ==
	      0);
	CHECK(text && strstr(text, "\"split\"") != NULL);
	free(text);

	/* Bad command names are refused before anything is sent. */
	CHECK(dap_client_send(c, "", cJSON_CreateObject(), err, sizeof(err)) ==
	      -EINVAL);

	/* The agent closes: DAP_ECLOSED, and it stays closed. */
	rc = dap_client_request(c, "close", NULL, 5000, &r, err, sizeof(err));
	CHECK(rc == DAP_ECLOSED);
	CHECK(strstr(err, "closed") != NULL);
	CHECK(dap_client_request(c, "echo", NULL, 5000, &r, err, sizeof(err)) <
	      0);
	CHECK(r == NULL);
	dap_client_free(c);
	stop(&s);
}

static void test_tcp_session(void)
{
	struct dap_message *r = NULL;
	struct dap_client *c = NULL;
	struct server s;
	struct dap_addr a;
	char text[64];
	int port;

	start(&s, listen_tcp(&port, 4));
	snprintf(text, sizeof(text), "localhost:%d", port);
	CHECK(dap_addr_parse(text, &a, err, sizeof(err)) == 0);
	CHECK(dap_client_connect(&a, 2000, &c, err, sizeof(err)) == 0);
	if (!c) {
		stop(&s);
		return;
	}
	echo(c, 3);
	echo(c, 4);

	/* A body past the cap is fatal for the connection. */
	CHECK(dap_client_request(c, "big", NULL, 5000, &r, err, sizeof(err)) ==
	      DAP_ETOOBIG);
	CHECK(dap_client_request(c, "echo", NULL, 5000, &r, err, sizeof(err)) ==
	      DAP_ETOOBIG);
	dap_client_free(c);
	stop(&s);
	dap_client_free(NULL);
}

static void test_connect_timeout(void)
{
	struct dap_client *c[4] = {0};
	struct dap_addr a;
	char text[64];
	int port, fd, timeouts = 0;

	/* A listener that never accepts: once its queue is full, SYNs are
	 * dropped and connecting times out. */
	fd = listen_tcp(&port, 0);
	snprintf(text, sizeof(text), "127.0.0.1:%d", port);
	CHECK(dap_addr_parse(text, &a, err, sizeof(err)) == 0);
	for (int i = 0; i < 4; i++) {
		int64_t t0 = now_ms();
		int rc = dap_client_connect(&a, 150, &c[i], err, sizeof(err));

		if (rc == DAP_ETIMEDOUT) {
			timeouts++;
			CHECK(now_ms() - t0 < 2000);
			CHECK(strstr(err, "timed out") != NULL);
		} else {
			CHECK(rc == 0);
		}
	}
	CHECK(timeouts > 0);
	for (int i = 0; i < 4; i++)
		dap_client_free(c[i]);
	close(fd);
}

TEST_MAIN(test_refused, test_unix_session, test_tcp_session,
	  test_connect_timeout)
