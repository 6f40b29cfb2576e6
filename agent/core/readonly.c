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

int readonly_refuses_setting(const char *name, const char *value, char *err,
			     size_t errlen)
{
	unsigned fx;

	if (!readonly_on() || !(fx = config_effects(name, value)))
		return 0;
	snprintf(err, errlen, "read-only mode: %s cannot be changed (it %s)",
		 name,
		 fx & CONFIG_RUNS_CODE ? "makes the target run code: watched "
					 "variables"
		 : fx & CONFIG_WRITES  ? "makes the agent write or delete "
					 "files as the target's user"
				       : "makes the agent send signals to the "
					 "program's threads");
	return -EPERM;
}
