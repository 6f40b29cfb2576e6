/*
 * dap_msg: parsing, validating and building DAP messages.
 *
 * A parsed message keeps the whole cJSON tree in root.  A built message keeps
 * a holder object in root that owns `body` or `arguments`; the envelope
 * (seq, type, command ...) lives in the C struct and is written out by
 * dap_message_encode(), so a caller may change success or message after
 * building.
 */
#include "dap_msg.h"
#include "dap_frame.h"
#include "errbuf.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAP_ERROR_TEXT_MAX (16u << 10) /* cap on an error reply's text */

/* Rejects nesting deeper than DAP_JSON_DEPTH_MAX before cJSON recurses. */
/* The length of the well-formed UTF-8 sequence at p (left bytes there),
 * or 0: no overlong forms, no surrogates, nothing past U+10FFFF. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
	unsigned c = p[0];
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (left < n)
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/*
 * What cJSON would take but we must not: nesting deeper than
 * DAP_JSON_DEPTH_MAX (DAP_EDEPTH), text that is not UTF-8, a NUL byte, or
 * a string holding U+0000 (DAP_EJSON): C strings would cut it short (an
 * expression, a token, SQL), so it is refused whole.  0 when fine.
 */
static int check_text(const char *text, size_t len, char *err, size_t errlen)
{
	const unsigned char *t = (const unsigned char *)text;
	int depth = 0, in_string = 0, escaped = 0;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(t + i, len - i);
		unsigned char c = t[i];

		if (!n) {
			errbuf_set(err, errlen, "not valid UTF-8 at byte %zu", i);
			return DAP_EJSON;
		}
		if (!c) {
			errbuf_set(err, errlen, "a NUL byte at byte %zu", i);
			return DAP_EJSON;
		}
		if (in_string) {
			if (escaped) {
				escaped = 0;
				if (c == 'u' && len - i > 4 &&
				    !memcmp(t + i + 1, "0000", 4)) {
					errbuf_set(err, errlen,
						"a string holds U+0000 (\\u0000 "
						"at byte %zu): strings with NUL "
						"are refused",
						i - 1);
					return DAP_EJSON;
				}
			} else if (c == '\\') {
				escaped = 1;
			} else if (c == '"') {
				in_string = 0;
			}
		} else if (c == '"') {
			in_string = 1;
		} else if (c == '[' || c == '{') {
			if (++depth > DAP_JSON_DEPTH_MAX) {
				errbuf_set(err, errlen,
					"JSON nested deeper than %d levels",
					DAP_JSON_DEPTH_MAX);
				return DAP_EDEPTH;
			}
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
		i += n;
	}
	return 0;
}

/* text (len bytes, NUL-terminated) with every byte that does not start a
 * well-formed UTF-8 sequence replaced by U+FFFD: a new string in *out
 * (caller frees with free) and its length, or text itself when it is
 * fine.  -ENOMEM. */
static int utf8_repair(char *text, size_t len, char **out, size_t *outlen)
{
	const unsigned char *t = (const unsigned char *)text;
	size_t bad = 0, j = 0;
	char *r;

	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(t + i, len - i);

		bad += !n;
		i += n ? n : 1;
	}
	*out = text;
	*outlen = len;
	if (!bad)
		return 0;
	r = malloc(len + 2 * bad + 1);
	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq(t + i, len - i);

		if (n) {
			memcpy(r + j, t + i, n);
			j += n;
			i += n;
		} else {
			memcpy(r + j, "\xef\xbf\xbd", 3);
			j += 3;
			i++;
		}
	}
	r[j] = 0;
	*out = r;
	*outlen = j;
	return 0;
}

/* An integral JSON number that fits int64_t. */
static int json_int(const cJSON *it, int64_t *out)
{
	double v;

	if (!cJSON_IsNumber(it))
		return 0;
	v = it->valuedouble;
	if (!isfinite(v) || floor(v) != v || v < -9223372036854775808.0 ||
	    v >= 9223372036854775808.0)
		return 0;
	*out = (int64_t)v;
	return 1;
}

