/*
 * cluster_global: the `global` schema.  See cluster_global.h.
 */
#include "cluster_global.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cluster_ask.h"
#include "core/auth.h"
#include "core/thread.h"
#include "jsonsql.h"
#include "sqlglobal.h"
#include "store.h"

#define NODES_SQL                                                              \
	"SELECT rank, host, addr, pid FROM cluster.nodes WHERE role = 'rank' " \
	"ORDER BY rank"

struct node {
	int64_t rank;
	char host[256];
	char addr[300];
	int self;
	/* the answer to one table's query */
	struct store_result local; /* self */
	cJSON *body;		   /* others */
	int rc, success;
	char err[512];
};

struct asking {
	struct node *nodes;
	size_t n;
	const char *table; /* "schema.table" */
	const char *cols;  /* the columns asked for: "*" or "\"a\", \"b\"" */
	int max_rows, timeout_ms;
	_Atomic size_t next;
	struct store *st;
};

static _Atomic unsigned long table_id;

/* ---- the nodes ---------------------------------------------------------- */

static const char *text_of(const struct store_value *v)
{
	return v->type == STORE_TEXT && v->u.s.p ? v->u.s.p : "";
}

/* cluster.nodes, or this process alone when it is empty. */
static int read_nodes(struct store *st, struct node **out, size_t *n, char *err,
		      size_t errlen)
{
	struct store_limits lim = {.max_rows = GLOBAL_NODES_MAX};
	struct store_result res = {0};
	char host[256] = "";
	struct node *v;
	int rc = store_query(st, NODES_SQL, &lim, &res, err, errlen);

	if (rc) {
		store_result_release(&res);
		return rc;
	}
	gethostname(host, sizeof(host) - 1);
	v = calloc(res.nrows ? res.nrows : 1, sizeof(*v));
	if (!v) {
		store_result_release(&res);
		return -ENOMEM;
	}
	for (size_t i = 0; i < res.nrows; i++) {
		const struct store_value *r = &res.cells[i * res.ncols];

		v[i].rank = r[0].type == STORE_INT ? r[0].u.i : -1;
		snprintf(v[i].host, sizeof(v[i].host), "%s", text_of(&r[1]));
		snprintf(v[i].addr, sizeof(v[i].addr), "%s", text_of(&r[2]));
		v[i].self = r[3].type == STORE_INT && r[3].u.i == getpid() &&
			    !strcmp(v[i].host, host);
	}
	*n = res.nrows;
	if (!res.nrows) {
		v[0].rank = -1;
		snprintf(v[0].host, sizeof(v[0].host), "%s", host);
		v[0].self = 1;
		*n = 1;
	}
	store_result_release(&res);
	*out = v;
	return 0;
}

/* ---- what to ask for ---------------------------------------------------- */

/* Does word w appear in sql as a word (letters, digits, _ around it
 * differ), in any case?  Strings and comments count too: a superset. */
static int has_word(const char *sql, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = sql; n && (p = strcasestr(p, w)); p++) {
		int before = p > sql && (isalnum((unsigned char)p[-1]) ||
					 p[-1] == '_');
		int after = isalnum((unsigned char)p[n]) || p[n] == '_';

		if (!before && !after)
			return 1;
	}
	return 0;
}

/*
 * The columns of table the query may read, as a select list into out:
 * those whose names appear in sql, or "*" when sql has a '*' or the
 * table's columns are not known here.  A live table computes what is
 * read (python.backtrace's locals are reprs): nothing more is asked of
 * every rank than the query needs.
 */
static void pick_columns(struct store *st, const char *table, const char *sql,
			 char *out, size_t outlen)
{
	struct store_limits lim = {.max_rows = 1000};
	struct store_result res = {0};
	const char *dot = strchr(table, '.');
	char q[400], err[256];
	size_t len = 0;

	snprintf(out, outlen, "*");
	if (!dot || strchr(sql, '*'))
		return;
	snprintf(q, sizeof(q),
		 "SELECT name FROM pragma_table_info('%s', '%.*s')", dot + 1,
		 (int)(dot - table), table);
	if (store_query(st, q, &lim, &res, err, sizeof(err)) || !res.nrows) {
		store_result_release(&res);
		return;
	}
	out[0] = '\0';
	for (size_t i = 0; i < res.nrows; i++) {
		const char *name = text_of(&res.cells[i]);

		if (*name && has_word(sql, name) &&
		    len + strlen(name) + 4 < outlen)
			len += (size_t)snprintf(out + len, outlen - len,
						"%s\"%s\"", len ? ", " : "", name);
	}
	if (!len) /* count(*)-like: one column, the first */
		snprintf(out, outlen, "\"%s\"", text_of(&res.cells[0]));
	store_result_release(&res);
}

