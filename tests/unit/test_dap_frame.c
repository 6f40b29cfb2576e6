/* Unit tests for dap/dap_frame: framing, caps and error paths. */
#include "test.h"

#include "dap_client.h"
#include "dap_frame.h"

#include <errno.h>
#include <stdint.h>

static int feed_str(struct dap_framer *fr, const char *s)
{
	return dap_framer_feed(fr, s, strlen(s));
}

/* Takes the next message and compares it with want (NULL: none). */
static void expect_next(struct dap_framer *fr, const char *want)
{
	char *body = NULL;
	size_t len = 0;
	int rc = dap_framer_next(fr, &body, &len);

	if (!want) {
		CHECK(rc == 0);
	} else {
		CHECK(rc == 1);
		CHECK_STR(body, want);
		CHECK(body && len == strlen(want));
	}
	free(body);
}

static void test_whole(void)
{
	struct dap_framer fr;

	dap_framer_init(&fr, 0);
	CHECK(fr.max_body == DAP_MESSAGE_MAX);
	expect_next(&fr, NULL);
	CHECK(feed_str(&fr, "Content-Length: 2\r\n\r\n{}") == 0);
	expect_next(&fr, "{}");
	expect_next(&fr, NULL);
	dap_framer_release(&fr);
}

static void test_byte_by_byte(void)
{
	const char *in = "Content-Length: 13\r\n\r\n{\"seq\":1,\"a\"}"
			 "Content-Length: 3\r\n\r\n[1]";
	struct dap_framer fr;
	int got = 0;

	dap_framer_init(&fr, 0);
	for (size_t i = 0; in[i]; i++) {
		char *body;
		size_t len;

		CHECK(dap_framer_feed(&fr, in + i, 1) == 0);
		while (dap_framer_next(&fr, &body, &len) == 1) {
			CHECK_STR(body, got == 0 ? "{\"seq\":1,\"a\"}" : "[1]");
			got++;
			free(body);
		}
		/* Never more than one incomplete message is held. */
		CHECK(fr.len <= DAP_HEADER_MAX + 13);
	}
	CHECK(got == 2);
	dap_framer_release(&fr);
}

static void test_several_in_one_feed(void)
{
	struct dap_framer fr;

	dap_framer_init(&fr, 0);
	CHECK(feed_str(&fr, "Content-Length: 1\r\n\r\n1"
			    "Content-Length: 2\r\n\r\n22"
			    "Content-Length: 3\r\n\r\n333"
			    "Content-Len") == 0);
	expect_next(&fr, "1");
	expect_next(&fr, "22");
	expect_next(&fr, "333");
	expect_next(&fr, NULL);
	CHECK(feed_str(&fr, "gth: 1\r\n\r\n4") == 0);
	expect_next(&fr, "4");
	expect_next(&fr, NULL);
	dap_framer_release(&fr);
}

static void test_header_forms(void)
{
	struct dap_framer fr;

	dap_framer_init(&fr, 0);
	/* Bare \n, any case, other headers, blanks around the value. */
	CHECK(feed_str(&fr, "content-length:3\n\nabc") == 0);
	expect_next(&fr, "abc");
	CHECK(feed_str(&fr, "Content-Type: application/vscode-jsonrpc\r\n"
			    "CONTENT-LENGTH: \t 2 \r\n"
			    "X-Other: a:b:c\r\n\r\nxy") == 0);
	expect_next(&fr, "xy");
	/* An empty body. */
	CHECK(feed_str(&fr, "Content-Length: 0\r\n\r\n") == 0);
	expect_next(&fr, "");
	/* Leading zeros are still a number. */
	CHECK(feed_str(&fr, "Content-Length: 0001\r\n\r\nz") == 0);
	expect_next(&fr, "z");
	dap_framer_release(&fr);
}

