/*
 * req_cluster: probing/cluster — adds nodes to this agent's node list
 * (cluster.nodes), for jobs without a rendezvous store.
 *
 * Arguments: add: [{addr: "HOST:PORT", rank?: N}, ...] (or plain address
 * strings), all or nothing as far as their form goes.  Body: nodes (how
 * many are listed now), status (cluster.status).
 */
#include <stdio.h>
#include <string.h>

#include "cluster/cluster.h"
#include "core/config.h"
#include "server/handler.h"

#define ADD_MAX 65536

/* One entry of add: its address and rank (-1: the next free one). */
static int entry(const cJSON *it, const char **addr, int64_t *rank)
{
	const cJSON *a, *r;

	*rank = -1;
	if (cJSON_IsString(it)) {
		*addr = it->valuestring;
		return 0;
	}
	if (!cJSON_IsObject(it))
		return -1;
	a = cJSON_GetObjectItemCaseSensitive(it, "addr");
	r = cJSON_GetObjectItemCaseSensitive(it, "rank");
	if (!cJSON_IsString(a))
		return -1;
	if (r && !cJSON_IsNull(r)) {
		if (!cJSON_IsNumber(r) || r->valuedouble < 0 ||
		    r->valuedouble > 1e15 ||
		    r->valuedouble != (double)(int64_t)r->valuedouble)
			return -1;
		*rank = (int64_t)r->valuedouble;
	}
	*addr = a->valuestring;
	return 0;
}

static void run_cluster(struct request *req)
{
	const cJSON *add = NULL, *it;
	char err[512], status[CONFIG_VALUE_MAX];
	const char *addr;
	int64_t rank;
	cJSON *body;

	if (dap_arg_array(req->args, "add", &add, err, sizeof(err)) < 0) {
		request_fail(req, DAP_ERROR_FAILED, "%s", err);
		return;
	}
	if (add && cJSON_GetArraySize(add) > ADD_MAX) {
		request_fail(req, DAP_ERROR_FAILED, "too many nodes at once (max %d)", ADD_MAX);
		return;
	}
	/* The form of every entry first, so that a bad one adds nothing. */
	cJSON_ArrayForEach(it, add)
	{
		if (entry(it, &addr, &rank)) {
			request_fail(req, DAP_ERROR_FAILED, "argument 'add' must be an array "
				     "of \"HOST:PORT\" or {addr, rank}");
			return;
		}
	}
	cJSON_ArrayForEach(it, add)
	{
		entry(it, &addr, &rank);
		if (cluster_add(addr, rank, err, sizeof(err))) {
			request_fail(req, DAP_ERROR_FAILED, "%s", err);
			return;
		}
	}
	body = request_ok(req);
	if (!body)
		return;
	cJSON_AddNumberToObject(body, "nodes", (double)cluster_count());
	config_get("cluster.status", status, sizeof(status));
	cJSON_AddStringToObject(body, "status", status);
}

const struct handler handler_cluster = {
	.command = "probing/cluster",
	.run = run_cluster,
};