/* ---- asking them -------------------------------------------------------- */

static void ask_one(struct asking *a, struct node *nd)
{
	char sql[GLOBAL_COLS_TEXT + 200];
	cJSON *args;

	snprintf(sql, sizeof(sql), "SELECT %s FROM %s", a->cols, a->table);
	if (nd->self) {
		struct store_limits lim = {.max_rows = (size_t)a->max_rows,
					   .timeout_ms = a->timeout_ms,
					   .read_only = 1};

		nd->rc = store_query(a->st, sql, &lim, &nd->local, nd->err,
				     sizeof(nd->err));
		nd->success = nd->rc == 0;
		return;
	}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "sql", sql);
	cJSON_AddNumberToObject(args, "maxRows", a->max_rows);
	cJSON_AddNumberToObject(args, "timeoutMs", a->timeout_ms);
	nd->rc = cluster_ask(nd->addr, auth_token(), "probing/query", args,
			     a->timeout_ms + 1000, &nd->body, &nd->success,
			     nd->err, sizeof(nd->err));
}

static void *asker(void *arg)
{
	struct asking *a = arg;
	size_t i;

	while ((i = atomic_fetch_add(&a->next, 1)) < a->n)
		ask_one(a, &a->nodes[i]);
	return NULL;
}

static void ask_all(struct asking *a)
{
	pthread_t t[GLOBAL_THREADS];
	size_t k = 0, want = a->n < GLOBAL_THREADS ? a->n : GLOBAL_THREADS;

	atomic_store(&a->next, 0);
	for (; k + 1 < want; k++)
		if (agent_thread_start(&t[k], "probing-global", asker, a))
			break;
	asker(a); /* this thread too; and alone if no thread started */
	for (size_t i = 0; i < k; i++)
		pthread_join(t[i], NULL);
}

static void release_answers(struct node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		store_result_release(&nodes[i].local);
		cJSON_Delete(nodes[i].body);
		nodes[i].body = NULL;
		nodes[i].rc = nodes[i].success = 0;
		nodes[i].err[0] = '\0';
	}
}

/* ---- the table ---------------------------------------------------------- */

static int answered(const struct node *nd)
{
	return nd->rc == 0 && nd->success;
}

/* The column names: the first answer's.  Count, or 0 when none has. */
static int columns(const struct node *nodes, size_t n, const char **names,
		   int max)
{
	for (size_t i = 0; i < n; i++) {
		const cJSON *cols, *c;
		int k = 0;

		if (!answered(&nodes[i]))
			continue;
		if (nodes[i].self) {
			for (size_t j = 0; j < nodes[i].local.ncols && k < max;
			     j++)
				names[k++] = nodes[i].local.cols[j].name;
			return k;
		}
		cols = cJSON_GetObjectItemCaseSensitive(nodes[i].body,
							"columns");
		cJSON_ArrayForEach(c, cols)
		{
			const cJSON *nm =
				cJSON_GetObjectItemCaseSensitive(c, "name");

			if (k < max)
				names[k++] = cJSON_IsString(nm)
						     ? nm->valuestring
						     : "?";
		}
		return k;
	}
	return 0;
}

static void bind_json(struct store_stmt *s, int i, const cJSON *v)
{
	struct jsonsql_value j;

	jsonsql_value(v, &j); /* the rule of cluster query --merge */
	if (j.kind == JSONSQL_INT)
		store_stmt_int(s, i, j.i);
	else if (j.kind == JSONSQL_REAL)
		store_stmt_real(s, i, j.d);
	else if (j.kind == JSONSQL_TEXT)
		store_stmt_text(s, i, j.text);
	else
		store_stmt_null(s, i);
	jsonsql_release(&j);
}

static void bind_value(struct store_stmt *s, int i, const struct store_value *v)
{
	switch (v->type) {
	case STORE_INT:
		store_stmt_int(s, i, v->u.i);
		break;
	case STORE_REAL:
		store_stmt_real(s, i, v->u.d);
		break;
	case STORE_TEXT:
	case STORE_BLOB:
		store_stmt_text(s, i, v->u.s.p ? v->u.s.p : "");
		break;
	default:
		store_stmt_null(s, i);
	}
}