static void expect_bad(const char *in, int err)
{
	struct dap_framer fr;
	char *body = NULL;
	size_t len;

	dap_framer_init(&fr, 0);
	CHECK(feed_str(&fr, in) == err);
	CHECK(fr.failed == err);
	CHECK(dap_framer_next(&fr, &body, &len) == err);
	CHECK(body == NULL);
	/* Sticky. */
	CHECK(feed_str(&fr, "Content-Length: 2\r\n\r\n{}") == err);
	CHECK(dap_framer_next(&fr, &body, &len) == err);
	dap_framer_release(&fr);
}

static void test_errors(void)
{
	expect_bad("\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Type: x\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
		   DAP_EFRAME);
	expect_bad("Content-Length: -2\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length: +2\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length: two\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length: 2x\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length: 2 2\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length:\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length 2\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length : 2\r\n\r\n{}", DAP_EFRAME);
	expect_bad("Content-Length: 99999999999999999999999999\r\n\r\n",
		   DAP_EFRAME);
	expect_bad("Content-Length: 18446744073709551616\r\n\r\n", DAP_EFRAME);
	/* Fits size_t but is past the cap: too big, decided at once. */
	expect_bad("Content-Length: 18446744073709551615\r\n", DAP_ETOOBIG);
	expect_bad("Content-Length: 16777217\r\n\r\n", DAP_ETOOBIG);
	/* A malformed line is caught before the header ends. */
	expect_bad("no colon here\r\n", DAP_EFRAME);
}

static void test_body_cap(void)
{
	struct dap_framer fr;

	dap_framer_init(&fr, 10);
	CHECK(feed_str(&fr, "Content-Length: 10\r\n\r\n0123456789") == 0);
	expect_next(&fr, "0123456789");
	/* Refused from the header alone: no body byte is buffered. */
	CHECK(feed_str(&fr, "Content-Length: 11\r\n\r\n") == DAP_ETOOBIG);
	dap_framer_release(&fr);

	/* The default cap: exactly DAP_MESSAGE_MAX is fine. */
	dap_framer_init(&fr, 0);
	char hdr[64];
	snprintf(hdr, sizeof(hdr), "Content-Length: %u\r\n\r\n",
		 DAP_MESSAGE_MAX);
	CHECK(feed_str(&fr, hdr) == 0);
	snprintf(hdr, sizeof(hdr), "Content-Length: %u\r\n\r\n",
		 DAP_MESSAGE_MAX + 1);
	dap_framer_release(&fr);
	dap_framer_init(&fr, 0);
	CHECK(feed_str(&fr, hdr) == DAP_ETOOBIG);
	dap_framer_release(&fr);
}

static void test_header_cap(void)
{
	char big[DAP_HEADER_MAX + 64];
	struct dap_framer fr;
	size_t n;

	/* A header block of exactly DAP_HEADER_MAX bytes is accepted. */
	n = (size_t)snprintf(big, sizeof(big), "Content-Length: 1\r\nX: ");
	while (n < DAP_HEADER_MAX - 4)
		big[n++] = 'a';
	memcpy(big + n, "\r\n\r\nZ", 5);
	n += 5;
	dap_framer_init(&fr, 0);
	CHECK(dap_framer_feed(&fr, big, n) == 0);
	expect_next(&fr, "Z");
	dap_framer_release(&fr);

	/* One byte more is too big, fed whole or byte by byte. */
	memmove(big + 20, big + 19, n - 19);
	big[19] = 'b';
	dap_framer_init(&fr, 0);
	CHECK(dap_framer_feed(&fr, big, n + 1) == DAP_ETOOBIG);
	dap_framer_release(&fr);
	dap_framer_init(&fr, 0);
	int rc = 0;
	for (size_t i = 0; i < n + 1 && rc == 0; i++)
		rc = dap_framer_feed(&fr, big + i, 1);
	CHECK(rc == DAP_ETOOBIG);
	CHECK(fr.len <= DAP_HEADER_MAX);
	dap_framer_release(&fr);

	/* A header that never ends. */
	memset(big, 'h', sizeof(big));
	dap_framer_init(&fr, 0);
	CHECK(dap_framer_feed(&fr, big, sizeof(big)) == DAP_ETOOBIG);
	CHECK(fr.len <= DAP_HEADER_MAX);
	dap_framer_release(&fr);
}

