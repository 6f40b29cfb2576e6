/*
 * webassets: the web page's files (cli/web/), built into the binary by
 * cli/web/embed.cmake.
 */
#ifndef CLI_WEBASSETS_H
#define CLI_WEBASSETS_H

#include <stddef.h>

struct web_asset {
	const char *path; /* "/app.js"; the page itself is "/" */
	const char *type; /* Content-Type */
	const unsigned char *data;
	size_t len;
};

/* Ends with one whose path is NULL. */
extern const struct web_asset web_assets[];

#endif
