/*
 * dap_frame: the Debug Adapter Protocol wire format.
 *
 * A DAP message is "Content-Length: N\r\n" (other headers allowed and
 * ignored), an empty line, then exactly N bytes of JSON.  Messages are framed
 * by Content-Length only, never by trial parsing.
 *
 * struct dap_framer is an incremental reader: feed it bytes as they arrive
 * from a socket, then take out every complete message.  It owns a bounded
 * buffer; going past a cap is an error the caller must treat as fatal for
 * the connection (the stream can no longer be resynchronised).
 *
 * Header lines end in "\r\n" (a bare "\n" is tolerated), header names are
 * case-insensitive, headers other than Content-Length are ignored.  A header
 * block without Content-Length, or with a duplicate, signed, non-numeric or
 * overflowing one, is DAP_EFRAME.  Caps are checked while bytes arrive: a
 * header block past DAP_HEADER_MAX, or a Content-Length past max_body, fails
 * before any of the body is buffered.
 *
 * Bound: call dap_framer_next() until it returns 0 after every feed.  The
 * buffer then holds at most the complete messages of the last feed plus one
 * incomplete message (<= DAP_HEADER_MAX + max_body).  A large buffer is
 * released once it has been emptied.
 *
 * Threads: a framer belongs to one thread at a time.  No locks.
 */
#ifndef DAP_FRAME_H
#define DAP_FRAME_H

#include <stddef.h>

#define DAP_HEADER_MAX 1024             /* bytes of header block, CRLFCRLF included */
#define DAP_MESSAGE_MAX (16u << 20)     /* default cap on one message body */

/* Error codes (negative). */
enum {
	DAP_EFRAME = -1000,   /* malformed header: no/invalid Content-Length */
	DAP_ETOOBIG = -1001,  /* header or body past its cap */
	DAP_EJSON = -1002,    /* body is not valid JSON */
	DAP_EDEPTH = -1003,   /* JSON nested deeper than DAP_JSON_DEPTH_MAX */
	DAP_EPROTO = -1004,   /* valid JSON that is not a DAP message */
};

struct dap_framer {
	char *buf;            /* owned; bytes received and not yet consumed */
	size_t len, cap;
	size_t max_body;      /* cap on Content-Length */
	int failed;           /* sticky error code once a cap was hit */
	/* Private to dap_frame.c. */
	size_t head;          /* start of the next message dap_framer_next gives */
	size_t scan;          /* start of the first incomplete message */
	size_t scan_hdr;      /* its header length once parsed, else 0 */
	size_t scan_body;     /* its Content-Length once parsed */
};

/* Embeds: initialise with a body cap (0 = DAP_MESSAGE_MAX). */
void dap_framer_init(struct dap_framer *fr, size_t max_body);
void dap_framer_release(struct dap_framer *fr);

/* Appends bytes.  Returns 0, or DAP_ETOOBIG when buffering them would exceed
 * the header or body cap, DAP_EFRAME when a header block is malformed (the
 * framer is then failed, and returns the same code from every later call),
 * or -ENOMEM on allocation failure (also sticky: bytes were lost). */
int dap_framer_feed(struct dap_framer *fr, const char *data, size_t len);

/*
 * Takes the next complete message out of the framer.
 * Returns 1 and sets *body and *len (a NUL-terminated heap copy the caller
 * must free()), 0 when no complete message is buffered yet, or a negative error
 * (DAP_EFRAME, DAP_ETOOBIG) after which the framer stays failed.  Complete
 * messages that arrived before the point of failure are still returned
 * first.  -ENOMEM when the copy cannot be allocated (not sticky).
 */
int dap_framer_next(struct dap_framer *fr, char **body, size_t *len);

/* 1 when the first bytes of a stream, data[0..len), are an HTTP request
 * line's start ("GET ", "POST ", ...): a browser or curl at a DAP port. */
int dap_frame_is_http(const char *data, size_t len);

/* Formats the header for a body of len bytes into out (>= 40 bytes; 41 is
 * enough for any size_t).  Returns the header's length, or -1 when it does
 * not fit (only possible for len >= 10^19 with 40 bytes). */
int dap_frame_header(char *out, size_t outlen, size_t len);

/* Static text for any error code above or a negative errno. */
const char *dap_strerror(int err);

#endif
