/* Unit tests for dap/dap_msg: parsing, validation, builders, accessors. */
#include "test.h"

#include "dap_frame.h"
#include "dap_msg.h"

#include <math.h>

static char err[256];
static int64_t seq;
static char cmd[DAP_COMMAND_MAX];

static int parse(const char *text, struct dap_message **m)
{
	err[0] = '\0';
	return dap_message_parse(text, strlen(text), m, &seq, cmd, err,
				 sizeof(err));
}

/* Parses text expecting failure rc; returns nothing, checks *m NULL. */
static void expect_fail(const char *text, int rc)
{
	struct dap_message *m = (struct dap_message *)1;

	CHECK(parse(text, &m) == rc);
	CHECK(m == NULL);
	CHECK(err[0] != '\0');
}

static void test_request(void)
{
	struct dap_message *m;

	CHECK(parse("{\"seq\":3,\"type\":\"request\",\"command\":\"threads\","
		    "\"arguments\":{\"a\":1}}",
		    &m) == 0);
	CHECK(m && m->type == DAP_REQUEST && m->seq == 3);
	CHECK_STR(m->command, "threads");
	CHECK(cJSON_IsObject(m->arguments));
	CHECK(m->body == NULL && m->message == NULL);
	dap_message_free(m);

	/* No arguments, a null one, white space around. */
	CHECK(parse(" \r\n{\"seq\":4,\"type\":\"request\",\"command\":\"x\"}"
		    "\n ",
		    &m) == 0);
	CHECK(m && m->arguments == NULL);
	dap_message_free(m);
	CHECK(parse("{\"seq\":4,\"type\":\"request\",\"command\":\"x\","
		    "\"arguments\":null}",
		    &m) == 0);
	CHECK(m && m->arguments == NULL);
	dap_message_free(m);
	dap_message_free(NULL);
}

static void test_response_event(void)
{
	struct dap_message *m;

	CHECK(parse("{\"seq\":9,\"type\":\"response\",\"request_seq\":3,"
		    "\"success\":false,\"command\":\"evaluate\","
		    "\"message\":\"boom\",\"body\":{\"k\":[1]}}",
		    &m) == 0);
	CHECK(m && m->type == DAP_RESPONSE && m->request_seq == 3);
	CHECK(m && !m->success);
	CHECK_STR(m->message, "boom");
	CHECK_STR(m->command, "evaluate");
	CHECK(cJSON_IsObject(m->body));
	dap_message_free(m);

	CHECK(parse("{\"seq\":10,\"type\":\"event\",\"event\":\"stopped\","
		    "\"body\":{\"reason\":\"pause\"}}",
		    &m) == 0);
	CHECK(m && m->type == DAP_EVENT);
	CHECK_STR(m->command, "stopped");
	CHECK(cJSON_IsObject(m->body));
	dap_message_free(m);

	CHECK(parse("{\"seq\":11,\"type\":\"event\",\"event\":\"initialized\"}",
		    &m) == 0);
	CHECK(m && m->body == NULL);
	dap_message_free(m);
}

static void test_json_errors(void)
{
	struct dap_message *m = (struct dap_message *)1;

	CHECK(dap_message_parse("", 0, &m, &seq, cmd, err, sizeof(err)) ==
	      DAP_EJSON);
	CHECK(m == NULL && seq == -1);
	expect_fail("{", DAP_EJSON);
	expect_fail("{\"seq\":1,}", DAP_EJSON);
	expect_fail("nul", DAP_EJSON);
	expect_fail("{\"seq\":1} {}", DAP_EJSON);
	expect_fail("{\"seq\":1}x", DAP_EJSON);
	/* Length, not NUL, ends the text. */
	CHECK(dap_message_parse("{}garbage", 2, &m, NULL, NULL, NULL, 0) ==
	      DAP_EPROTO);
	/* Not an object. */
	expect_fail("[1,2]", DAP_EPROTO);
	CHECK(seq == -1);
	expect_fail("\"request\"", DAP_EPROTO);
	expect_fail("42", DAP_EPROTO);
}

static char *nest(size_t depth, const char *open, const char *close)
{
	size_t n = depth * (strlen(open) + strlen(close)) + 128, k = 0;
	char *s = malloc(n);

	k += (size_t)sprintf(s, "{\"seq\":1,\"type\":\"request\","
				"\"command\":\"x\",\"arguments\":");
	for (size_t i = 0; i < depth; i++)
		k += (size_t)sprintf(s + k, "%s", open);
	k += (size_t)sprintf(s + k, "1");
	for (size_t i = 0; i < depth; i++)
		k += (size_t)sprintf(s + k, "%s", close);
	sprintf(s + k, "}");
	return s;
}

