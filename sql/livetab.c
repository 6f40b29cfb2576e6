/*
 * livetab: the generic snapshot virtual table (see livetab.h).
 *
 * Modelled on SQLite's ext/misc/templatevtab.c.  Each live table is its own
 * module whose client data (struct livetab_aux) names the provider.  xFilter
 * takes a snapshot into a struct livetab_rows owned by the cursor; xNext,
 * xColumn and xRowid read only that copy.  The table is read-only.
 *
 * xCreate and xConnect are different functions on purpose: were they the
 * same, SQLite would also make every module an eponymous table in main.
 */
#include "livetab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

enum { CELL_NULL, CELL_INT, CELL_REAL, CELL_TEXT };

struct cell {
	int type;
	union {
		int64_t i;
		double d;
		size_t off; /* into rows->text, NUL-terminated */
	} u;
};

/* Invariants: row r's values are cells[start[r] .. start[r+1]) (the last
 * row's end is ncells); bytes counts what the arrays and text hold, never
 * more than LIVETAB_BYTES_MAX; err != 0 poisons the rows. */
struct livetab_rows {
	struct cell *cells;
	size_t ncells, capcells;
	size_t *start;
	size_t nrows, caprows;
	char *text;
	size_t ntext, captext;
	size_t bytes;
	int err;
	int used;       /* columns the query reads (bit i = column i; bit 30:
			   column 30 or later) */
};

struct livetab_aux {
	const struct livetab *tab;
	void *ctx;
};

struct livetab_vtab {
	sqlite3_vtab base; /* first: SQLite casts */
	const struct livetab_aux *aux;
};

struct livetab_cursor {
	sqlite3_vtab_cursor base; /* first: SQLite casts */
	struct livetab_rows *rows;
	size_t row;
};

static void rows_free(struct livetab_rows *rows)
{
	if (!rows)
		return;
	free(rows->cells);
	free(rows->start);
	free(rows->text);
	free(rows);
}

/* Grows *p (of *cap elements of size sz) to hold need elements, charging the
 * growth to rows->bytes.  Returns 0, -ENOMEM or -E2BIG. */
static int rows_grow(struct livetab_rows *rows, void **p, size_t *cap,
		     size_t need, size_t sz)
{
	size_t ncap;
	void *np;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 64;
	while (ncap < need)
		ncap *= 2;
	if (ncap > LIVETAB_BYTES_MAX / sz)
		ncap = need;
	if (need > LIVETAB_BYTES_MAX / sz ||
	    rows->bytes + (ncap - *cap) * sz > LIVETAB_BYTES_MAX)
		return -E2BIG;
	np = realloc(*p, ncap * sz);
	if (!np)
		return -ENOMEM;
	rows->bytes += (ncap - *cap) * sz;
	*p = np;
	*cap = ncap;
	return 0;
}

static int rows_fail(struct livetab_rows *rows, int rc)
{
	if (!rows->err)
		rows->err = rc;
	return rc;
}

int livetab_rows_begin(struct livetab_rows *rows)
{
	int rc;

	if (rows->err)
		return rows->err;
	if (rows->nrows >= LIVETAB_ROWS_MAX)
		return rows_fail(rows, -E2BIG);
	rc = rows_grow(rows, (void **)&rows->start, &rows->caprows,
		       rows->nrows + 1, sizeof(*rows->start));
	if (rc)
		return rows_fail(rows, rc);
	rows->start[rows->nrows++] = rows->ncells;
	return 0;
}

/* Appends a cell to the current row; returns it or NULL with rows->err. */
static struct cell *rows_add(struct livetab_rows *rows, int type)
{
	struct cell *c;
	int rc;

	if (rows->err)
		return NULL;
	if (rows->nrows == 0) {
		rows_fail(rows, -EINVAL);
		return NULL;
	}
	rc = rows_grow(rows, (void **)&rows->cells, &rows->capcells,
		       rows->ncells + 1, sizeof(*rows->cells));
	if (rc) {
		rows_fail(rows, rc);
		return NULL;
	}
	c = &rows->cells[rows->ncells++];
	c->type = type;
	return c;
}

int livetab_rows_int(struct livetab_rows *rows, int64_t v)
{
	struct cell *c = rows_add(rows, CELL_INT);

	if (!c)
		return rows->err;
	c->u.i = v;
	return 0;
}

int livetab_rows_real(struct livetab_rows *rows, double v)
{
	struct cell *c = rows_add(rows, CELL_REAL);

	if (!c)
		return rows->err;
	c->u.d = v;
	return 0;
}

int livetab_rows_null(struct livetab_rows *rows)
{
	return rows_add(rows, CELL_NULL) ? 0 : rows->err;
}