static void test_good_before_bad(void)
{
	struct dap_framer fr;
	char *body;
	size_t len;

	dap_framer_init(&fr, 0);
	CHECK(feed_str(&fr, "Content-Length: 2\r\n\r\n{}"
			    "Bogus\r\n\r\n") == DAP_EFRAME);
	expect_next(&fr, "{}");
	CHECK(dap_framer_next(&fr, &body, &len) == DAP_EFRAME);
	dap_framer_release(&fr);
}

static void test_large_and_released(void)
{
	size_t n = 1u << 20;
	char *big = malloc(n), hdr[64];
	struct dap_framer fr;
	char *body;
	size_t len;

	memset(big, 'x', n);
	dap_framer_init(&fr, 0);
	snprintf(hdr, sizeof(hdr), "Content-Length: %zu\r\n\r\n", n);
	CHECK(feed_str(&fr, hdr) == 0);
	for (size_t off = 0; off < n; off += 4000)
		CHECK(dap_framer_feed(&fr, big + off,
				      n - off < 4000 ? n - off : 4000) == 0);
	CHECK(fr.cap <= 2 * (n + strlen(hdr)));
	CHECK(dap_framer_next(&fr, &body, &len) == 1);
	CHECK(len == n && body[n] == '\0' && body[n - 1] == 'x');
	free(body);
	/* Emptied: the large buffer is given back. */
	CHECK(fr.cap == 0 && fr.buf == NULL);
	CHECK(feed_str(&fr, "Content-Length: 1\r\n\r\n1") == 0);
	expect_next(&fr, "1");
	dap_framer_release(&fr);
	free(big);
}

static void test_header_fmt(void)
{
	char out[48];

	CHECK(dap_frame_header(out, sizeof(out), 17) == 22);
	CHECK_STR(out, "Content-Length: 17\r\n\r\n");
	CHECK(dap_frame_header(out, 10, 17) == -1);
	CHECK(dap_frame_header(out, 41, SIZE_MAX) == 40);
	CHECK(strstr(dap_strerror(DAP_ETOOBIG), "too big") != NULL);
	CHECK(dap_strerror(DAP_EFRAME) != NULL);
	CHECK(dap_strerror(DAP_EJSON) != NULL);
	CHECK(dap_strerror(DAP_EDEPTH) != NULL);
	CHECK(dap_strerror(DAP_EPROTO) != NULL);
	CHECK(dap_strerror(DAP_ECLOSED) != NULL);
	CHECK(dap_strerror(-ENOMEM) != NULL);
	CHECK(dap_strerror(-99999) != NULL);
	CHECK(dap_strerror(12345) != NULL);
}

static void test_is_http(void)
{
	static const char get[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

	CHECK(dap_frame_is_http(get, strlen(get)) == 1);
	CHECK(dap_frame_is_http("POST /x HTTP/1.1", 16) == 1);
	CHECK(dap_frame_is_http("OPTIONS * HTTP/1.1", 18) == 1);
	/* A DAP header, a short or cut start, a method without its space. */
	CHECK(dap_frame_is_http("Content-Length: 2\r\n\r\n{}", 24) == 0);
	CHECK(dap_frame_is_http("GET", 3) == 0);
	CHECK(dap_frame_is_http("GETX /", 6) == 0);
	CHECK(dap_frame_is_http("get / HTTP/1.1", 14) == 0);
	CHECK(dap_frame_is_http("", 0) == 0);
}

TEST_MAIN(test_whole, test_byte_by_byte, test_several_in_one_feed,
	  test_header_forms, test_errors, test_body_cap, test_header_cap,
	  test_good_before_bad, test_large_and_released, test_header_fmt,
	  test_is_http)
