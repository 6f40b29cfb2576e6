/*
 * req_config: probing/config — read every setting, change some.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/agent.h"
#include "core/config.h"
#include "core/config_compat.h"
#include "core/config_lease.h"
#include "core/readonly.h"
#include "dap_addr.h"
#include "memory/memory.h"
#include "server/handler.h"

#define LEASE_MS_MAX (24 * 3600 * 1000LL)

/* A value as text: strings as they are, numbers and booleans printed. */
static int value_text(const cJSON *v, char *out, size_t outlen)
{
	if (cJSON_IsString(v))
		snprintf(out, outlen, "%s", v->valuestring);
	else if (cJSON_IsBool(v))
		snprintf(out, outlen, "%s", cJSON_IsTrue(v) ? "on" : "off");
	else if (cJSON_IsNumber(v) && v->valuedouble == (double)(long long)v->valuedouble)
		snprintf(out, outlen, "%lld", (long long)v->valuedouble);
	else if (cJSON_IsNumber(v))
		snprintf(out, outlen, "%g", v->valuedouble);
	else
		return -1;
	return 0;
}

/* Checks one setting: 1 with the request failed when it is refused.  In
 * read-only mode the latch (server.readonly) stays on and settings that
 * run code, write files or send signals (readonly_refuses_setting) do
 * not change: DAP_ERROR_READONLY. */
static int refused(const char *name, const char *text, struct request *req)
{
	char err[512];
	int rc, ro = readonly_on();

	if (readonly_refuses_setting(name, text, err, sizeof(err))) {
		request_fail(req, DAP_ERROR_READONLY, "%s", err);
		return 1;
	}
	rc = config_check(name, text, err, sizeof(err));
	if (rc) {
		request_fail(req, rc == -EPERM && ro ? DAP_ERROR_READONLY
						     : DAP_ERROR_FAILED,
			     "%s%s", rc == -EPERM && ro ? "read-only mode: " : "",
			     err);
		return 1;
	}
	return 0;
}

static void run_config(struct request *req)
{
	const cJSON *set = NULL, *it;
	char err[512], text[CONFIG_VALUE_MAX], value[CONFIG_VALUE_MAX];
	const char *name, *doc;
	cJSON *body, *arr, *s;
	int64_t lease = 0;

	if (dap_arg_object(req->args, "set", &set, err, sizeof(err)) < 0 ||
	    dap_arg_int(req->args, "restoreAfterMs", &lease, err,
			sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (lease < 0 || lease > LEASE_MS_MAX) {
		request_fail(req, DAP_ERROR_FAILED,
			     "restoreAfterMs must be in [1, %lld] (0 or none: "
			     "for good)",
			     (long long)LEASE_MS_MAX);
		return;
	}
	/* All or nothing: check every value before setting any. */
	cJSON_ArrayForEach(it, set)
	{
		if (value_text(it, text, sizeof(text))) {
			request_fail(req, DAP_ERROR_FAILED, "%s: value must be a string, "
				     "number or boolean", it->string);
			return;
		}
		if (refused(it->string, text, req))
			return;
	}
	if (lease && set &&
	    cJSON_GetObjectItemCaseSensitive(set, "server.listen")) {
		request_fail(req, DAP_ERROR_FAILED,
			     "server.listen is set for good, never for a while "
			     "(restoreAfterMs)");
		return;
	}
	/* server.listen takes effect now, before anything is set: listens
	 * there, and no longer where it said before. */
	it = set ? cJSON_GetObjectItemCaseSensitive(set, "server.listen") : NULL;
	if (it && value_text(it, text, sizeof(text)) == 0) {
		char canon[DAP_ADDR_TEXT_MAX];
		if (agent_set_listen(text, canon, sizeof(canon), err,
				     sizeof(err))) {
			request_fail(req, DAP_ERROR_FAILED, "server.listen: %s", err);
			return;
		}
	}
	/* For a while (the value from before comes back at the lease's
	 * end, unless changed meanwhile), or for good (which ends a lease
	 * of it: the client put it back itself). */
	cJSON_ArrayForEach(it, set)
	{
		value_text(it, text, sizeof(text));
		if (!lease)
			config_lease_drop(it->string);
		else if (config_lease_take(it->string, text, lease)) {
			request_fail(req, DAP_ERROR_FAILED,
				     "%s: no room to set it for a while "
				     "(%d settings are already)",
				     it->string, CONFIG_LEASES_MAX);
			return;
		}
	}
	cJSON_ArrayForEach(it, set)
	{
		if (!strcmp(it->string, "server.listen"))
			continue; /* set above, as its canonical address */
		value_text(it, text, sizeof(text));
		config_set(it->string, text, err, sizeof(err));
	}
	if (lease)
		memory_wake(); /* the recorder thread's next look */
	body = request_ok(req);
	/* An original name set: which of ours it set ("settingsOf"), so
	 * that a client shows the resulting values. */
	cJSON_ArrayForEach(it, set)
	{
		const char *ours = config_compat_sets(it->string);
		cJSON *of;

		if (!ours || !body)
			continue;
		of = cJSON_GetObjectItemCaseSensitive(body, "settingsOf");
		if (!of)
			of = cJSON_AddObjectToObject(body, "settingsOf");
		if (of)
			cJSON_AddStringToObject(of, it->string, ours);
	}
	arr = body ? cJSON_AddArrayToObject(body, "settings") : NULL;
	for (size_t i = 0; arr && config_entry(i, &name, value, sizeof(value),
					       &doc) == 0; i++) {
		s = cJSON_CreateObject();
		if (!s)
			break;
		cJSON_AddStringToObject(s, "name", name);
		cJSON_AddStringToObject(s, "value", value);
		cJSON_AddStringToObject(s, "doc", doc);
		cJSON_AddItemToArray(arr, s);
	}
}

const struct handler handler_config = {
	.command = "probing/config",
	.run = run_config,
};