int livetab_rows_text(struct livetab_rows *rows, const char *s)
{
	struct cell *c;
	size_t len;
	int rc;

	if (!s)
		return livetab_rows_null(rows);
	if (rows->err)
		return rows->err;
	if (rows->nrows == 0)
		return rows_fail(rows, -EINVAL);
	len = strlen(s);
	if (len >= LIVETAB_BYTES_MAX)
		return rows_fail(rows, -E2BIG);
	rc = rows_grow(rows, (void **)&rows->text, &rows->captext,
		       rows->ntext + len + 1, 1);
	if (rc)
		return rows_fail(rows, rc);
	c = rows_add(rows, CELL_TEXT);
	if (!c)
		return rows->err;
	memcpy(rows->text + rows->ntext, s, len + 1);
	c->u.off = rows->ntext;
	rows->ntext += len + 1;
	return 0;
}

static int vt_connect(sqlite3 *db, void *paux, int argc,
		      const char *const *argv, sqlite3_vtab **ppvtab,
		      char **pzerr)
{
	const struct livetab_aux *aux = paux;
	struct livetab_vtab *vt;
	char *sql;
	int rc;

	(void)argc;
	(void)argv;
	sql = sqlite3_mprintf("CREATE TABLE x(%s)", aux->tab->columns);
	if (!sql)
		return SQLITE_NOMEM;
	rc = sqlite3_declare_vtab(db, sql);
	sqlite3_free(sql);
	if (rc != SQLITE_OK) {
		*pzerr = sqlite3_mprintf("%s.%s: bad column list: %s",
					 aux->tab->schema, aux->tab->name,
					 sqlite3_errmsg(db));
		return rc;
	}
	/* A snapshot has no side effect a view could hide: views of the
	 * built-in schemas may read live tables (trusted_schema is off). */
	sqlite3_vtab_config(db, SQLITE_VTAB_INNOCUOUS);
	vt = sqlite3_malloc(sizeof(*vt));
	if (!vt)
		return SQLITE_NOMEM;
	memset(vt, 0, sizeof(*vt));
	vt->aux = aux;
	*ppvtab = &vt->base;
	return SQLITE_OK;
}

static int vt_create(sqlite3 *db, void *paux, int argc, const char *const *argv,
		     sqlite3_vtab **ppvtab, char **pzerr)
{
	return vt_connect(db, paux, argc, argv, ppvtab, pzerr);
}

static int vt_disconnect(sqlite3_vtab *pvtab)
{
	sqlite3_free(pvtab);
	return SQLITE_OK;
}

static int vt_best_index(sqlite3_vtab *pvtab, sqlite3_index_info *info)
{
	(void)pvtab;
	/* Tell the snapshot which columns are read, so that costly ones
	 * (locals' reprs) are only computed when asked for.  colUsed's bit 63
	 * stands for every column from 63 on; fold 30.. into bit 30. */
	info->idxNum = (int)(info->colUsed & 0x3fffffff);
	if (info->colUsed >> 30)
		info->idxNum |= 1 << 30;
	info->estimatedCost = 1000.0;
	info->estimatedRows = 1000;
	return SQLITE_OK;
}

static int vt_open(sqlite3_vtab *pvtab, sqlite3_vtab_cursor **ppcur)
{
	struct livetab_cursor *cur;

	(void)pvtab;
	cur = sqlite3_malloc(sizeof(*cur));
	if (!cur)
		return SQLITE_NOMEM;
	memset(cur, 0, sizeof(*cur));
	*ppcur = &cur->base;
	return SQLITE_OK;
}

static int vt_close(sqlite3_vtab_cursor *pcur)
{
	struct livetab_cursor *cur = (struct livetab_cursor *)pcur;

	rows_free(cur->rows);
	sqlite3_free(cur);
	return SQLITE_OK;
}

static const char *rows_errstr(int rc)
{
	switch (rc) {
	case -E2BIG:
		return "snapshot too large (more than 1000000 rows or 256 MiB)";
	case -ENOMEM:
		return "out of memory taking the snapshot";
	case -EINVAL:
		return "snapshot added a value before its first row";
	default:
		return "snapshot failed";
	}
}

/* Takes a new snapshot; the previous one (from an earlier scan) goes. */
static int vt_filter(sqlite3_vtab_cursor *pcur, int idxnum, const char *idxstr,
		     int argc, sqlite3_value **argv)
{
	struct livetab_cursor *cur = (struct livetab_cursor *)pcur;
	struct livetab_vtab *vt = (struct livetab_vtab *)pcur->pVtab;
	const struct livetab *tab = vt->aux->tab;
	struct livetab_rows *rows;
	char err[512];
	int rc;

	(void)idxstr;
	(void)argc;
	(void)argv;
	rows_free(cur->rows);
	cur->rows = NULL;
	cur->row = 0;
	rows = calloc(1, sizeof(*rows));
	if (!rows)
		return SQLITE_NOMEM;
	rows->used = idxnum;
	err[0] = '\0';
	rc = tab->snapshot(vt->aux->ctx, rows, err, sizeof(err));
	if (rc == 0 && rows->err)
		rc = rows->err;
	if (rc != 0) {
		sqlite3_free(vt->base.zErrMsg);
		if (err[0])
			vt->base.zErrMsg = sqlite3_mprintf(
				"%s.%s: %s", tab->schema, tab->name, err);
		else if (rows->err)
			vt->base.zErrMsg = sqlite3_mprintf(
				"%s.%s: %s", tab->schema, tab->name,
				rows_errstr(rows->err));
		else
			vt->base.zErrMsg = sqlite3_mprintf(
				"%s.%s: snapshot failed: %s", tab->schema,
				tab->name, strerror(rc < 0 ? -rc : rc));
		rows_free(rows);
		return rc == -ENOMEM && !err[0] ? SQLITE_NOMEM : SQLITE_ERROR;
	}
	cur->rows = rows;
	return SQLITE_OK;
}

