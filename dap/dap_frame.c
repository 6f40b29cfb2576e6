/*
 * dap_frame: Content-Length framing with hard caps.
 *
 * The buffer is laid out as
 *
 *   buf[0, head)        consumed, dropped at the next feed
 *   buf[head, scan)     complete, validated messages waiting for _next
 *   buf[scan, len)      the start of one incomplete message
 *
 * Bytes are appended only as far as the incomplete message can still need
 * them: up to DAP_HEADER_MAX while its header is unparsed, then exactly the
 * rest of its body.  So a cap is hit before the bytes past it are stored.
 */
#include "dap_frame.h"
#include "dap_client.h" /* its error codes, for dap_strerror */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define FRAMER_MIN_CAP 4096
#define FRAMER_KEEP_CAP (64u << 10) /* an emptied buffer above this is freed   \
				     */

static const char content_length[] = "Content-Length";

void dap_framer_init(struct dap_framer *fr, size_t max_body)
{
	memset(fr, 0, sizeof(*fr));
	fr->max_body = max_body ? max_body : DAP_MESSAGE_MAX;
}

void dap_framer_release(struct dap_framer *fr)
{
	size_t max_body = fr->max_body;

	free(fr->buf);
	dap_framer_init(fr, max_body);
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* One header line without its line end.  Only Content-Length matters. */
static int parse_line(const char *line, size_t n, size_t max_body, int *have,
		      size_t *value)
{
	const char *colon = memchr(line, ':', n);
	size_t i, v = 0, digits = 0;

	if (!colon)
		return DAP_EFRAME;
	if ((size_t)(colon - line) != sizeof(content_length) - 1 ||
	    strncasecmp(line, content_length, sizeof(content_length) - 1) != 0)
		return 0;
	if (*have)
		return DAP_EFRAME;
	i = (size_t)(colon - line) + 1;
	while (i < n && is_blank(line[i]))
		i++;
	for (; i < n && line[i] >= '0' && line[i] <= '9'; i++, digits++) {
		size_t d = (size_t)(line[i] - '0');

		if (v > (SIZE_MAX - d) / 10)
			return DAP_EFRAME;
		v = v * 10 + d;
	}
	while (i < n && is_blank(line[i]))
		i++;
	if (!digits || i != n)
		return DAP_EFRAME;
	if (v > max_body)
		return DAP_ETOOBIG;
	*have = 1;
	*value = v;
	return 0;
}

/*
 * Parses the header block at p (avail bytes buffered).  Returns 1 with the
 * block's length and the body length, 0 when more bytes are needed, or a
 * negative error.
 */
static int parse_header(const char *p, size_t avail, size_t max_body,
			size_t *hdr_len, size_t *body_len)
{
	size_t window = avail < DAP_HEADER_MAX ? avail : DAP_HEADER_MAX;
	size_t pos = 0, value = 0;
	int have = 0;

	for (;;) {
		const char *nl = memchr(p + pos, '\n', window - pos);
		size_t end, n;
		int rc;

		if (!nl)
			return avail >= DAP_HEADER_MAX ? DAP_ETOOBIG : 0;
		end = (size_t)(nl - p);
		n = end - pos;
		if (n && p[end - 1] == '\r')
			n--;
		if (n == 0) {
			if (!have)
				return DAP_EFRAME;
			*hdr_len = end + 1;
			*body_len = value;
			return 1;
		}
		rc = parse_line(p + pos, n, max_body, &have, &value);
		if (rc < 0)
			return rc;
		pos = end + 1;
	}
}

/* Advances scan over every message that is now complete. */
static int walk(struct dap_framer *fr)
{
	for (;;) {
		size_t have = fr->len - fr->scan;

		if (fr->scan_hdr == 0) {
			int rc = parse_header(fr->buf + fr->scan, have,
					      fr->max_body, &fr->scan_hdr,
					      &fr->scan_body);
			if (rc <= 0)
				return rc;
		}
		if (have < fr->scan_hdr + fr->scan_body)
			return 0;
		fr->scan += fr->scan_hdr + fr->scan_body;
		fr->scan_hdr = 0;
		fr->scan_body = 0;
	}
}

static int reserve(struct dap_framer *fr, size_t more)
{
	size_t need = fr->len + more, cap = fr->cap ? fr->cap : FRAMER_MIN_CAP;
	char *p;

	if (need <= fr->cap)
		return 0;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	p = realloc(fr->buf, cap);
	if (!p)
		return -ENOMEM;
	fr->buf = p;
	fr->cap = cap;
	return 0;
}

int dap_framer_feed(struct dap_framer *fr, const char *data, size_t len)
{
	if (fr->failed)
		return fr->failed;
	if (fr->head > 0) {
		memmove(fr->buf, fr->buf + fr->head, fr->len - fr->head);
		fr->len -= fr->head;
		fr->scan -= fr->head;
		fr->head = 0;
	}
	while (len > 0) {
		size_t have = fr->len - fr->scan, want, take;
		int rc;

		/* walk() keeps have below what the message still needs. */
		if (fr->scan_hdr == 0)
			want = DAP_HEADER_MAX - have;
		else
			want = fr->scan_hdr + fr->scan_body - have;
		take = len < want ? len : want;
		rc = reserve(fr, take);
		if (rc < 0)
			return fr->failed = rc;
		memcpy(fr->buf + fr->len, data, take);
		fr->len += take;
		data += take;
		len -= take;
		rc = walk(fr);
		if (rc < 0)
			return fr->failed = rc;
	}
	return 0;
}

int dap_framer_next(struct dap_framer *fr, char **body, size_t *len)
{
	size_t hdr = 0, n = 0;
	char *copy;

	if (fr->head >= fr->scan)
		return fr->failed;
	/* Validated by walk(), so this cannot fail. */
	if (parse_header(fr->buf + fr->head, fr->scan - fr->head, fr->max_body,
			 &hdr, &n) != 1)
		return fr->failed = DAP_EFRAME;
	copy = malloc(n + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, fr->buf + fr->head + hdr, n);
	copy[n] = '\0';
	fr->head += hdr + n;
	if (fr->head == fr->len) {
		fr->head = fr->len = fr->scan = 0;
		if (fr->cap > FRAMER_KEEP_CAP) {
			free(fr->buf);
			fr->buf = NULL;
			fr->cap = 0;
		}
	}
	*body = copy;
	*len = n;
	return 1;
}

int dap_frame_is_http(const char *data, size_t len)
{
	static const char *const methods[] = {
		"GET ",	    "HEAD ",  "POST ",	  "PUT ",  "DELETE ",
		"OPTIONS ", "PATCH ", "CONNECT ", "TRACE ",
	};

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		size_t n = strlen(methods[i]);

		if (len >= n && !memcmp(data, methods[i], n))
			return 1;
	}
	return 0;
}

int dap_frame_header(char *out, size_t outlen, size_t len)
{
	int n = snprintf(out, outlen, "Content-Length: %zu\r\n\r\n", len);

	if (n < 0 || (size_t)n >= outlen)
		return -1;
	return n;
}

const char *dap_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case DAP_EFRAME:
		return "malformed DAP header (missing or invalid "
		       "Content-Length)";
	case DAP_ETOOBIG:
		return "DAP message too big";
	case DAP_EJSON:
		return "DAP message is not valid JSON";
	case DAP_EDEPTH:
		return "DAP message nested too deeply";
	case DAP_EPROTO:
		return "not a valid DAP message";
	case DAP_ECONNREFUSED:
		return "connection refused: nothing listens at the address";
	case DAP_ETIMEDOUT:
		return "timed out";
	case DAP_ECLOSED:
		return "connection closed by the agent";
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}
