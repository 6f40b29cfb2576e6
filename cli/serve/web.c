/*
 * web: see web.h.
 */
#include "serve/web.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include <microhttpd.h>

#include "serve/listen.h"
#include "serve/ops.h"
#include "serve/webassets.h"
#include "serve/webroutes.h"

#define TOKEN_HEX 32
#define COOKIE "probing_web_" /* + the port: one cookie per server */
#define CONNECTIONS_MAX 64
#define STORED_MAX 8		  /* answers of stored routes kept */
#define STORED_ID_HEX 16

struct web {
	char token[TOKEN_HEX * 2 + 1];
	char cookie[32]; /* COOKIE and the port */
	int loopback;	 /* listening on loopback only: Host is checked */
};

/* The answers of stored routes (webroutes.h), newest replacing the
 * oldest; under lock (a thread per connection). */
static struct stored {
	char id[STORED_ID_HEX * 2 + 1];
	char *body; /* owned */
	size_t len;
} stored[STORED_MAX];
static unsigned stored_next;
static pthread_mutex_t stored_lock = PTHREAD_MUTEX_INITIALIZER;

static const char page_csp[] =
	"default-src 'self'; script-src 'self'; style-src 'self'; img-src "
	"'self' data:; frame-src 'self'; frame-ancestors 'self'; "
	"form-action 'self'; base-uri 'none'";
/* The flamegraph is the project's own SVG, with its own script. */
static const char svg_csp[] =
	"default-src 'none'; script-src 'unsafe-inline'; style-src "
	"'unsafe-inline'; frame-ancestors 'self'";

/* ---- answers --------------------------------------------------------------
 */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status,
			      const char *type, const void *body, size_t len,
			      int copy)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		len, (void *)body,
		copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, "Content-Security-Policy",
				strstr(type, "svg") ? svg_csp : page_csp);
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* {"error": text, "exit": code} with status. */
static enum MHD_Result error(struct MHD_Connection *c, unsigned status,
			     const char *text, int exit_code)
{
	cJSON *o = cJSON_CreateObject();
	char *body;
	enum MHD_Result rc;

	cJSON_AddStringToObject(o, "error", text);
	if (exit_code)
		cJSON_AddNumberToObject(o, "exit", exit_code);
	body = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!body)
		return MHD_NO;
	rc = answer(c, status, "application/json", body, strlen(body), 1);
	free(body);
	return rc;
}

/* ---- the token and the host ------------------------------------------------
 */

static int same(const char *a, const char *b)
{
	size_t n = strlen(b);
	unsigned diff = 0;

	if (!a || strlen(a) != n)
		return 0;
	for (size_t i = 0; i < n; i++) /* in constant time */
		diff |= (unsigned)(a[i] ^ b[i]);
	return diff == 0;
}

/* On loopback the Host header must name loopback (a DNS-rebinding page
 * can only make it name its own domain); any port, for a forwarded one
 * (ssh -L 9000:127.0.0.1:8080).  Beyond loopback the token is the guard. */
static int host_ok(const struct web *w, struct MHD_Connection *c)
{
	static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	const char *colon;
	size_t n;

	if (!w->loopback)
		return 1;
	if (!h)
		return 0;
	colon = strrchr(h, ':');
	if (colon && strchr(colon, ']')) /* "[::1]" without a port */
		colon = NULL;
	n = colon ? (size_t)(colon - h) : strlen(h);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !strncasecmp(h, names[i], n))
			return 1;
	return 0;
}

/*
 * Did the page of this very server send the request (or the user, typing
 * or opening its address)?  A page elsewhere on the machine is the same
 * *site* (127.0.0.1 on any port), so SameSite lets its requests carry
 * our cookie: what tells them apart is the browser's Sec-Fetch-Site
 * (same-origin, or none for an address the user opened) and Origin (our
 * own scheme, host and port, as Host says).  A client that sends neither
 * (curl, an old browser) is not a page of another site's making; POST's
 * header still guards what acts.
 */