static void test_depth(void)
{
	struct dap_message *m;
	char *s;

	/* The envelope is level 1, so 63 more levels fit. */
	s = nest(DAP_JSON_DEPTH_MAX - 1, "{\"a\":", "}");
	CHECK(parse(s, &m) == 0);
	dap_message_free(m);
	free(s);
	s = nest(DAP_JSON_DEPTH_MAX, "{\"a\":", "}");
	expect_fail(s, DAP_EDEPTH);
	free(s);

	/* A bomb: no closing brackets at all. */
	size_t n = 1u << 20;
	s = malloc(n);
	memset(s, '[', n);
	CHECK(dap_message_parse(s, n, &m, &seq, cmd, err, sizeof(err)) ==
	      DAP_EDEPTH);
	free(s);

	/* Brackets in strings do not count, escaped quotes do not end one. */
	s = malloc(4096);
	strcpy(s, "{\"seq\":1,\"type\":\"request\",\"command\":\"x\","
		  "\"arguments\":{\"s\":\"\\\"");
	for (int i = 0; i < 200; i++)
		strcat(s, "[{");
	strcat(s, "\"}}");
	CHECK(parse(s, &m) == 0);
	dap_message_free(m);
	free(s);
}

static void test_proto_errors(void)
{
	char long_cmd[DAP_COMMAND_MAX + 64];

	expect_fail("{\"type\":\"request\",\"command\":\"x\"}", DAP_EPROTO);
	CHECK(seq == -1);
	expect_fail("{\"seq\":1.5,\"type\":\"request\",\"command\":\"x\"}",
		    DAP_EPROTO);
	CHECK(seq == -1);
	expect_fail("{\"seq\":-1,\"type\":\"request\",\"command\":\"x\"}",
		    DAP_EPROTO);
	expect_fail("{\"seq\":\"1\",\"type\":\"request\",\"command\":\"x\"}",
		    DAP_EPROTO);
	expect_fail("{\"seq\":1e300,\"type\":\"request\",\"command\":\"x\"}",
		    DAP_EPROTO);

	/* Bad type: seq and command still readable for an error reply. */
	expect_fail("{\"seq\":5,\"type\":\"reqest\",\"command\":\"threads\"}",
		    DAP_EPROTO);
	CHECK(seq == 5);
	CHECK_STR(cmd, "threads");
	expect_fail("{\"seq\":5,\"command\":\"threads\"}", DAP_EPROTO);
	CHECK(seq == 5);
	expect_fail("{\"seq\":5,\"type\":7,\"command\":\"threads\"}",
		    DAP_EPROTO);
	CHECK(seq == 5);

	/* Wrong arguments type. */
	expect_fail("{\"seq\":7,\"type\":\"request\",\"command\":\"threads\","
		    "\"arguments\":[1]}",
		    DAP_EPROTO);
	CHECK(seq == 7);
	CHECK_STR(cmd, "threads");
	CHECK(strstr(err, "arguments") != NULL);
	expect_fail("{\"seq\":7,\"type\":\"request\",\"command\":\"x\","
		    "\"arguments\":\"a\"}",
		    DAP_EPROTO);
	expect_fail("{\"seq\":7,\"type\":\"request\",\"command\":\"x\","
		    "\"arguments\":3}",
		    DAP_EPROTO);

	/* Command. */
	expect_fail("{\"seq\":8,\"type\":\"request\"}", DAP_EPROTO);
	CHECK(seq == 8);
	CHECK_STR(cmd, "");
	expect_fail("{\"seq\":8,\"type\":\"request\",\"command\":1}",
		    DAP_EPROTO);
	memset(long_cmd, 0, sizeof(long_cmd));
	strcpy(long_cmd, "{\"seq\":8,\"type\":\"request\",\"command\":\"");
	size_t k = strlen(long_cmd);
	memset(long_cmd + k, 'c', DAP_COMMAND_MAX);
	strcpy(long_cmd + k + DAP_COMMAND_MAX, "\"}");
	expect_fail(long_cmd, DAP_EPROTO);
	CHECK(seq == 8);
	CHECK_STR(cmd, "");
	/* One shorter fits. */
	struct dap_message *m;
	memmove(long_cmd + k + 1, long_cmd + k + 2, strlen(long_cmd + k + 1));
	CHECK(parse(long_cmd, &m) == 0);
	CHECK(m && strlen(m->command) == DAP_COMMAND_MAX - 1);
	dap_message_free(m);

	/* Events and responses: no error reply, so no seq. */
	expect_fail("{\"seq\":9,\"type\":\"event\"}", DAP_EPROTO);
	CHECK(seq == -1);
	expect_fail("{\"seq\":9,\"type\":\"event\",\"event\":false}",
		    DAP_EPROTO);
	expect_fail("{\"seq\":9,\"type\":\"response\",\"success\":true,"
		    "\"command\":\"x\"}",
		    DAP_EPROTO);
	CHECK(seq == -1);
	expect_fail("{\"seq\":9,\"type\":\"response\",\"request_seq\":1,"
		    "\"success\":1,\"command\":\"x\"}",
		    DAP_EPROTO);
	expect_fail("{\"seq\":9,\"type\":\"response\",\"request_seq\":1,"
		    "\"success\":true}",
		    DAP_EPROTO);
	expect_fail("{\"seq\":9,\"type\":\"response\",\"request_seq\":1,"
		    "\"success\":true,\"command\":\"x\",\"message\":[]}",
		    DAP_EPROTO);
}

