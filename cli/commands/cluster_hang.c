/*
 * cluster_hang: `probing cluster hang` — for a stuck job, each rank's
 * last collective on each process group (python.comm_collective), the
 * verdict (render/hangverdict.h), then every rank's main thread grouped
 * as `cluster backtrace` shows it, with native frames (the wait inside
 * gloo or NCCL shows).
 *
 * Two requests to every node at once: a probing/query for the calls, a
 * probing/backtrace with the main thread's native frames (the only ones
 * shown: the other threads are not signalled).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "render/frames.h"
#include "render/hangverdict.h"

/* Each group's newest call, newest first: one scan of the live table. */
#define HANG_SQL                                                               \
	"SELECT pg, pg_ranks, op, seq, state, waited, error, pg_seq, "         \
	"(SELECT torch_last_seq FROM python.comm_groups g WHERE g.pg = c.pg) " \
	"FROM (SELECT *, row_number() OVER (PARTITION BY pg ORDER BY id "      \
	"DESC) AS k FROM python.comm_collective) AS c WHERE k = 1 ORDER BY "   \
	"id DESC LIMIT 16"

/* torch's Flight Recorder's newest entry on each group: the last call
 * torch started there (comm_groups.torch_last_seq; the recorder's own
 * numbers leave point-to-point calls out), where torch has one. */
#define FR_SQL                                                                 \
	"SELECT pg, op FROM python.comm_flight_recorder WHERE record_id IN "  \
	"(SELECT max(record_id) FROM python.comm_flight_recorder GROUP BY pg)"

#define WHERE_MAX 300

static const char *const kind_names[] = {
	"none",	    "mismatch", "missing", "behind",
	"failed",   "all_wait", "other",   "ahead"};

