/*
 * log: see log.h.
 */
#include "log.h"
#include "env.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static int level = -1;

static int current_level(void)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	const char *env;

	if (level >= 0)
		return level;
	level = LOG_WARN;
	env = env_get("PROBING_LOG");
	for (int i = 0; env && i < 4; i++)
		if (strcasecmp(env, names[i]) == 0)
			level = i;
	return level;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if ((int)lvl > current_level())
		return;
	n = snprintf(line, sizeof(line), "[probing %d] ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere else to say it. */
	}
}