/* Encodes m, frames it back and parses it. */
static struct dap_message *round_trip(struct dap_message *m, int64_t s)
{
	struct dap_message *out = NULL;
	struct dap_framer fr;
	char *buf, *body = NULL;
	size_t len = 0, blen = 0;

	buf = dap_message_encode(m, s, &len);
	CHECK(buf != NULL);
	if (!buf)
		return NULL;
	CHECK(strncmp(buf, "Content-Length: ", 16) == 0);
	CHECK(strlen(buf) == len);
	dap_framer_init(&fr, 0);
	CHECK(dap_framer_feed(&fr, buf, len) == 0);
	CHECK(dap_framer_next(&fr, &body, &blen) == 1);
	CHECK(body && strchr(body, '\n') == NULL); /* unformatted */
	CHECK(body && dap_message_parse(body, blen, &out, NULL, NULL, err,
					sizeof(err)) == 0);
	free(body);
	free(buf);
	dap_framer_release(&fr);
	return out;
}

static void test_builders(void)
{
	struct dap_message *m, *r;
	cJSON *args;

	m = dap_response_new(12, "threads", 1, NULL);
	CHECK(m && cJSON_IsObject(m->body));
	cJSON_AddNumberToObject(m->body, "n", 2);
	r = round_trip(m, 40);
	CHECK(m->seq == 40);
	CHECK(r && r->type == DAP_RESPONSE && r->seq == 40);
	CHECK(r && r->request_seq == 12 && r->success);
	CHECK(r && r->message == NULL);
	CHECK_STR(r ? r->command : NULL, "threads");
	CHECK(r && cJSON_GetObjectItem(r->body, "n")->valuedouble == 2);
	dap_message_free(r);
	dap_message_free(m);

	m = dap_error_new(13, "evaluate", 2001, "bad %s: %d", "thing", 7);
	CHECK(m && !m->success);
	CHECK_STR(m->message, "bad thing: 7");
	r = round_trip(m, 41);
	CHECK(r && !r->success && r->request_seq == 13);
	CHECK_STR(r ? r->message : NULL, "bad thing: 7");
	if (r) {
		cJSON *e = cJSON_GetObjectItem(r->body, "error");
		CHECK(cJSON_GetObjectItem(e, "id")->valuedouble == 2001);
		CHECK_STR(cJSON_GetObjectItem(e, "format")->valuestring,
			  "bad thing: 7");
		CHECK(cJSON_IsTrue(cJSON_GetObjectItem(e, "showUser")));
	}
	dap_message_free(r);
	dap_message_free(m);

	/* A long error text is cut, not refused. */
	char *big = malloc(100000);
	memset(big, 'e', 99999);
	big[99999] = '\0';
	m = dap_error_new(1, "x", 1, "%s", big);
	CHECK(m && strlen(m->message) < 99999 && strlen(m->message) > 1000);
	dap_message_free(m);
	free(big);

	m = dap_event_new("output");
	CHECK(m && cJSON_IsObject(m->body));
	cJSON_AddStringToObject(m->body, "output", "hi \"there\"\n");
	r = round_trip(m, 42);
	CHECK(r && r->type == DAP_EVENT && r->seq == 42);
	CHECK_STR(r ? r->command : NULL, "output");
	CHECK_STR(r ? cJSON_GetObjectItem(r->body, "output")->valuestring
		    : NULL,
		  "hi \"there\"\n");
	dap_message_free(r);
	dap_message_free(m);

	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sql", "select 1");
	m = dap_request_new(5, "probing/query", args);
	CHECK(m && m->arguments == args);
	r = round_trip(m, 5);
	CHECK(r && r->type == DAP_REQUEST && r->seq == 5);
	CHECK_STR(r ? r->command : NULL, "probing/query");
	const char *sql = NULL;
	CHECK(r &&
	      dap_arg_string(r->arguments, "sql", &sql, err, sizeof(err)) == 0);
	CHECK_STR(sql, "select 1");
	dap_message_free(r);
	dap_message_free(m);

	m = dap_request_new(6, "threads", NULL);
	r = round_trip(m, 6);
	CHECK(r && r->arguments == NULL);
	dap_message_free(r);
	dap_message_free(m);

	/* Changing the struct after building changes the output. */
	m = dap_response_new(1, "x", 1, NULL);
	m->success = 0;
	m->message = strdup("later");
	r = round_trip(m, 1);
	CHECK(r && !r->success);
	CHECK_STR(r ? r->message : NULL, "later");
	dap_message_free(r);
	dap_message_free(m);

	/* Names that do not fit are refused; args are freed (ASan). */
	char name[DAP_COMMAND_MAX + 1];
	memset(name, 'n', DAP_COMMAND_MAX);
	name[DAP_COMMAND_MAX] = '\0';
	CHECK(dap_response_new(1, name, 1, NULL) == NULL);
	CHECK(dap_event_new(name) == NULL);
	CHECK(dap_request_new(1, name, cJSON_CreateObject()) == NULL);
	CHECK(dap_error_new(1, name, 1, "x") == NULL);
}

