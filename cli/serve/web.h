/*
 * web: `probing web`, a local web page over the agents (docs/web.md).
 *
 * An HTTP server (libmicrohttpd, a thread per connection) serving the
 * page's own assets (cli/web/, built into the binary: nothing is fetched
 * at run time) and the routes of webroutes.h, each a CLI command run as
 * its own process.  Nothing new listens inside a target.
 *
 * Every request needs the server's token: the URL it prints carries it
 * once (?token=), which becomes an HttpOnly, SameSite=Strict cookie named
 * for the server's port (probing_web_PORT: cookies do not tell ports
 * apart).  Every request must come from the server's own page or the
 * user: a Sec-Fetch-Site other than same-origin or none, or an Origin
 * other than http://HOST (the Host header), is refused (403) — a page on
 * another port of the machine is the same site, so SameSite alone would
 * let its requests carry the cookie.  What acts on a target is POST only
 * (webroutes.h), and POST needs the token in an X-Probing-Token header as
 * well.  On loopback (the default) the Host header must name loopback, on
 * any port (no DNS rebinding; a forwarded port works).
 */
#ifndef CLI_WEB_H
#define CLI_WEB_H

#include <stdio.h>

struct web_opts {
	const char *listen; /* "HOST:PORT" (PORT 0: any free one) */
	const char *token;  /* NULL: a random one */
	const char *target; /* the page opens on this agent, or NULL */
};

/* Serves until SIGINT or SIGTERM; says where (the URL with its token) on
 * say.  Returns 0, or -1 with the reason in err. */
int web_serve(const struct web_opts *o, FILE *say, char *err, size_t errlen);

#endif