static void bind_rank(struct store_stmt *s, int64_t rank)
{
	if (rank >= 0)
		store_stmt_int(s, 1, rank);
	else
		store_stmt_null(s, 1);
}

static int insert_rows(struct store *st, struct store_stmt *s,
		       const struct node *nd, int ncols, char *err,
		       size_t errlen)
{
	const cJSON *rows, *row;
	int rc = 0;

	if (nd->self) {
		for (size_t r = 0; !rc && r < nd->local.nrows; r++) {
			bind_rank(s, nd->rank);
			store_stmt_text(s, 2, nd->host);
			for (int c = 0;
			     c < ncols && (size_t)c < nd->local.ncols; c++)
				bind_value(
					s, 3 + c,
					&nd->local.cells[r * nd->local.ncols +
							 (size_t)c]);
			rc = store_stmt_run(s, err, errlen);
		}
		return rc;
	}
	(void)st;
	rows = cJSON_GetObjectItemCaseSensitive(nd->body, "rows");
	cJSON_ArrayForEach(row, rows)
	{
		bind_rank(s, nd->rank);
		store_stmt_text(s, 2, nd->host);
		for (int c = 0; c < ncols; c++)
			bind_json(s, 3 + c, cJSON_GetArrayItem(row, c));
		if ((rc = store_stmt_run(s, err, errlen)))
			break;
	}
	return rc;
}

static int truncated(const struct node *nd)
{
	if (nd->self)
		return nd->local.truncated;
	return cJSON_IsTrue(
		cJSON_GetObjectItemCaseSensitive(nd->body, "truncated"));
}

static void note(cJSON *notes, const char *fmt, const char *table,
		 const struct node *nd, const char *extra)
{
	char text[2048];

	snprintf(text, sizeof(text), fmt, table, (long long)nd->rank, nd->addr,
		 extra);
	cJSON_AddItemToArray(notes, cJSON_CreateString(text));
}

/* Makes temp table name from the nodes' answers for table. */
static void add_missing(cJSON *missing, int64_t rank)
{
	const cJSON *m;

	cJSON_ArrayForEach(m, missing)
	{
		if (cJSON_IsNumber(m) && (int64_t)m->valuedouble == rank)
			return;
	}
	cJSON_AddItemToArray(missing, cJSON_CreateNumber((double)rank));
}

static int make_table(struct store *st, const char *name, const char *table,
		      struct node *nodes, size_t n, cJSON *notes,
		      cJSON *missing, char *err, size_t errlen)
{
	const char *cols[256];
	int ncols = columns(nodes, n, cols, 256), rc;
	size_t len = 0, cap = 256 + (size_t)ncols * 80;
	char *sql = malloc(cap);
	struct store_stmt *s = NULL;

	if (!sql)
		return -ENOMEM;
	if (!ncols) {
		/* No node has it: the first one's reason is the error. */
		for (size_t i = 0; i < n; i++)
			if (nodes[i].err[0]) {
				snprintf(err, errlen, "global.%s: %s", table,
					 nodes[i].err);
				break;
			}
		free(sql);
		return STORE_ESQL;
	}
	len = (size_t)snprintf(sql, cap,
			       "CREATE TEMP TABLE \"%s\"(_rank, _host", name);
	for (int c = 0; c < ncols && len < cap; c++) {
		char q[80];
		size_t k = 0;

		/* Column names quoted, quotes doubled, long ones cut. */
		for (const char *p = cols[c]; *p && k + 2 < sizeof(q); p++) {
			if (*p == '"')
				q[k++] = '"';
			q[k++] = *p;
		}
		q[k] = '\0';
		len += (size_t)snprintf(sql + len, cap - len, ", \"%s\"", q);
	}
	if (len < cap)
		snprintf(sql + len, cap - len, ")");
	rc = store_exec(st, sql, err, errlen);
	if (!rc) {
		len = (size_t)snprintf(sql, cap,
				       "INSERT INTO temp.\"%s\" VALUES (?1, ?2",
				       name);
		for (int c = 0; c < ncols && len < cap; c++)
			len += (size_t)snprintf(sql + len, cap - len, ", ?%d",
						c + 3);
		if (len < cap)
			snprintf(sql + len, cap - len, ")");
		rc = store_stmt_new(st, sql, &s, err, errlen);
	}
	if (!rc)
		rc = store_begin(st, err, errlen);
	for (size_t i = 0; !rc && i < n; i++) {
		if (!answered(&nodes[i])) {
			note(notes,
			     "global.%s: rank %lld (%s) did not answer: %s",
			     table, &nodes[i],
			     nodes[i].err[0] ? nodes[i].err : "no answer");
			add_missing(missing, nodes[i].rank);
			continue;
		}
		rc = insert_rows(st, s, &nodes[i], ncols, err, errlen);
		if (!rc && truncated(&nodes[i]))
			note(notes,
			     "global.%s: rank %lld (%s) sent only its "
			     "first rows%s",
			     table, &nodes[i], " (maxRows)");
	}
	if (!rc)
		rc = store_commit(st, err, errlen);
	else if (s)
		store_rollback(st);
	store_stmt_free(s);
	free(sql);
	return rc;
}