static void test_args(void)
{
	struct dap_message *m;
	const cJSON *obj = NULL, *arr = NULL;
	const char *s = NULL;
	int64_t i = -7;
	int b = -7;

	CHECK(parse("{\"seq\":1,\"type\":\"request\",\"command\":\"x\","
		    "\"arguments\":{\"i\":5,\"f\":5.0,\"h\":5.5,\"big\":1e300,"
		    "\"neg\":-9007199254740993,\"istr\":\"5\",\"t\":true,"
		    "\"fa\":false,\"one\":1,\"s\":\"str\",\"o\":{},"
		    "\"a\":[],\"n\":null}}",
		    &m) == 0);
	if (!m)
		return;
	const cJSON *args = m->arguments;

	CHECK(dap_arg_int(args, "i", &i, err, sizeof(err)) == 0 && i == 5);
	CHECK(dap_arg_int(args, "f", &i, err, sizeof(err)) == 0 && i == 5);
	CHECK(dap_arg_int(args, "neg", &i, err, sizeof(err)) == 0 && i < 0);
	i = 42;
	CHECK(dap_arg_int(args, "missing", &i, err, sizeof(err)) == 1);
	CHECK(i == 42);
	CHECK(dap_arg_int(args, "n", &i, err, sizeof(err)) == 1 && i == 42);
	CHECK(dap_arg_int(args, "h", &i, err, sizeof(err)) == DAP_EPROTO);
	CHECK_STR(err, "argument 'h' must be an integer");
	CHECK(dap_arg_int(args, "big", &i, err, sizeof(err)) == DAP_EPROTO);
	CHECK(dap_arg_int(args, "istr", &i, err, sizeof(err)) == DAP_EPROTO);
	CHECK(dap_arg_int(args, "t", &i, err, sizeof(err)) == DAP_EPROTO);
	CHECK(dap_arg_int(args, "o", &i, err, sizeof(err)) == DAP_EPROTO);
	CHECK(i == 42);

	CHECK(dap_arg_bool(args, "t", &b, err, sizeof(err)) == 0 && b == 1);
	CHECK(dap_arg_bool(args, "fa", &b, err, sizeof(err)) == 0 && b == 0);
	CHECK(dap_arg_bool(args, "missing", &b, err, sizeof(err)) == 1);
	CHECK(dap_arg_bool(args, "one", &b, err, sizeof(err)) == DAP_EPROTO);
	CHECK_STR(err, "argument 'one' must be a boolean");
	CHECK(dap_arg_bool(args, "s", &b, err, sizeof(err)) == DAP_EPROTO);

	CHECK(dap_arg_string(args, "s", &s, err, sizeof(err)) == 0);
	CHECK_STR(s, "str");
	CHECK(dap_arg_string(args, "i", &s, err, sizeof(err)) == DAP_EPROTO);
	CHECK_STR(err, "argument 'i' must be a string");
	CHECK(dap_arg_string(args, "n", &s, err, sizeof(err)) == 1);

	CHECK(dap_arg_object(args, "o", &obj, err, sizeof(err)) == 0);
	CHECK(cJSON_IsObject(obj));
	CHECK(dap_arg_object(args, "a", &obj, err, sizeof(err)) == DAP_EPROTO);
	CHECK_STR(err, "argument 'a' must be an object");
	CHECK(dap_arg_array(args, "a", &arr, err, sizeof(err)) == 0);
	CHECK(cJSON_IsArray(arr));
	CHECK(dap_arg_array(args, "o", &arr, err, sizeof(err)) == DAP_EPROTO);
	CHECK_STR(err, "argument 'o' must be an array");
	CHECK(dap_arg_array(args, "missing", &arr, err, sizeof(err)) == 1);

	/* No arguments at all: everything is absent; keys are exact. */
	CHECK(dap_arg_int(NULL, "i", &i, err, sizeof(err)) == 1);
	CHECK(dap_arg_string(NULL, "s", &s, NULL, 0) == 1);
	CHECK(dap_arg_int(args, "I", &i, err, sizeof(err)) == 1);
	CHECK(dap_arg_int(cJSON_GetObjectItem(args, "a"), "i", &i, err,
			  sizeof(err)) == 1);
	/* A NULL err is allowed. */
	CHECK(dap_arg_bool(args, "s", &b, NULL, 0) == DAP_EPROTO);
	dap_message_free(m);
}