static int fetch_ok(struct MHD_Connection *c, const char **why)
{
	const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       "Sec-Fetch-Site");
	const char *origin =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
	const char *host =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");

	if (site && strcmp(site, "same-origin") && strcmp(site, "none")) {
		*why = "refused: the request came from another page "
		       "(Sec-Fetch-Site), not this server's own";
		return 0;
	}
	if (origin && (!host || strncmp(origin, "http://", 7) ||
		       strcasecmp(origin + 7, host))) {
		*why = "refused: the request came from another origin "
		       "(Origin), not this server's own";
		return 0;
	}
	return 1;
}

static int cookie_ok(const struct web *w, struct MHD_Connection *c)
{
	return same(MHD_lookup_connection_value(c, MHD_COOKIE_KIND,
						w->cookie),
		    w->token);
}

static int header_ok(const struct web *w, struct MHD_Connection *c)
{
	return same(MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						"X-Probing-Token"),
		    w->token);
}

/* GET /?token=T: the cookie, and the page without the token in its URL. */
static enum MHD_Result let_in(const struct web *w, struct MHD_Connection *c,
			      const char *target)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	char cookie[200], where[300];
	enum MHD_Result rc;

	if (!r)
		return MHD_NO;
	/* The target goes into the Location header: a pid, a run name,
	 * HOST:PORT or @name only. */
	for (const char *p = target; p && *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_.:@/-[]", *p))
			target = NULL;
	snprintf(cookie, sizeof(cookie),
		 "%s=%s; Path=/; HttpOnly; SameSite=Strict", w->cookie,
		 w->token);
	snprintf(where, sizeof(where), "/%s%s", target ? "#agent/" : "",
		 target ? target : "");
	MHD_add_response_header(r, "Set-Cookie", cookie);
	MHD_add_response_header(r, "Location", where);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	rc = MHD_queue_response(c, MHD_HTTP_SEE_OTHER, r);
	MHD_destroy_response(r);
	return rc;
}

/* ---- routes ---------------------------------------------------------------
 */

/* The query parameters route takes, typed as its parameters say. */
static cJSON *args_of(const struct web_route *rt, struct MHD_Connection *c)
{
	cJSON *a = cJSON_CreateObject();

	for (const struct op_param *p = rt->params; a && p->name; p++) {
		const char *v = MHD_lookup_connection_value(
			c, MHD_GET_ARGUMENT_KIND, p->name);
		char *end;
		long n;

		if (!v)
			continue;
		if (p->type == OP_BOOL)
			cJSON_AddBoolToObject(a, p->name,
					      !strcmp(v, "1") ||
						      !strcmp(v, "true"));
		else if (p->type == OP_INT) {
			n = strtol(v, &end, 10);
			if (*end || !*v)
				cJSON_AddStringToObject(a, p->name, v);
			else
				cJSON_AddNumberToObject(a, p->name, (double)n);
		} else {
			cJSON_AddStringToObject(a, p->name, v);
		}
	}
	return a;
}

/* Keeps body (taken) under a new id; 0, or -1 (body freed). */
static int store(char *body, size_t len, char *id)
{
	unsigned char b[STORED_ID_HEX];
	struct stored *st;

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		free(body);
		return -1;
	}
	for (int i = 0; i < STORED_ID_HEX; i++)
		snprintf(id + 2 * i, 3, "%02x", b[i]);
	pthread_mutex_lock(&stored_lock);
	st = &stored[stored_next++ % STORED_MAX];
	free(st->body);
	memcpy(st->id, id, sizeof(st->id));
	st->body = body;
	st->len = len;
	pthread_mutex_unlock(&stored_lock);
	return 0;
}