static const cJSON *get(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

/* Copies the string at key into dst (DAP_COMMAND_MAX).  Returns 0, -1 when
 * absent or not a string, -2 when too long. */
static int get_name(const cJSON *obj, const char *key, char *dst)
{
	const cJSON *it = get(obj, key);
	size_t n;

	if (!cJSON_IsString(it) || !it->valuestring)
		return -1;
	n = strlen(it->valuestring);
	if (n >= DAP_COMMAND_MAX)
		return -2;
	memcpy(dst, it->valuestring, n + 1);
	return 0;
}

static int validate(struct dap_message *m, int64_t *seq_out, char *cmd_out,
		    char *err, size_t errlen)
{
	const cJSON *root = m->root, *type = get(root, "type"), *it;
	const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
	int maybe_request =
		!t || (strcmp(t, "response") != 0 && strcmp(t, "event") != 0);
	int64_t seq = -1;
	int rc;

	/* Enough for an error response, but only to what may be a request. */
	if (json_int(get(root, "seq"), &seq) && seq >= 0 && maybe_request) {
		if (seq_out)
			*seq_out = seq;
		if (cmd_out && get_name(root, "command", cmd_out) < 0)
			cmd_out[0] = '\0';
	}
	if (seq < 0) {
		errbuf_set(err, errlen, "'seq' must be a non-negative integer");
		return DAP_EPROTO;
	}
	m->seq = seq;
	if (!t) {
		errbuf_set(err, errlen, "'type' must be a string");
		return DAP_EPROTO;
	}
	if (strcmp(t, "request") == 0) {
		m->type = DAP_REQUEST;
	} else if (strcmp(t, "response") == 0) {
		m->type = DAP_RESPONSE;
	} else if (strcmp(t, "event") == 0) {
		m->type = DAP_EVENT;
	} else {
		errbuf_set(err, errlen,
			"'type' must be \"request\", \"response\" or "
			"\"event\"");
		return DAP_EPROTO;
	}

	rc = get_name(root, m->type == DAP_EVENT ? "event" : "command",
		      m->command);
	if (rc == -1) {
		errbuf_set(err, errlen, "'%s' must be a string",
			m->type == DAP_EVENT ? "event" : "command");
		return DAP_EPROTO;
	}
	if (rc == -2) {
		errbuf_set(err, errlen, "'%s' is longer than %d characters",
			m->type == DAP_EVENT ? "event" : "command",
			DAP_COMMAND_MAX - 1);
		return DAP_EPROTO;
	}

	if (m->type == DAP_REQUEST) {
		it = get(root, "arguments");
		if (it && !cJSON_IsObject(it) && !cJSON_IsNull(it)) {
			errbuf_set(err, errlen, "'arguments' must be an object");
			return DAP_EPROTO;
		}
		m->arguments = cJSON_IsObject(it) ? (cJSON *)it : NULL;
		return 0;
	}

	it = get(root, "body");
	m->body = it && !cJSON_IsNull(it) ? (cJSON *)it : NULL;
	if (m->type == DAP_EVENT)
		return 0;

	if (!json_int(get(root, "request_seq"), &m->request_seq)) {
		errbuf_set(err, errlen, "'request_seq' must be an integer");
		return DAP_EPROTO;
	}
	it = get(root, "success");
	if (!cJSON_IsBool(it)) {
		errbuf_set(err, errlen, "'success' must be a boolean");
		return DAP_EPROTO;
	}
	m->success = cJSON_IsTrue(it);
	it = get(root, "message");
	if (cJSON_IsString(it) && it->valuestring) {
		m->message = strdup(it->valuestring);
		if (!m->message) {
			errbuf_set(err, errlen, "out of memory");
			return -ENOMEM;
		}
	} else if (it && !cJSON_IsNull(it)) {
		errbuf_set(err, errlen, "'message' must be a string");
		return DAP_EPROTO;
	}
	return 0;
}

/* Skips JSON white space from i; the index of the next other byte. */
static size_t skip_ws(const char *t, size_t len, size_t i)
{
	while (i < len && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' ||
			   t[i] == '\n'))
		i++;
	return i;
}

/* The end of the JSON string whose opening quote is at i (the index after
 * its closing quote), or len when it does not end. */
