/*
 * readonly: read-only mode.  See readonly.h.
 */
#include "readonly.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config.h"

/* Requests that run code in the target or stop it. */
static const char *const refused[] = {
	"evaluate",	   "completions",
	"setVariable",	   "attach",
	"configurationDone", "setBreakpoints",
	"setFunctionBreakpoints", "setExceptionBreakpoints",
	"pause",	   "next",
	"stepIn",	   "stepOut",
};

int readonly_on(void)
{
	return config_bool("server.readonly");
}

static int is_off(const cJSON *v)
{
	static const char *const no[] = {"0", "off", "false", "no", ""};

	if (cJSON_IsFalse(v))
		return 1;
	if (cJSON_IsNumber(v))
		return v->valuedouble == 0;
	if (!cJSON_IsString(v))
		return 0;
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (!strcasecmp(v->valuestring, no[i]))
			return 1;
	return 0;
}

/* Does a torch.profiling value ("on,key=value,...") set torch.watch? */
static int switch_sets_watch(const cJSON *v)
{
	const char *p;

	if (!cJSON_IsString(v))
		return 0;
	for (p = strchr(v->valuestring, ','); p; p = strchr(p + 1, ',')) {
		const char *key = p + 1;
		size_t n = strcspn(key, "=,");

		while (n && *key == ' ')
			key++, n--;
		if ((n == 5 && !strncmp(key, "exprs", 5)) ||
		    (n == 5 && !strncmp(key, "watch", 5)))
			return 1;
	}
	return 0;
}

static int config_allowed(const cJSON *args, char *err, size_t errlen)
{
	const cJSON *set = args ? cJSON_GetObjectItemCaseSensitive(args, "set")
				: NULL, *it;

	cJSON_ArrayForEach(it, set)
	{
		if (!it->string)
			continue;
		if (!strcmp(it->string, "server.readonly") && is_off(it)) {
			snprintf(err, errlen,
				 "read-only mode: server.readonly cannot be "
				 "switched off while the agent runs");
			return -EPERM;
		}
		if (!strcmp(it->string, "torch.watch") ||
		    (!strcmp(it->string, "torch.profiling") &&
		     switch_sets_watch(it))) {
			snprintf(err, errlen,
				 "read-only mode: watched variables "
				 "(torch.watch) cannot be changed");
			return -EPERM;
		}
	}
	return 0;
}

int readonly_check(const char *command, const cJSON *args, char *err,
		   size_t errlen)
{
	const cJSON *action;

	if (!readonly_on())
		return 0;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		if (strcmp(command, refused[i]) == 0) {
			snprintf(err, errlen,
				 "read-only mode: '%s' is refused (the agent "
				 "runs with server.readonly on: it may be "
				 "looked at, not changed)",
				 command);
			return -EPERM;
		}
	}
	if (!strcmp(command, "probing/debug")) {
		action = args ? cJSON_GetObjectItemCaseSensitive(args, "action")
			      : NULL;
		if (cJSON_IsString(action) &&
		    !strcmp(action->valuestring, "pause")) {
			snprintf(err, errlen,
				 "read-only mode: the target cannot be "
				 "paused (probing/debug pause is refused)");
			return -EPERM;
		}
		return 0;
	}
	if (!strcmp(command, "probing/config"))
		return config_allowed(args, err, errlen);
	return 0;
}
