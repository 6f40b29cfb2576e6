/*
 * libFuzzer target for dap/: framing, message parsing, argument accessors,
 * the encoder and address parsing.
 *
 * Input layout: the first 4 bytes (when present) choose the chunk sizes the
 * rest is fed in and the framer's body cap; the rest is the byte stream a
 * client would send.  The whole input is also parsed as an address.
 */
#include "dap_addr.h"
#include "dap_frame.h"
#include "dap_msg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const keys[] = {
	"threadId", "expression", "sql", "levels", "native", "locals",
	"set",	    "a",	  "x",	 "",	   "seq",    "arguments",
};

static void run_accessors(const cJSON *args)
{
	const char *probe[24];
	size_t n = 0;
	char err[64];

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		probe[n++] = keys[i];
	/* The keys the input actually uses, a few of them. */
	for (const cJSON *it = args ? args->child : NULL;
	     it && n < sizeof(probe) / sizeof(probe[0]); it = it->next)
		if (it->string)
			probe[n++] = it->string;
	for (size_t i = 0; i < n; i++) {
		const cJSON *j = NULL;
		const char *s = NULL;
		int64_t v = 0;
		int b = 0;

		dap_arg_int(args, probe[i], &v, err, sizeof(err));
		dap_arg_bool(args, probe[i], &b, err, sizeof(err));
		dap_arg_string(args, probe[i], &s, err, sizeof(err));
		if (s)
			(void)strlen(s);
		dap_arg_object(args, probe[i], &j, err, sizeof(err));
		dap_arg_array(args, probe[i], &j, NULL, 0);
	}
}

/* What a server does with one body: parse, answer or reject. */
static void handle(const char *body, size_t len)
{
	struct dap_message *m = NULL, *reply = NULL;
	char cmd[DAP_COMMAND_MAX], err[128];
	int64_t seq = -1;
	size_t out_len = 0;
	char *out;
	int rc;

	rc = dap_message_parse(body, len, &m, &seq, cmd, err, sizeof(err));
	if (rc == 0 && m->type == DAP_REQUEST) {
		run_accessors(m->arguments);
		reply = dap_response_new(m->seq, m->command, 1, NULL);
		if (reply && m->arguments)
			cJSON_AddItemToObject(reply->body, "echo",
					      cJSON_Duplicate(m->arguments, 1));
	} else if (rc == 0) {
		/* Re-encode what came in. */
		out = dap_message_encode(m, m->seq, &out_len);
		free(out);
	} else if (seq >= 0) {
		reply = dap_error_new(seq, cmd, 1, "%s", err);
	}
	if (reply) {
		out = dap_message_encode(reply, 1, &out_len);
		if (out) {
			struct dap_message *back = NULL;
			const char *json = strstr(out, "\r\n\r\n");

			/* What we send must parse again. */
			if (!json ||
			    dap_message_parse(json + 4, strlen(json + 4), &back,
					      NULL, NULL, NULL, 0) != 0)
				__builtin_trap();
			dap_message_free(back);
		}
		free(out);
	}
	dap_message_free(reply);
	dap_message_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *ctl = data;
	size_t nctl = size < 4 ? size : 4;
	struct dap_framer fr;
	char text[DAP_ADDR_TEXT_MAX + 8];
	size_t off = 0, i = 0, n;

	/* The whole input as a message cJSON could not read. */
	{
		int64_t seq;
		char cmd[DAP_COMMAND_MAX];

		dap_envelope_scan((const char *)data, size, &seq, cmd,
				  sizeof(cmd));
		if (seq < -1 || strlen(cmd) >= sizeof(cmd))
			__builtin_trap();
	}
	/* The whole input as an address. */
	n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
	memcpy(text, data, n);
	text[n] = '\0';
	{
		struct dap_addr a;
		struct sockaddr_storage ss;
		socklen_t sl;
		char out[DAP_ADDR_TEXT_MAX + 16], err[128];

		if (dap_addr_parse(text, &a, err, sizeof(err)) == 0) {
			dap_addr_format(&a, out, sizeof(out));
			if (a.kind == DAP_ADDR_UNIX &&
			    dap_addr_unix_sockaddr(&a, &ss, &sl) != 0)
				__builtin_trap();
		}
	}

	data += nctl;
	size -= nctl;
	dap_framer_init(&fr, nctl && (ctl[0] & 1) ? 256 : 0);
	while (off < size) {
		size_t chunk = 1;
		char *body;
		size_t blen;
		int rc;

		if (nctl) {
			chunk = 1 + (ctl[i % nctl] & 0x7f) * (1 + i % 3);
			i++;
		}
		if (chunk > size - off)
			chunk = size - off;
		rc = dap_framer_feed(&fr, (const char *)data + off, chunk);
		off += chunk;
		while (dap_framer_next(&fr, &body, &blen) == 1) {
			if (strlen(body) > blen)
				__builtin_trap();
			handle(body, blen);
			free(body);
		}
		if (rc < 0)
			break;
		/* Bounded: at most a message's caps of partial input plus
		 * the chunk just fed (whole messages in it wait for next()). */
		if (fr.len > DAP_HEADER_MAX + fr.max_body + chunk)
			__builtin_trap();
	}
	dap_framer_release(&fr);
	return 0;
}