static int vt_next(sqlite3_vtab_cursor *pcur)
{
	((struct livetab_cursor *)pcur)->row++;
	return SQLITE_OK;
}

static int vt_eof(sqlite3_vtab_cursor *pcur)
{
	struct livetab_cursor *cur = (struct livetab_cursor *)pcur;

	return !cur->rows || cur->row >= cur->rows->nrows;
}

static int vt_column(sqlite3_vtab_cursor *pcur, sqlite3_context *ctx, int i)
{
	struct livetab_cursor *cur = (struct livetab_cursor *)pcur;
	const struct livetab_rows *rows = cur->rows;
	const struct cell *c;
	size_t first, end;

	if (!rows || cur->row >= rows->nrows || i < 0)
		return SQLITE_OK; /* NULL */
	first = rows->start[cur->row];
	end = cur->row + 1 < rows->nrows ? rows->start[cur->row + 1]
					 : rows->ncells;
	if ((size_t)i >= end - first)
		return SQLITE_OK;
	c = &rows->cells[first + (size_t)i];
	switch (c->type) {
	case CELL_INT:
		sqlite3_result_int64(ctx, c->u.i);
		break;
	case CELL_REAL:
		sqlite3_result_double(ctx, c->u.d);
		break;
	case CELL_TEXT:
		sqlite3_result_text(ctx, rows->text + c->u.off, -1,
				    SQLITE_TRANSIENT);
		break;
	default:
		break;
	}
	return SQLITE_OK;
}

static int vt_rowid(sqlite3_vtab_cursor *pcur, sqlite3_int64 *prowid)
{
	*prowid = (sqlite3_int64)((struct livetab_cursor *)pcur)->row;
	return SQLITE_OK;
}

static const sqlite3_module livetab_module = {
	.iVersion = 0,
	.xCreate = vt_create,
	.xConnect = vt_connect,
	.xBestIndex = vt_best_index,
	.xDisconnect = vt_disconnect,
	.xDestroy = vt_disconnect,
	.xOpen = vt_open,
	.xClose = vt_close,
	.xFilter = vt_filter,
	.xNext = vt_next,
	.xEof = vt_eof,
	.xColumn = vt_column,
	.xRowid = vt_rowid,
};

static void set_err(char *err, size_t errlen, const char *msg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s", msg);
}

int livetab_register(struct sqlite3 *db, const struct livetab *tab, void *ctx,
		     char *err, size_t errlen)
{
	struct livetab_aux *aux;
	char *modname, *sql;
	int rc;

	if (!tab || !tab->schema || !tab->name || !tab->columns ||
	    !tab->snapshot) {
		set_err(err, errlen, "livetab: incomplete table description");
		return -EINVAL;
	}
	aux = malloc(sizeof(*aux));
	if (!aux) {
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	aux->tab = tab;
	aux->ctx = ctx;
	modname = sqlite3_mprintf("livetab_%s_%s", tab->schema, tab->name);
	if (!modname) {
		free(aux);
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* On failure too, SQLite calls free(aux). */
	rc = sqlite3_create_module_v2(db, modname, &livetab_module, aux, free);
	if (rc != SQLITE_OK) {
		sqlite3_free(modname);
		set_err(err, errlen, sqlite3_errmsg(db));
		return rc == SQLITE_NOMEM ? -ENOMEM : -EINVAL;
	}
	sql = sqlite3_mprintf("CREATE VIRTUAL TABLE \"%w\".\"%w\" USING \"%w\"",
			      tab->schema, tab->name, modname);
	sqlite3_free(modname);
	if (!sql) {
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_free(sql);
	if (rc != SQLITE_OK) {
		set_err(err, errlen, sqlite3_errmsg(db));
		return rc == SQLITE_NOMEM ? -ENOMEM : -EINVAL;
	}
	return 0;
}

int livetab_rows_wants(const struct livetab_rows *rows, int column)
{
	if (column >= 30)
		return (rows->used >> 30) & 1;
	return column >= 0 && ((rows->used >> column) & 1);
}