/* A copy is independent of the original and encodes the same. */
static void test_copy(void)
{
	struct dap_message *ev = dap_event_new("output"), *cp;
	char *a, *b;
	size_t la, lb;

	CHECK(ev != NULL);
	cJSON_AddStringToObject(ev->body, "output", "hello");
	cp = dap_message_copy(ev);
	CHECK(cp != NULL && cp->body != NULL && cp->root != ev->root);
	a = dap_message_encode(ev, 7, &la);
	b = dap_message_encode(cp, 7, &lb);
	CHECK(a && b && la == lb && memcmp(a, b, la) == 0);
	free(a);
	free(b);
	dap_message_free(ev);
	CHECK_STR(cJSON_GetObjectItem(cp->body, "output")->valuestring, "hello");
	dap_message_free(cp);
	cp = dap_error_new(3, "evaluate", 2, "boom %d", 1);
	ev = dap_message_copy(cp);
	CHECK(ev && ev->message && strcmp(ev->message, cp->message) == 0 &&
	      ev->message != cp->message && ev->request_seq == 3);
	dap_message_free(ev);
	dap_message_free(cp);
	CHECK(dap_message_copy(NULL) == NULL);
}

/* Strings are taken whole or refused: U+0000 would cut them short in C
 * (an expression, a token, SQL); text must be UTF-8. */