/* GET of a stored route: the answer kept under ?id=, never acting. */
static enum MHD_Result stored_answer(struct MHD_Connection *c,
				     const struct web_route *rt)
{
	const char *id =
		MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "id");
	enum MHD_Result rc = MHD_NO;
	int found = 0;

	pthread_mutex_lock(&stored_lock);
	for (int i = 0; id && i < STORED_MAX && !found; i++)
		if (stored[i].body && same(id, stored[i].id)) {
			found = 1;
			rc = answer(c, MHD_HTTP_OK, rt->type, stored[i].body,
				    stored[i].len, 1);
		}
	pthread_mutex_unlock(&stored_lock);
	if (!found)
		return error(c, MHD_HTTP_NOT_FOUND,
			     "no such answer (POST makes one)", 0);
	return rc;
}

static enum MHD_Result route(struct MHD_Connection *c,
			     const struct web_route *rt)
{
	struct op_words words = {.n = 0};
	struct op_result r;
	char err[1024] = "";
	cJSON *args = args_of(rt, c);
	int ms = 0;
	enum MHD_Result rc;

	if (!args)
		return error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "no memory", 0);
	if (ops_check(rt->path, rt->params, args, err, sizeof(err)) ||
	    rt->build(args, &words, err, sizeof(err))) {
		cJSON_Delete(args);
		return error(c, MHD_HTTP_BAD_REQUEST,
			     *err ? err : "too many words", 0);
	}
	if (cJSON_GetObjectItemCaseSensitive(args, "duration"))
		ops_duration(args, "5s", &ms, err, sizeof(err));
	if (ops_exec(&words, rt->timeout_ms + ms, &r, err, sizeof(err))) {
		cJSON_Delete(args);
		return error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, err, 0);
	}
	cJSON_Delete(args);
	if (r.ok && rt->stored) {
		char id[STORED_ID_HEX * 2 + 1], body[256];

		if (store(r.text, strlen(r.text), id))
			return error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				     "no random bytes for an id", 0);
		r.text = NULL; /* kept */
		snprintf(body, sizeof(body), "{\"url\":\"%s?id=%s\"}",
			 rt->path, id);
		return answer(c, MHD_HTTP_OK, "application/json", body,
			      strlen(body), 1);
	}
	if (r.ok)
		rc = answer(c, MHD_HTTP_OK, rt->type, r.text, strlen(r.text),
			    1);
	else
		rc = error(c, 422, r.text, r.status > 0 ? r.status : 5);
	ops_result_free(&r);
	return rc;
}

/* ---- the handler ------------------------------------------------------------
 */

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_len, void **state)
{
	static int seen;
	const struct web *w = cls;
	const struct web_route *rt;
	const char *why;
	int post = !strcmp(method, "POST");

	(void)version, (void)upload;
	if (!*state) { /* the headers: answer when the body is in */
		*state = &seen;
		return MHD_YES;
	}
	if (*upload_len) { /* a body: not read, nothing takes one */
		*upload_len = 0;
		return MHD_YES;
	}
	if (!host_ok(w, c))
		return error(c, MHD_HTTP_FORBIDDEN,
			     "this server answers to its own address only "
			     "(the Host header)",
			     0);
	if (!fetch_ok(c, &why))
		return error(c, MHD_HTTP_FORBIDDEN, why, 0);
	if (!post && strcmp(method, "GET") && strcmp(method, "HEAD"))
		return error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or POST", 0);
	if (!strcmp(url, "/") &&
	    same(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token"),
		 w->token))
		return let_in(w, c,
			      MHD_lookup_connection_value(
				      c, MHD_GET_ARGUMENT_KIND, "target"));
	if (!cookie_ok(w, c) && !header_ok(w, c)) {
		static const char page[] =
			"<!doctype html><title>probing web</title><p>Open the "
			"address <code>probing web</code> printed: it carries "
			"the token this page needs.";

		return answer(c, MHD_HTTP_UNAUTHORIZED,
			      "text/html; charset=utf-8", page,
			      sizeof(page) - 1, 0);
	}
	for (const struct web_asset *a = web_assets; a->path; a++)
		if (!strcmp(url, a->path))
			return post ? error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
					    "GET", 0)
				    : answer(c, MHD_HTTP_OK, a->type, a->data,
					     a->len, 0);
	if (!strcmp(url, "/api/session")) { /* the token, for POST headers */
		char body[TOKEN_HEX * 2 + 16];

		snprintf(body, sizeof(body), "{\"token\":\"%s\"}", w->token);
		return answer(c, MHD_HTTP_OK, "application/json", body,
			      strlen(body), 1);
	}
	rt = web_route_find(url);
	if (!rt)
		return error(c, MHD_HTTP_NOT_FOUND, "no such page", 0);
	if (rt->stored && !post)
		return stored_answer(c, rt);
	if (rt->post != post)
		return error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
			     rt->post ? "POST" : "GET", 0);
	/* A POST acts on the target: the header too, which no other site's
	 * page can send here (CORS preflight is never answered). */
	if (post && !header_ok(w, c))
		return error(c, MHD_HTTP_FORBIDDEN,
			     "POST needs the X-Probing-Token header", 0);
	return route(c, rt);
}