static size_t string_end(const char *t, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (t[i] == '\\')
			i++;
		else if (t[i] == '"')
			return i + 1;
	}
	return len;
}

void dap_envelope_scan(const char *t, size_t len, int64_t *seq, char *cmd,
		       size_t cmdlen)
{
	int depth = 0;

	*seq = -1;
	if (cmdlen)
		cmd[0] = '\0';
	for (size_t i = 0; i < len;) {
		size_t k, v;

		if (t[i] == '{' || t[i] == '[') {
			depth++;
			i++;
			continue;
		}
		if (t[i] == '}' || t[i] == ']') {
			if (--depth <= 0)
				return; /* the top-level object ended */
			i++;
			continue;
		}
		if (t[i] != '"') {
			i++;
			continue;
		}
		k = i;
		i = string_end(t, len, i);
		v = skip_ws(t, len, i);
		if (depth != 1 || v >= len || t[v] != ':')
			continue; /* a value, or a key below the top */
		v = skip_ws(t, len, v + 1);
		if (i - k == 5 && !memcmp(t + k, "\"seq\"", 5)) {
			int64_t n = 0;
			size_t d = v;

			while (d < len && d - v < 15 && t[d] >= '0' && t[d] <= '9')
				n = n * 10 + (t[d++] - '0');
			if (d > v)
				*seq = n;
		} else if (i - k == 9 && !memcmp(t + k, "\"command\"", 9) &&
			   v < len && t[v] == '"' && cmdlen) {
			size_t e = string_end(t, len, v), n = e - v;

			/* Plain names only: no escapes, room for the NUL. */
			if (n >= 2 && n - 2 < cmdlen &&
			    !memchr(t + v + 1, '\\', n - 2) && t[e - 1] == '"') {
				memcpy(cmd, t + v + 1, n - 2);
				cmd[n - 2] = '\0';
			}
		}
		i = v;
	}
}