static void copy_text(char *out, size_t len, const cJSON *v)
{
	snprintf(out, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* The rows of a HANG_SQL answer into r->last. */
static void take_calls(const struct fanout_result *q, struct hv_rank *r)
{
	const cJSON *rows, *row;

	if (q->rc != CLI_OK || !q->resp || !q->resp->success)
		return;
	rows = cJSON_GetObjectItemCaseSensitive(q->resp->body, "rows");
	cJSON_ArrayForEach(row, rows)
	{
		struct hv_call *c = &r->last[r->nlast];
		const cJSON *seq = cJSON_GetArrayItem(row, 3);
		const cJSON *st = cJSON_GetArrayItem(row, 4);
		const cJSON *w = cJSON_GetArrayItem(row, 5);
		const cJSON *pgs = cJSON_GetArrayItem(row, 7);
		const cJSON *tl = cJSON_GetArrayItem(row, 8);

		if (r->nlast == HV_GROUPS_MAX)
			break;
		copy_text(c->pg, sizeof(c->pg), cJSON_GetArrayItem(row, 0));
		copy_text(c->pg_ranks, sizeof(c->pg_ranks),
			  cJSON_GetArrayItem(row, 1));
		copy_text(c->op, sizeof(c->op), cJSON_GetArrayItem(row, 2));
		c->seq = cJSON_IsNumber(seq) ? (int64_t)seq->valuedouble : 0;
		c->pg_seq = cJSON_IsNumber(pgs) ? (int64_t)pgs->valuedouble : 0;
		c->torch_last = cJSON_IsNumber(tl) ? (int64_t)tl->valuedouble : 0;
		c->running = cJSON_IsString(st) &&
			     !strcmp(st->valuestring, "running");
		c->failed = cJSON_IsString(st) &&
			    !strcmp(st->valuestring, "failed");
		copy_text(c->error, sizeof(c->error),
			  cJSON_GetArrayItem(row, 6));
		c->waited = cJSON_IsNumber(w) ? w->valuedouble : 0;
		r->nlast++;
	}
}

/* "load_batch (train.py:88)": the innermost frame of the program's own
 * code in the main thread (else the innermost frame); "" when none. */
static void where_of(const struct fanout_result *b, char *out, size_t len)
{
	const cJSON *th;

	out[0] = '\0';
	if (b->rc != CLI_OK || !b->resp || !b->resp->success)
		return;
	th = frames_main_thread(b->resp->body);
	frame_where(frames_own_innermost(
			    cJSON_GetObjectItemCaseSensitive(th, "frames")),
		    out, len);
}

static void print_table(const struct hv_rank *r, size_t n)
{
	static const char *const names[] = {"rank", "group", "last call",
					    "seq",  "state", "main thread"};
	struct cli_table *t = cli_table_new(6, names);
	char rank[24], seq[24], state[48];

	for (size_t i = 0; t && i < n; i++) {
		const struct hv_call *c = r[i].nlast ? &r[i].last[0] : NULL;
		const char *cells[6];

		snprintf(rank, sizeof(rank), "%lld", (long long)r[i].rank);
		cells[0] = rank;
		if (!r[i].answered) {
			cells[1] = cells[2] = cells[3] = "";
			snprintf(state, sizeof(state), "no answer");
			cells[4] = state;
			cells[5] = r[i].why ? r[i].why : "";
			cli_table_add(t, cells);
			continue;
		}
		snprintf(seq, sizeof(seq), "%lld", c ? (long long)c->seq : 0LL);
		if (c && c->running)
			snprintf(state, sizeof(state), "waiting %.1f s",
				 c->waited);
		else
			snprintf(state, sizeof(state), "%s",
				 !c	     ? "no calls"
				 : c->failed ? "failed"
					     : "done");
		cells[1] = c ? c->pg : "";
		cells[2] = c ? c->op : "";
		cells[3] = c ? seq : "";
		cells[4] = state;
		cells[5] = r[i].where ? r[i].where : "";
		cli_table_add(t, cells);
	}
	if (t)
		cli_table_print(t, stdout, CLI_FORMAT_TABLE,
				cli_isatty(stdout));
	cli_table_free(t);
}

static void print_json(const struct hv_rank *r, size_t n,
		       const struct hv_verdict *v)
{
	cJSON *o = cJSON_CreateObject(), *ranks, *e, *calls, *c;
	char *text;

	cJSON_AddStringToObject(o, "verdict", v->text);
	cJSON_AddStringToObject(o, "kind", kind_names[v->kind]);
	ranks = cJSON_AddArrayToObject(o, "ranks");
	for (size_t i = 0; i < n; i++) {
		e = cJSON_CreateObject();
		cJSON_AddNumberToObject(e, "rank", (double)r[i].rank);
		cJSON_AddBoolToObject(e, "answered", r[i].answered);
		if (!r[i].answered)
			cJSON_AddStringToObject(e, "why",
						r[i].why ? r[i].why : "");
		if (r[i].where)
			cJSON_AddStringToObject(e, "where", r[i].where);
		calls = cJSON_AddArrayToObject(e, "last");
		for (size_t k = 0; k < r[i].nlast; k++) {
			c = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "pg", r[i].last[k].pg);
			cJSON_AddStringToObject(c, "op", r[i].last[k].op);
			cJSON_AddNumberToObject(c, "seq",
						(double)r[i].last[k].seq);
			/* torch's numbers, where it has them. */
			if (r[i].last[k].pg_seq)
				cJSON_AddNumberToObject(
					c, "pg_seq",
					(double)r[i].last[k].pg_seq);
			if (r[i].last[k].torch_last)
				cJSON_AddNumberToObject(
					c, "torch_last_seq",
					(double)r[i].last[k].torch_last);
			if (r[i].last[k].torch_last_op[0])
				cJSON_AddStringToObject(
					c, "torch_last_op",
					r[i].last[k].torch_last_op);
			cJSON_AddStringToObject(c, "state",
						r[i].last[k].running ? "running"
						: r[i].last[k].failed ? "failed"
								      : "done");
			if (r[i].last[k].failed)
				cJSON_AddStringToObject(c, "error",
							r[i].last[k].error);
			if (r[i].last[k].running)
				cJSON_AddNumberToObject(c, "waited",
							r[i].last[k].waited);
			cJSON_AddItemToArray(calls, c);
		}
		cJSON_AddItemToArray(ranks, e);
	}
	text = cJSON_Print(o);
	if (text)
		printf("%s\n", text);
	free(text);
	cJSON_Delete(o);
}

/* Each rank's last started call per group, named from its Flight
 * Recorder into r[i].last[k].torch_last_op; a rank whose torch has none
 * (or that does not answer) keeps "". */
static void name_ahead_calls(const struct cluster_opts *o,
			     const struct fanout_node *nodes, size_t n,
			     struct hv_rank *r)
{
	struct fanout_result *f = calloc(n ? n : 1, sizeof(*f));
	cJSON *args = cJSON_CreateObject();
	const cJSON *rows, *row;

	if (!f || !args) {
		free(f);
		cJSON_Delete(args);
		return;
	}
	cJSON_AddStringToObject(args, "sql", FR_SQL);
	fanout_run(nodes, n, "probing/query", args, o->node_timeout_ms, f);
	cJSON_Delete(args);
	for (size_t i = 0; i < n; i++) {
		if (f[i].rc != CLI_OK || !f[i].resp || !f[i].resp->success)
			continue;
		rows = cJSON_GetObjectItemCaseSensitive(f[i].resp->body, "rows");
		cJSON_ArrayForEach(row, rows)
		{
			const cJSON *pg = cJSON_GetArrayItem(row, 0);
			const cJSON *op = cJSON_GetArrayItem(row, 1);

			for (size_t k = 0; cJSON_IsString(pg) &&
					   cJSON_IsString(op) && k < r[i].nlast;
			     k++)
				if (!strcmp(r[i].last[k].pg, pg->valuestring))
					snprintf(r[i].last[k].torch_last_op,
						 sizeof(r[i].last[k]
								.torch_last_op),
						 "%s", op->valuestring);
		}
	}
	for (size_t i = 0; i < n; i++)
		fanout_result_release(&f[i]);
	free(f);
}

/* odd[i]: rank i answered and is not in a call while another rank waits
 * in one (the one the others wait for, most likely); none where no rank
 * waits, or every one does. */
static void odd_ones(const struct hv_rank *r, size_t n, int *odd)
{
	int waits = 0;

	for (size_t i = 0; i < n; i++)
		waits |= r[i].nlast && r[i].last[0].running;
	for (size_t i = 0; i < n; i++)
		odd[i] = waits && r[i].answered &&
			 !(r[i].nlast && r[i].last[0].running);
}

int cluster_hang(const struct cluster_opts *o, const struct fanout_node *nodes,
		 size_t n, enum cli_format fmt)
{
	struct fanout_result *q = calloc(n ? n : 1, sizeof(*q));
	struct fanout_result *b = calloc(n ? n : 1, sizeof(*b));
	struct hv_rank *r = calloc(n ? n : 1, sizeof(*r));
	char(*where)[WHERE_MAX] = calloc(n ? n : 1, WHERE_MAX);
	int *ok = calloc(n ? n : 1, sizeof(*ok));
	int *odd = calloc(n ? n : 1, sizeof(*odd));
	struct hv_verdict *v = calloc(1, sizeof(*v));
	cJSON *args;
	int rc = CLI_OK;

	if (!q || !b || !r || !where || !ok || !odd || !v) {
		rc = cli_error(CLI_EFAIL, "out of memory");
		goto out;
	}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sql", HANG_SQL);
	fanout_run(nodes, n, "probing/query", args, o->node_timeout_ms, q);
	cJSON_Delete(args);
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "native", "main"); /* what is shown */
	fanout_run(nodes, n, "probing/backtrace", args, o->node_timeout_ms, b);
	cJSON_Delete(args);
	for (size_t i = 0; i < n; i++) {
		int q_ok = q[i].rc == CLI_OK && q[i].resp && q[i].resp->success;
		int b_ok = b[i].rc == CLI_OK && b[i].resp && b[i].resp->success;

		r[i].rank = nodes[i].rank;
		r[i].answered = q_ok || b_ok;
		r[i].why = cluster_why_failed(q_ok ? &b[i] : &q[i]);
		take_calls(&q[i], &r[i]);
		where_of(&b[i], where[i], WHERE_MAX);
		r[i].where = where[i][0] ? where[i] : NULL;
	}
	/* A rank that skipped a collective and went on: which call it is
	 * in, where torch's Flight Recorder says (asked only then). */
	if (!hangverdict(r, n, v) && v->kind == HV_AHEAD)
		name_ahead_calls(o, nodes, n, r);
	if (hangverdict(r, n, v))
		rc = cli_error(CLI_EFAIL, "out of memory");
	else if (fmt == CLI_FORMAT_JSON)
		print_json(r, n, v);
	else {
		char *shown = malloc(sizeof(v->text) * 4);

		/* Names ops, groups and errors of the ranks: escaped. */
		printf("verdict: %s\n\n",
		       shown ? cli_text_fit(v->text, 0, shown,
					    sizeof(v->text) * 4)
			     : "(out of memory)");
		free(shown);
		print_table(r, n);
		printf("\nstacks (main threads):\n");
		fflush(stdout);
		odd_ones(r, n, odd); /* their stacks first */
		if (cluster_bt_show(nodes, n, b, 0, fmt, odd, ok))
			rc = cli_error(CLI_EFAIL, "out of memory");
	}
	fflush(stdout);
	if (rc == CLI_OK) {
		for (size_t i = 0; i < n; i++)
			ok[i] = r[i].answered;
		rc = cluster_report(nodes, n, q, ok, "hang");
	}
out:
	for (size_t i = 0; q && b && i < n; i++) {
		fanout_result_release(&q[i]);
		fanout_result_release(&b[i]);
	}
	free(q);
	free(b);
	free(r);
	free(where);
	free(ok);
	free(odd);
	free(v);
	return rc;
}
