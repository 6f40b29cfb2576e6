/*
 * cluster_bt: `probing cluster backtrace` — every rank's main thread, the
 * identical stacks grouped (stackgroup.h), the odd ones out first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cluster.h"
#include "render/stackgroup.h"

#define CLUSTER_NAME_BUF 1024 /* a name shown, escaped */

#define NATIVE_SHOWN 16 /* native frames shown per group */

/* The main thread's frames of a probing/backtrace body into s; *thread
 * its JSON. */
static int main_stack(const cJSON *body, struct sg_stack *s,
		      const cJSON **thread)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(body, "threads");
	const cJSON *th, *frames, *f;
	struct sg_frame *v;
	size_t k = 0;

	cJSON_ArrayForEach(th, threads)
	{
		if (cJSON_IsTrue(
			    cJSON_GetObjectItemCaseSensitive(th, "isMain")))
			break;
	}
	if (!th)
		th = cJSON_GetArrayItem(threads, 0); /* no main: the first */
	*thread = th;
	frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
	v = calloc((size_t)cJSON_GetArraySize(frames) + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	cJSON_ArrayForEach(f, frames)
	{
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "func");
		const cJSON *fl = cJSON_GetObjectItemCaseSensitive(f, "file");
		const cJSON *ln = cJSON_GetObjectItemCaseSensitive(f, "line");

		v[k].func = cJSON_IsString(fn) ? fn->valuestring : "?";
		v[k].file = cJSON_IsString(fl) ? fl->valuestring : "?";
		v[k].line = cJSON_IsNumber(ln) ? (int64_t)ln->valuedouble : -1;
		k++;
	}
	s->frames = v;
	s->n = k;
	return 0;
}

/* One frame's line(s) in a group: "12", or "12,15" when ranks differ. */
static void lines_of(const struct sg_stack *st, const struct sg_group *g,
		     size_t d, char *out, size_t outlen)
{
	size_t len = 0;

	out[0] = 0;
	for (size_t m = 0; m < g->n && len + 24 < outlen; m++) {
		int64_t l = st[g->members[m]].frames[d].line;
		int seen = 0;

		for (size_t p = 0; p < m && !seen; p++)
			seen = st[g->members[p]].frames[d].line == l;
		if (!seen)
			len += (size_t)snprintf(out + len, outlen - len,
						"%s%lld", len ? "," : "",
						(long long)l);
	}
}

/* A thread's native frames (probing/backtrace with native), innermost
 * first, at most NATIVE_SHOWN. */
static void print_native(const cJSON *thread)
{
	const cJSON *frames =
		cJSON_GetObjectItemCaseSensitive(thread, "nativeFrames");
	const cJSON *err =
		cJSON_GetObjectItemCaseSensitive(thread, "nativeError");
	const cJSON *f;
	int k = 0, n = cJSON_GetArraySize(frames);

	char b1[CLUSTER_NAME_BUF], b2[CLUSTER_NAME_BUF];

	/* Names are the ranks' own: escaped (cli_text_fit). */
	if (cJSON_IsString(err))
		printf("  native: %s\n",
		       cli_text_fit(err->valuestring, 0, b1, sizeof(b1)));
	if (!n)
		return;
	printf("  native (innermost first):\n");
	cJSON_ArrayForEach(f, frames)
	{
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(f, "func");
		const cJSON *ob = cJSON_GetObjectItemCaseSensitive(f, "object");

		if (k++ == NATIVE_SHOWN) {
			printf("    ... %d more\n", n - NATIVE_SHOWN);
			break;
		}
		printf("    %s (%s)\n",
		       cli_text_fit(cJSON_IsString(fn) && *fn->valuestring
					    ? fn->valuestring
					    : "?",
				    0, b1, sizeof(b1)),
		       cli_text_fit(cJSON_IsString(ob) ? ob->valuestring : "?",
				    0, b2, sizeof(b2)));
	}
}

