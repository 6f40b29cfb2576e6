/*
 * readonly: read-only mode.  See readonly.h.
 */
#include "readonly.h"

#include <errno.h>
#include <stdio.h>

#include "config.h"
#include "server/handler.h"

int readonly_on(void)
{
	return config_bool("server.readonly");
}

int readonly_refuses(const char *command, unsigned flags, char *err,
		     size_t errlen)
{
	if (!(flags & (HANDLER_RUNS_CODE | HANDLER_STOPS)) || !readonly_on())
		return 0;
	snprintf(err, errlen, "read-only mode: '%s' is refused: it %s (the "
		 "agent runs with server.readonly on: it may be looked at, "
		 "not changed)", command,
		 flags & HANDLER_RUNS_CODE ? "runs code in the target"
					   : "can stop the target");
	return -EPERM;
}