int dap_message_parse(const char *text, size_t len, struct dap_message **out,
		      int64_t *seq_out, char *cmd_out, char *err, size_t errlen)
{
	const char *end = NULL;
	struct dap_message *m;
	cJSON *root;
	int rc;

	*out = NULL;
	if (seq_out)
		*seq_out = -1;
	if (cmd_out)
		cmd_out[0] = '\0';
	if (!text || !len) {
		errbuf_set(err, errlen, "empty message");
		return DAP_EJSON;
	}
	rc = check_text(text, len, err, errlen);
	if (rc < 0)
		return rc;
	errno = 0;
	root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!root && errno == ENOMEM) {
		/* Not the client's fault: answer the request it was, so
		 * that it does not wait for a reply that never comes. */
		int64_t seq;
		char cmd[DAP_COMMAND_MAX];

		dap_envelope_scan(text, len, &seq, cmd, sizeof(cmd));
		if (seq_out)
			*seq_out = seq;
		if (cmd_out)
			memcpy(cmd_out, cmd, sizeof(cmd));
		errbuf_set(err, errlen, "out of memory in the target (its "
			   "address space limit?) reading the request");
		return -ENOMEM;
	}
	if (!root) {
		size_t at = end && end >= text && end <= text + len
				    ? (size_t)(end - text)
				    : 0;
		errbuf_set(err, errlen, "invalid JSON near byte %zu", at);
		return DAP_EJSON;
	}
	while (end && end < text + len &&
	       (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n'))
		end++;
	if (end != text + len) {
		cJSON_Delete(root);
		errbuf_set(err, errlen, "trailing data after JSON");
		return DAP_EJSON;
	}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		errbuf_set(err, errlen, "a DAP message must be a JSON object");
		return DAP_EPROTO;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		cJSON_Delete(root);
		errbuf_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->root = root;
	rc = validate(m, seq_out, cmd_out, err, errlen);
	if (rc < 0) {
		dap_message_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void dap_message_free(struct dap_message *msg)
{
	if (!msg)
		return;
	free(msg->message);
	cJSON_Delete(msg->root);
	free(msg);
}

static struct dap_message *msg_new(enum dap_type type, const char *name)
{
	struct dap_message *m;
	size_t n;

	if (!name)
		name = "";
	n = strlen(name);
	if (n >= DAP_COMMAND_MAX)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->root = cJSON_CreateObject();
	if (!m->root) {
		free(m);
		return NULL;
	}
	m->type = type;
	memcpy(m->command, name, n + 1);
	return m;
}

struct dap_message *dap_response_new(int64_t request_seq, const char *command,
				     int success, const char *message)
{
	struct dap_message *m = msg_new(DAP_RESPONSE, command);

	if (!m)
		return NULL;
	m->request_seq = request_seq;
	m->success = !!success;
	m->body = cJSON_AddObjectToObject(m->root, "body");
	if (!m->body)
		goto fail;
	if (message) {
		m->message = strdup(message);
		if (!m->message)
			goto fail;
	}
	return m;
fail:
	dap_message_free(m);
	return NULL;
}

int dap_error_id(const struct dap_message *resp)
{
	const cJSON *e = resp->body ? cJSON_GetObjectItemCaseSensitive(
					      resp->body, "error")
				    : NULL;
	const cJSON *id = e ? cJSON_GetObjectItemCaseSensitive(e, "id") : NULL;

	return cJSON_IsNumber(id) ? id->valueint : 0;
}

struct dap_message *dap_error_new(int64_t request_seq, const char *command,
				  int id, const char *fmt, ...)
{
	struct dap_message *m;
	cJSON *error;
	char *text;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= DAP_ERROR_TEXT_MAX)
		n = DAP_ERROR_TEXT_MAX - 1;
	text = malloc((size_t)n + 1);
	if (!text)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(text, (size_t)n + 1, fmt, ap);
	va_end(ap);

	m = dap_response_new(request_seq, command, 0, NULL);
	if (!m)
		goto fail;
	m->message = text;
	text = NULL;
	error = cJSON_AddObjectToObject(m->body, "error");
	if (!error || !cJSON_AddNumberToObject(error, "id", id) ||
	    !cJSON_AddStringToObject(error, "format", m->message) ||
	    !cJSON_AddTrueToObject(error, "showUser"))
		goto fail;
	return m;
fail:
	free(text);
	dap_message_free(m);
	return NULL;
}

struct dap_message *dap_event_new(const char *event)
{
	struct dap_message *m = msg_new(DAP_EVENT, event);

	if (!m)
		return NULL;
	m->body = cJSON_AddObjectToObject(m->root, "body");
	if (!m->body) {
		dap_message_free(m);
		return NULL;
	}
	return m;
}

struct dap_message *dap_request_new(int64_t seq, const char *command,
				    cJSON *args)
{
	struct dap_message *m = msg_new(DAP_REQUEST, command);

	if (!m) {
		cJSON_Delete(args);
		return NULL;
	}
	m->seq = seq;
	if (args) {
		if (!cJSON_AddItemToObject(m->root, "arguments", args)) {
			cJSON_Delete(args);
			dap_message_free(m);
			return NULL;
		}
		m->arguments = args;
	}
	return m;
}

/* Adds item to out without handing it over (out is deleted after use). */
static int add_ref(cJSON *out, const char *key, cJSON *item)
{
	return !item || cJSON_AddItemReferenceToObject(out, key, item);
}

static int add_envelope(cJSON *out, const struct dap_message *m)
{
	switch (m->type) {
	case DAP_REQUEST:
		return cJSON_AddStringToObject(out, "type", "request") &&
		       cJSON_AddStringToObject(out, "command", m->command) &&
		       add_ref(out, "arguments", m->arguments);
	case DAP_RESPONSE:
		return cJSON_AddStringToObject(out, "type", "response") &&
		       cJSON_AddNumberToObject(out, "request_seq",
					       (double)m->request_seq) &&
		       cJSON_AddBoolToObject(out, "success", !!m->success) &&
		       cJSON_AddStringToObject(out, "command", m->command) &&
		       (!m->message ||
			cJSON_AddStringToObject(out, "message", m->message)) &&
		       add_ref(out, "body", m->body);
	case DAP_EVENT:
		return cJSON_AddStringToObject(out, "type", "event") &&
		       cJSON_AddStringToObject(out, "event", m->command) &&
		       add_ref(out, "body", m->body);
	}
	return 0;
}

char *dap_message_encode(struct dap_message *msg, int64_t seq, size_t *len)
{
	char hdr[48], *text = NULL, *buf = NULL, *whole = NULL;
	cJSON *out = cJSON_CreateObject();
	size_t n;
	int h;

	if (!out)
		return NULL;
	msg->seq = seq;
	if (!cJSON_AddNumberToObject(out, "seq", (double)seq) ||
	    !add_envelope(out, msg))
		goto done;
	text = cJSON_PrintUnformatted(out);
	/* cJSON copies a string's bytes as they are: a byte that is not
	 * UTF-8 (a file name, a native symbol, an echo) would make the
	 * message invalid JSON. */
	if (!text || utf8_repair(text, strlen(text), &whole, &n))
		goto done;
	h = dap_frame_header(hdr, sizeof(hdr), n);
	if (h < 0)
		goto done;
	buf = malloc((size_t)h + n + 1);
	if (!buf)
		goto done;
	memcpy(buf, hdr, (size_t)h);
	memcpy(buf + h, whole, n + 1);
	*len = (size_t)h + n;
done:
	if (whole != text)
		free(whole);
	cJSON_free(text);
	cJSON_Delete(out);
	return buf;
}

/* Looks key up; 1 when absent (a JSON null counts as absent). */
static int arg_get(const cJSON *args, const char *key, const cJSON **it)
{
	if (!cJSON_IsObject(args) || !key)
		return 1;
	*it = get(args, key);
	return !*it || cJSON_IsNull(*it);
}

static int arg_type_err(const char *key, const char *what, char *err,
			size_t errlen)
{
	errbuf_set(err, errlen, "argument '%s' must be %s", key, what);
	return DAP_EPROTO;
}

int dap_arg_int(const cJSON *args, const char *key, int64_t *out, char *err,
		size_t errlen)
{
	const cJSON *it = NULL;

	if (arg_get(args, key, &it))
		return 1;
	if (!json_int(it, out))
		return arg_type_err(key, "an integer", err, errlen);
	return 0;
}

int dap_arg_bool(const cJSON *args, const char *key, int *out, char *err,
		 size_t errlen)
{
	const cJSON *it = NULL;

	if (arg_get(args, key, &it))
		return 1;
	if (!cJSON_IsBool(it))
		return arg_type_err(key, "a boolean", err, errlen);
	*out = cJSON_IsTrue(it);
	return 0;
}

int dap_arg_string(const cJSON *args, const char *key, const char **out,
		   char *err, size_t errlen)
{
	const cJSON *it = NULL;

	if (arg_get(args, key, &it))
		return 1;
	if (!cJSON_IsString(it) || !it->valuestring)
		return arg_type_err(key, "a string", err, errlen);
	*out = it->valuestring;
	return 0;
}

int dap_arg_object(const cJSON *args, const char *key, const cJSON **out,
		   char *err, size_t errlen)
{
	const cJSON *it = NULL;

	if (arg_get(args, key, &it))
		return 1;
	if (!cJSON_IsObject(it))
		return arg_type_err(key, "an object", err, errlen);
	*out = it;
	return 0;
}

int dap_arg_array(const cJSON *args, const char *key, const cJSON **out,
		  char *err, size_t errlen)
{
	const cJSON *it = NULL;

	if (arg_get(args, key, &it))
		return 1;
	if (!cJSON_IsArray(it))
		return arg_type_err(key, "an array", err, errlen);
	*out = it;
	return 0;
}

struct dap_message *dap_message_copy(const struct dap_message *msg)
{
	struct dap_message *m;

	if (!msg)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	*m = *msg;
	m->message = NULL;
	m->arguments = m->body = NULL;
	m->root = msg->root ? cJSON_Duplicate(msg->root, 1) : NULL;
	if ((msg->root && !m->root) ||
	    (msg->message && !(m->message = strdup(msg->message)))) {
		dap_message_free(m);
		return NULL;
	}
	/* The borrowed views point into the copy's own tree. */
	if (msg->arguments)
		m->arguments = cJSON_GetObjectItemCaseSensitive(m->root,
								"arguments");
	if (msg->body)
		m->body = cJSON_GetObjectItemCaseSensitive(m->root, "body");
	return m;
}