static void print_groups(const struct sg_stack *st, size_t nst,
			 const struct sg_group *g, size_t ng,
			 const cJSON *const *threads)
{
	char ranges[4096], lines[256], b1[CLUSTER_NAME_BUF],
		b2[CLUSTER_NAME_BUF];
	int64_t *ranks = malloc((nst ? nst : 1) * sizeof(*ranks));

	for (size_t i = 0; ranks && i < ng; i++) {
		const struct sg_stack *first = &st[g[i].members[0]];

		for (size_t m = 0; m < g[i].n; m++)
			ranks[m] = st[g[i].members[m]].rank;
		stackgroup_ranges(ranks, g[i].n, ranges, sizeof(ranges));
		printf("%s%s %s (%zu of %zu)", i ? "\n" : "",
		       g[i].n == 1 ? "rank" : "ranks", ranges, g[i].n, nst);
		if (first->n)
			printf(": %s\n", cli_text_fit(first->frames[0].func, 0,
						       b1, sizeof(b1)));
		else
			printf("\n");
		for (size_t d = 0; d < first->n; d++) {
			lines_of(st, &g[i], d, lines, sizeof(lines));
			printf("  #%-2zu %s (%s:%s)\n", d,
			       cli_text_fit(first->frames[d].func, 0, b1,
					    sizeof(b1)),
			       cli_text_fit(first->frames[d].file, 0, b2,
					    sizeof(b2)),
			       lines);
		}
		if (!first->n)
			printf("  (no Python frames)\n");
		print_native(threads[g[i].members[0]]);
	}
	free(ranks);
}

static void json_groups(const struct sg_stack *st, const struct sg_group *g,
			size_t ng)
{
	cJSON *arr = cJSON_CreateArray();
	char *text;

	for (size_t i = 0; i < ng; i++) {
		const struct sg_stack *first = &st[g[i].members[0]];
		cJSON *o = cJSON_CreateObject(), *r, *fr;

		r = cJSON_AddArrayToObject(o, "ranks");
		for (size_t m = 0; m < g[i].n; m++)
			cJSON_AddItemToArray(
				r, cJSON_CreateNumber(
					   (double)st[g[i].members[m]].rank));
		fr = cJSON_AddArrayToObject(o, "frames");
		for (size_t d = 0; d < first->n; d++) {
			cJSON *f = cJSON_CreateObject();

			cJSON_AddStringToObject(f, "func",
						first->frames[d].func);
			cJSON_AddStringToObject(f, "file",
						first->frames[d].file);
			cJSON_AddNumberToObject(f, "line",
						(double)first->frames[d].line);
			cJSON_AddItemToArray(fr, f);
		}
		cJSON_AddItemToArray(arr, o);
	}
	text = cJSON_Print(arr);
	if (text)
		printf("%s\n", text);
	free(text);
	cJSON_Delete(arr);
}

int cluster_bt_show(const struct fanout_node *nodes, size_t n,
		    const struct fanout_result *res, int lines,
		    enum cli_format fmt, const int *lead, int *ok)
{
	struct sg_stack *st = calloc(n ? n : 1, sizeof(*st));
	const cJSON **threads = calloc(n ? n : 1, sizeof(*threads));
	struct sg_group *g = NULL;
	size_t nst = 0, ng = 0;
	int rc = -ENOMEM;

	for (size_t i = 0; st && threads && i < n; i++) {
		ok[i] = 0;
		if (res[i].rc != CLI_OK || !res[i].resp ||
		    !res[i].resp->success)
			continue;
		if (main_stack(res[i].resp->body, &st[nst], &threads[nst]) ==
		    0) {
			st[nst].rank = nodes[i].rank;
			st[nst].lead = lead && lead[i];
			nst++;
			ok[i] = 1;
		}
	}
	if (st && threads)
		rc = stackgroup_build(st, nst, lines, &g, &ng);
	if (rc == 0 && fmt == CLI_FORMAT_JSON)
		json_groups(st, g, ng);
	else if (rc == 0)
		print_groups(st, nst, g, ng, threads);
	fflush(stdout);
	stackgroup_free(g, ng);
	for (size_t i = 0; i < nst; i++)
		free((void *)st[i].frames);
	free(st);
	free(threads);
	return rc;
}

int cluster_backtrace(const struct cluster_opts *o,
		      const struct fanout_node *nodes, size_t n, int lines,
		      enum cli_format fmt)
{
	struct fanout_result *res = calloc(n, sizeof(*res));
	int *ok = calloc(n, sizeof(*ok));
	int rc;

	if (!res || !ok) {
		free(res);
		free(ok);
		return cli_error(CLI_EFAIL, "out of memory");
	}
	fanout_run(nodes, n, "probing/backtrace", NULL, o->node_timeout_ms,
		   res);
	rc = cluster_bt_show(nodes, n, res, lines, fmt, NULL, ok)
		     ? cli_error(CLI_EFAIL, "out of memory")
		     : cluster_report(nodes, n, res, ok, "backtrace");
	for (size_t i = 0; i < n; i++)
		fanout_result_release(&res[i]);
	free(res);
	free(ok);
	return rc;
}