/* ---- serving ---------------------------------------------------------------
 */

static int make_token(char *out)
{
	unsigned char b[TOKEN_HEX];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -1;
	for (int i = 0; i < TOKEN_HEX; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	return 0;
}

int web_serve(const struct web_opts *o, FILE *say, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV | AI_PASSIVE},
			*ai = NULL;
	static struct web w;
	char host[256], port[16], shown[300];
	const union MHD_DaemonInfo *info;
	struct MHD_Daemon *d;
	unsigned flags;
	sigset_t stop;
	int rc, sig, bound;

	if (listen_split(o->listen, host, sizeof(host), port, sizeof(port))) {
		snprintf(err, errlen, "--listen %s: give HOST:PORT", o->listen);
		return -1;
	}
	if ((rc = getaddrinfo(host, port, &hints, &ai))) {
		snprintf(err, errlen, "--listen %s: %s", o->listen,
			 gai_strerror(rc));
		return -1;
	}
	if (o->token)
		snprintf(w.token, sizeof(w.token), "%s", o->token);
	else if (make_token(w.token)) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "no random bytes for a token: %s",
			 strerror(errno));
		return -1;
	}
	/* The signals end it: blocked before MHD's threads start, so they
	 * inherit the mask and sigwait below takes them. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	d = MHD_start_daemon(
		flags, 0, NULL, NULL, handle, &w, MHD_OPTION_SOCK_ADDR,
		ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, CONNECTIONS_MAX,
		MHD_OPTION_CONNECTION_TIMEOUT, 300u, MHD_OPTION_END);
	if (!d) {
		snprintf(err, errlen,
			 "cannot listen on %s (in use, or not an address of "
			 "this machine)",
			 o->listen);
		freeaddrinfo(ai);
		return -1;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	bound = info ? info->port : atoi(port);
	snprintf(shown, sizeof(shown), "%s%s%s:%d",
		 ai->ai_family == AF_INET6 ? "[" : "", host,
		 ai->ai_family == AF_INET6 ? "]" : "", bound);
	w.loopback = listen_loopback(ai->ai_addr);
	/* Cookies do not tell ports apart: a server on another port keeps
	 * its own cookie, never this one's. */
	snprintf(w.cookie, sizeof(w.cookie), COOKIE "%d", bound);
	fprintf(say, "probing web: http://%s/?token=%s%s%s\n", shown, w.token,
		o->target ? "&target=" : "", o->target ? o->target : "");
	if (!listen_loopback(ai->ai_addr))
		fprintf(say, "probing web: listening beyond loopback: anyone "
			     "with the address above (and its token) reaches "
			     "every agent you can\n");
	fflush(say);
	freeaddrinfo(ai);
	while (sigwait(&stop, &sig) == EINTR)
		;
	MHD_stop_daemon(d);
	return 0;
}