static void test_nul_and_utf8(void)
{
	struct dap_message *m, *ev;
	const char *body;
	char *enc;
	size_t n;

	expect_fail("{\"seq\":1,\"type\":\"request\",\"command\":"
		    "\"evaluate\",\"arguments\":{\"expression\":"
		    "\"1\\u0000+1\"}}", DAP_EJSON);
	CHECK(strstr(err, "U+0000") != NULL);
	/* A NUL in a key too, and a raw NUL byte. */
	expect_fail("{\"seq\":1,\"type\":\"request\",\"command\":\"x\","
		    "\"arguments\":{\"a\\u0000b\":1}}", DAP_EJSON);
	CHECK(dap_message_parse("{\"seq\":1}\0", 11, &m, &seq, cmd, err,
				sizeof(err)) == DAP_EJSON && m == NULL);
	/* An escaped backslash then "u0000" is text, not NUL. */
	CHECK(parse("{\"seq\":1,\"type\":\"request\",\"command\":\"x\","
		    "\"arguments\":{\"s\":\"\\\\u0000\"}}", &m) == 0);
	CHECK_STR(cJSON_GetObjectItem(m->arguments, "s")->valuestring,
		  "\\u0000");
	dap_message_free(m);
	/* U+0001 and U+0100 are fine. */
	CHECK(parse("{\"seq\":1,\"type\":\"request\",\"command\":\"x\","
		    "\"arguments\":{\"s\":\"\\u0001\\u0100\"}}", &m) == 0);
	dap_message_free(m);
	/* Not UTF-8: a stray continuation, an overlong '/', a surrogate,
	 * a truncated sequence, past U+10FFFF. */
	expect_fail("{\"seq\":1,\"type\":\"request\",\"command\":\"\x80\"}",
		    DAP_EJSON);
	CHECK(strstr(err, "UTF-8") != NULL);
	expect_fail("{\"s\":\"\xc0\xaf\"}", DAP_EJSON);
	expect_fail("{\"s\":\"\xed\xa0\x80\"}", DAP_EJSON);
	expect_fail("{\"s\":\"\xe2\x82\"}", DAP_EJSON);
	expect_fail("{\"s\":\"\xf4\x90\x80\x80\"}", DAP_EJSON);
	CHECK(parse("{\"seq\":1,\"type\":\"request\",\"command\":"
		    "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}", &m) == 0);
	dap_message_free(m);

	/* What goes out is UTF-8 whatever a string held: each bad byte
	 * becomes U+FFFD. */
	ev = dap_event_new("output");
	cJSON_AddStringToObject(ev->body, "output", "a\xff\xc3" "b\xc3\xa9");
	enc = dap_message_encode(ev, 1, &n);
	CHECK(enc != NULL);
	body = enc ? strstr(enc, "\r\n\r\n") + 4 : "";
	CHECK(strstr(body, "\"a\xef\xbf\xbd\xef\xbf\xbd" "b\xc3\xa9\"") != NULL);
	CHECK(parse(body, &m) == 0);
	CHECK(strlen(body) == n - (size_t)(body - enc));
	dap_message_free(m);
	free(enc);
	dap_message_free(ev);
}

/* The seq and command of a text cJSON could not read (out of memory):
 * top-level keys only, whatever comes before, after or inside. */
static void scan(const char *t, int64_t want_seq, const char *want_cmd)
{
	int64_t s;
	char c[DAP_COMMAND_MAX];

	dap_envelope_scan(t, strlen(t), &s, c, sizeof(c));
	CHECK(s == want_seq);
	CHECK(!strcmp(c, want_cmd));
}

static void test_envelope_scan(void)
{
	char big[DAP_COMMAND_MAX + 40];

	scan("{\"seq\":7,\"type\":\"request\",\"command\":\"variables\"}", 7,
	     "variables");
	/* VS Code's order, white space, nested look-alikes ignored. */
	scan("{ \"command\" : \"evaluate\", \"arguments\": {\"seq\": 99, "
	     "\"command\": \"x\", \"expression\": \"{\\\"seq\\\":5}\"}, "
	     "\"type\":\"request\", \"seq\" : 12 }", 12, "evaluate");
	/* A string value that looks like a key. */
	scan("{\"x\":\"\\\"seq\\\":3\",\"seq\":4}", 4, "");
	scan("{\"a\":[{\"seq\":1}],\"seq\":2}", 2, "");
	/* Broken or cut texts: what was read, never past the end. */
	scan("{\"seq\":31,\"command\":\"thr", 31, "");
	scan("{\"seq\":", -1, "");
	scan("{\"seq\":-3,\"command\":5}", -1, "");
	scan("", -1, "");
	scan("\"seq\":1", -1, "");
	scan("{\"seq\":1234567890123456789}", 123456789012345, "");
	scan("{\"command\":\"a\\\"b\"}", -1, "");
	/* A command longer than the buffer is not cut short. */
	memset(big, 'x', sizeof(big));
	memcpy(big, "{\"command\":\"", 12);
	memcpy(big + sizeof(big) - 3, "\"}", 3);
	scan(big, -1, "");
	/* Text after the object is not read as its keys. */
	scan("{\"a\":1} {\"seq\":9}", -1, "");
}

TEST_MAIN(test_copy, test_envelope_scan, test_request, test_response_event, test_json_errors, test_depth,
	  test_proto_errors, test_builders, test_args, test_nul_and_utf8)
