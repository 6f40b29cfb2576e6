/*
 * cluster_chrome: the ranks' Chrome traces joined into one.  See
 * cluster_chrome.h.
 */
#include "cluster_chrome.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbuf.h"

/* Appends ev (compact), after a separator when not the first. */
static void jevent(struct outbuf *b, const cJSON *ev, size_t *nev)
{
	char *text = cJSON_PrintUnformatted(ev);

	if (!text) {
		b->err = -ENOMEM;
		return;
	}
	outbuf_puts(b, (*nev)++ ? ",\n" : "\n");
	outbuf_puts(b, text);
	free(text);
}

static double start_of(const cJSON *doc)
{
	const cJSON *od = cJSON_GetObjectItemCaseSensitive(doc, "otherData");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(od, "startTime");

	return cJSON_IsNumber(st) ? st->valuedouble : NAN;
}

/* The pid of a trace (its first event's), or -1. */
static double pid_of(const cJSON *doc)
{
	const cJSON *evs = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetArrayItem(evs, 0), "pid");

	return cJSON_IsNumber(pid) ? pid->valuedouble : -1;
}

/* One rank's events into b: pid replaced by newpid, times shifted. */
static void join_one(struct outbuf *b, const cJSON *doc, int64_t rank,
		     const char *host, double newpid, double shift_us,
		     size_t *nev)
{
	const cJSON *evs = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
	char name[512];
	cJSON *ev;

	/* The viewers add " (pid N)" of the event's pid themselves; the
	 * process's own pid only where the trace's had to change. */
	if (newpid == pid_of(doc))
		snprintf(name, sizeof(name), "rank %lld%s%s", (long long)rank,
			 host && *host ? " on " : "", host ? host : "");
	else
		snprintf(name, sizeof(name), "rank %lld%s%s, pid %.0f",
			 (long long)rank, host && *host ? " on " : "",
			 host ? host : "", pid_of(doc));
	cJSON_ArrayForEach(ev, evs)
	{
		cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
		cJSON *nm = cJSON_GetObjectItemCaseSensitive(ev, "name");
		cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
		cJSON *pid = cJSON_GetObjectItemCaseSensitive(ev, "pid");

		if (cJSON_IsNumber(pid))
			cJSON_SetNumberValue(pid, newpid);
		if (cJSON_IsNumber(ts))
			cJSON_SetNumberValue(ts, ts->valuedouble + shift_us);
		if (cJSON_IsString(ph) && !strcmp(ph->valuestring, "M") &&
		    cJSON_IsString(nm) &&
		    !strcmp(nm->valuestring, "process_name")) {
			cJSON *args =
				cJSON_GetObjectItemCaseSensitive(ev, "args");
			cJSON_DeleteItemFromObjectCaseSensitive(args, "name");
			cJSON_AddStringToObject(args, "name", name);
		}
		jevent(b, ev, nev);
	}
	snprintf(name, sizeof(name),
		 "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":"
		 "%.0f,\"tid\":0,\"args\":{\"sort_index\":%lld}}",
		 newpid, (long long)rank);
	outbuf_puts(b, *nev ? ",\n" : "\n");
	outbuf_puts(b, name);
	(*nev)++;
}

int cluster_chrome_join(const int64_t *ranks, const char *const *hosts,
			const char *const *docs, size_t n, char **out,
			size_t *len, char *err, size_t errlen)
{
	cJSON **parsed = calloc(n ? n : 1, sizeof(*parsed));
	double *pids = calloc(n ? n : 1, sizeof(*pids));
	struct outbuf b = {.max = CLUSTER_CHROME_MAX};
	double t0 = INFINITY;
	size_t nev = 0;
	char head[256];
	int rc = 0;

	if (!parsed || !pids) {
		free(parsed);
		free(pids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		if (!docs[i])
			continue;
		parsed[i] = cJSON_Parse(docs[i]);
		if (!parsed[i] || isnan(start_of(parsed[i]))) {
			snprintf(err, errlen,
				 "rank %lld: its Chrome trace "
				 "does not parse",
				 (long long)ranks[i]);
			rc = -EINVAL;
			break;
		}
		if (start_of(parsed[i]) < t0)
			t0 = start_of(parsed[i]);
		/* Ranks on different hosts may share a pid: keep the
		 * processes apart. */
		pids[i] = pid_of(parsed[i]);
		for (size_t j = 0; j < i; j++)
			if (parsed[j] && pids[j] == pids[i])
				pids[i] = 1073741824.0 + (double)ranks[i];
	}
	if (!rc) {
		snprintf(head, sizeof(head),
			 "{\"displayTimeUnit\":\"ms\",\"otherData\":{"
			 "\"exporter\":\"probing\",\"startTime\":%.6f,"
			 "\"ranks\":%zu},\"traceEvents\":[",
			 isinf(t0) ? 0.0 : t0, n);
		outbuf_puts(&b, head);
		for (size_t i = 0; i < n; i++)
			if (parsed[i])
				join_one(&b, parsed[i], ranks[i],
					 hosts ? hosts[i] : NULL, pids[i],
					 (start_of(parsed[i]) - t0) * 1e6,
					 &nev);
		outbuf_puts(&b, "\n]}\n");
		rc = b.err;
		if (rc == -E2BIG)
			snprintf(err, errlen,
				 "the joined trace is larger than "
				 "%u MiB: record fewer ranks or a shorter time",
				 CLUSTER_CHROME_MAX >> 20);
		else if (rc)
			snprintf(err, errlen, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		cJSON_Delete(parsed[i]);
	free(parsed);
	free(pids);
	if (rc) {
		free(b.p);
		return rc;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}