/* ---- the query ---------------------------------------------------------- */

int global_prepare(struct store *st, const char *sql, int max_rows,
		   int timeout_ms, struct global_query *q, cJSON *notes,
		   cJSON *missing, char *err, size_t errlen)
{
	struct sqlglobal_ref refs[GLOBAL_TABLES_MAX];
	int nrefs = sqlglobal_refs(sql, refs, GLOBAL_TABLES_MAX);
	struct node *nodes = NULL;
	char tables[GLOBAL_TABLES_MAX][128];
	size_t n = 0, len = 0, cap, from = 0;
	int rc;

	if (nrefs == 0)
		return 0;
	memset(q, 0, sizeof(*q));
	if (nrefs > GLOBAL_TABLES_MAX) {
		snprintf(err, errlen, "at most %d global tables in a query",
			 GLOBAL_TABLES_MAX);
		return -E2BIG;
	}
	rc = read_nodes(st, &nodes, &n, err, errlen);
	if (rc)
		return rc;
	/* One temp table per distinct name. */
	for (int i = 0; !rc && i < nrefs; i++) {
		int k;

		for (k = 0; k < q->ntables; k++)
			if (!strcmp(tables[k], refs[i].name))
				break;
		if (k < q->ntables)
			continue;
		snprintf(tables[k], sizeof(tables[k]), "%s", refs[i].name);
		snprintf(q->names[k], sizeof(q->names[k]), "probing_global_%lu",
			 (unsigned long)atomic_fetch_add(&table_id, 1));
		char cols[GLOBAL_COLS_TEXT];

		pick_columns(st, tables[k], sql, cols, sizeof(cols));
		struct asking a = {.nodes = nodes,
				   .n = n,
				   .table = tables[k],
				   .cols = cols,
				   .max_rows = max_rows,
				   .timeout_ms = timeout_ms,
				   .st = st};
		q->ntables = k + 1; /* dropped by global_done, made or not */
		ask_all(&a);
		rc = make_table(st, q->names[k], tables[k], nodes, n, notes,
				missing, err, errlen);
		release_answers(nodes, n);
	}
	free(nodes);
	if (rc) {
		global_done(st, q);
		return rc;
	}
	/* The query with temp."probing_global_N" in each reference's place. */
	cap = strlen(sql) + (size_t)nrefs * 80 + 1;
	q->sql = malloc(cap);
	if (!q->sql) {
		global_done(st, q);
		return -ENOMEM;
	}
	for (int i = 0; i < nrefs; i++) {
		int k = 0;

		while (strcmp(tables[k], refs[i].name))
			k++;
		len += (size_t)snprintf(q->sql + len, cap - len, "%.*s",
					(int)(refs[i].start - from),
					sql + from);
		len += (size_t)snprintf(q->sql + len, cap - len, "temp.\"%s\"",
					q->names[k]);
		from = refs[i].end;
	}
	snprintf(q->sql + len, cap - len, "%s", sql + from);
	return 1;
}

void global_done(struct store *st, struct global_query *q)
{
	char sql[128], err[256];

	for (int k = 0; k < q->ntables; k++) {
		snprintf(sql, sizeof(sql), "DROP TABLE IF EXISTS temp.\"%s\"",
			 q->names[k]);
		store_exec(st, sql, err, sizeof(err));
	}
	q->ntables = 0;
	free(q->sql);
	q->sql = NULL;
}
