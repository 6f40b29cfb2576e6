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
};

/* Embeds: initialise with a body cap (0 = DAP_MESSAGE_MAX). */
void dap_framer_init(struct dap_framer *fr, size_t max_body);
void dap_framer_release(struct dap_framer *fr);

/* Appends bytes.  Returns 0, or DAP_ETOOBIG when buffering them would exceed
 * the header or body cap (the framer is then failed). -ENOMEM on allocation
 * failure. */
int dap_framer_feed(struct dap_framer *fr, const char *data, size_t len);

/*
 * Takes the next complete message out of the framer.
 * Returns 1 and sets *body/*len (a NUL-terminated heap copy the caller must
 * free()), 0 when no complete message is buffered yet, or a negative error
 * (DAP_EFRAME, DAP_ETOOBIG) after which the framer stays failed.
 */
int dap_framer_next(struct dap_framer *fr, char **body, size_t *len);

/* Formats the header for a body of len bytes into out (>= 40 bytes).
 * Returns the header's length. */
int dap_frame_header(char *out, size_t outlen, size_t len);

/* Static text for any error code above or a negative errno. */
const char *dap_strerror(int err);

#endif
