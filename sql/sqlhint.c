/*
 * sqlhint: see sqlhint.h.
 */
#include "sqlhint.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errbuf.h"
#include "nearest.h"
#include "sqlfuncs.h"

#define TABLES_MAX 64
#define NAME_MAX_ 96

/* The original Probing's tables and what answers their questions here. */
static const struct {
	const char *theirs, *ours;
} original_tables[] = {
	{"memory_usage", "process.memory (the process's memory over time)"},
	{"profiling_data", "profile.samples, profile.stacks and profile.frames "
			   "(perf --start records them)"},
	{"training_logs", "python.variables (watched variables per step: "
			  "torch.watch) and python.torch_trace"},
	{"memory_allocations", "python.tensors (live tensors and who holds "
			       "them)"},
	{"comm_metrics", "nothing yet: collectives are not recorded"},
	{"gpu_metrics", "gpu.utilization (each GPU from NVML; a live agent "
			"also has the view gpu.gpu_metrics)"},
	{"df_settings", "probing.config (the agent's settings, as probing "
			"config shows them)"},
	{"columns", "pragma_table_info: SELECT name FROM "
		    "pragma_table_info('torch_trace', 'python')"},
};

/* What SQLite writes for the functions of other dialects. */
static const struct {
	const char *theirs, *ours;
} other_functions[] = {
	{"hour", "strftime('%H', ts, 'unixepoch')"},
	{"minute", "strftime('%M', ts, 'unixepoch')"},
	{"date_trunc", "strftime('%Y-%m-%d %H:%M', ts, 'unixepoch') (or "
		       "CAST(ts / 60 AS INTEGER) * 60 for minutes)"},
	{"to_timestamp", "datetime(ts, 'unixepoch')"},
	{"from_unixtime", "datetime(ts, 'unixepoch')"},
	{"extract", "strftime('%H', ts, 'unixepoch') and friends"},
	{"interval", "ago('5 min') or now() - 300"},
	{"percentile_cont", "a window function: ORDER BY x with ntile() or "
			    "row_number()"},
	{"stddev", "sqrt(avg(x*x) - avg(x)*avg(x))"},
	{"concat", "a || b"},
};

/* The word after prefix in msg ("no such table: X"), into out. */
static int word_after(const char *msg, const char *prefix, char *out,
		      size_t outlen)
{
	const char *p = strstr(msg, prefix);
	size_t n;

	if (!p)
		return 0;
	p += strlen(prefix);
	n = strcspn(p, " \n");
	if (!n || n >= outlen)
		return 0;
	memcpy(out, p, n);
	out[n] = '\0';
	return 1;
}

/* "INTERVAL '5 min'" in sql: its duration text, into out. */
static int interval_of(const char *sql, char *out, size_t outlen)
{
	for (const char *p = sql; (p = strcasestr(p, "interval")); p++) {
		const char *q = p + 8;
		size_t n;

		while (*q == ' ')
			q++;
		if (*q != '\'')
			continue;
		n = strcspn(q + 1, "'");
		if (q[1 + n] != '\'' || n + 1 > outlen)
			continue;
		memcpy(out, q + 1, n);
		out[n] = '\0';
		return 1;
	}
	return 0;
}

static void hint_interval(const char *sql, char *hint, size_t hintlen)
{
	char text[64];
	double s;

	if (!interval_of(sql, text, sizeof(text)))
		return;
	if (sqlfuncs_duration(text, &s) == 0)
		snprintf(hint, hintlen,
			 "SQLite has no INTERVAL: for now() - interval '%s' "
			 "write ago('%s') or now() - %.0f (now() and the "
			 "recorded tables' times are seconds since the epoch)",
			 text, text, s);
	else
		snprintf(hint, hintlen,
			 "SQLite has no INTERVAL: write ago('5 min') or "
			 "now() - 300 (seconds since the epoch)");
}

/* The catalog's names, "schema.name", into names (storage in buf). */
static size_t catalog(sqlite3 *db, char buf[][NAME_MAX_], const char **names,
		      size_t max)
{
	sqlite3_stmt *st = NULL;
	size_t n = 0;

	if (!db || sqlite3_prepare_v2(db,
				      "SELECT schema || '.' || name FROM "
				      "probing.tables",
				      -1, &st, NULL) != SQLITE_OK)
		return 0;
	while (n < max && sqlite3_step(st) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);

		if (!t)
			continue;
		snprintf(buf[n], NAME_MAX_, "%s", (const char *)t);
		names[n] = buf[n];
		n++;
	}
	sqlite3_finalize(st);
	return n;
}

static void hint_table(sqlite3 *db, const char *table, char *hint,
		       size_t hintlen)
{
	static char buf[TABLES_MAX][NAME_MAX_];
	const char *names[TABLES_MAX], *tails[TABLES_MAX], *near;
	const char *dot = strrchr(table, '.'), *tail = dot ? dot + 1 : table;
	size_t n;

	for (size_t i = 0;
	     i < sizeof(original_tables) / sizeof(original_tables[0]); i++)
		if (!strcasecmp(tail, original_tables[i].theirs)) {
			snprintf(hint, hintlen,
				 "%s is the original Probing's; here: %s.  "
				 "The tables: SELECT * FROM probing.tables",
				 tail, original_tables[i].ours);
			return;
		}
	n = catalog(db, buf, names, TABLES_MAX);
	for (size_t i = 0; i < n; i++) {
		tails[i] = strchr(names[i], '.') + 1;
		if (!strcasecmp(tails[i], tail)) {
			snprintf(hint, hintlen,
				 "the table is %s (tables are named "
				 "schema.name: SELECT * FROM probing.tables)",
				 names[i]);
			return;
		}
	}
	near = nearest_word(table, names, n);
	if (!near) {
		/* Near by its name alone ("memmory" -> process.memory). */
		const char *t = nearest_word(tail, tails, n);

		for (size_t i = 0; t && i < n; i++)
			if (tails[i] == t)
				near = names[i];
	}
	if (near)
		snprintf(hint, hintlen,
			 "did you mean %s?  The tables: SELECT * FROM "
			 "probing.tables",
			 near);
	else
		snprintf(hint, hintlen,
			 "the tables: SELECT schema, name, doc FROM "
			 "probing.tables");
}

#define COLUMNS_MAX 1024
#define COLUMN_MAX_ 64

/* Unit suffixes of other tools' column names, and the factor from the
 * seconds the tables hold. */
static const struct {
	const char *suffix, *factor, *unit;
} unit_suffixes[] = {
	{"_ms", " * 1000", "milliseconds"}, {"_us", " * 1e6", "microseconds"},
	{"_ns", " * 1e9", "nanoseconds"},   {"_seconds", "", "seconds"},
	{"_secs", "", "seconds"},	    {"_sec", "", "seconds"},
	{"_s", "", "seconds"},
};

/* "no such column: col": the column of that name without a unit (the
 * tables hold seconds), else the nearest column of any table. */
static void hint_column(sqlite3 *db, const char *col, char *hint,
			size_t hintlen)
{
	char tables[TABLES_MAX][NAME_MAX_], base[COLUMN_MAX_] = "";
	const char *tnames[TABLES_MAX], *near, *factor = "", *unit = "";
	char (*cols)[COLUMN_MAX_] = malloc(COLUMNS_MAX * sizeof(*cols));
	const char **names = malloc(COLUMNS_MAX * sizeof(*names));
	size_t *owner = malloc(COLUMNS_MAX * sizeof(*owner));
	size_t nt, nc = 0, len = strlen(col);
	sqlite3_stmt *st = NULL;

	for (size_t i = 0;
	     i < sizeof(unit_suffixes) / sizeof(unit_suffixes[0]); i++) {
		size_t k = strlen(unit_suffixes[i].suffix);

		if (len > k && len - k < sizeof(base) &&
		    !strcasecmp(col + len - k, unit_suffixes[i].suffix)) {
			snprintf(base, sizeof(base), "%.*s", (int)(len - k),
				 col);
			factor = unit_suffixes[i].factor;
			unit = unit_suffixes[i].unit;
			break;
		}
	}
	nt = cols && names && owner ? catalog(db, tables, tnames, TABLES_MAX)
				    : 0;
	if (nt && sqlite3_prepare_v2(db,
				     "SELECT name FROM pragma_table_info(?1, "
				     "?2)",
				     -1, &st, NULL) != SQLITE_OK)
		nt = 0;
	for (size_t t = 0; t < nt && nc < COLUMNS_MAX; t++) {
		const char *dot = strchr(tnames[t], '.');

		if (!dot)
			continue;
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, dot + 1, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, tnames[t], (int)(dot - tnames[t]),
				  SQLITE_STATIC);
		while (nc < COLUMNS_MAX && sqlite3_step(st) == SQLITE_ROW) {
			const unsigned char *c = sqlite3_column_text(st, 0);

			if (!c)
				continue;
			snprintf(cols[nc], COLUMN_MAX_, "%s", (const char *)c);
			names[nc] = cols[nc];
			owner[nc++] = t;
		}
	}
	sqlite3_finalize(st);
	for (size_t i = 0; base[0] && i < nc; i++)
		if (!strcasecmp(names[i], base)) {
			snprintf(hint, hintlen,
				 "the column is %s (of %s), in seconds: %s%s "
				 "for %s",
				 names[i], tnames[owner[i]], names[i], factor,
				 unit);
			goto out;
		}
	near = nc ? nearest_word(col, names, nc) : NULL;
	for (size_t i = 0; near && i < nc; i++)
		if (names[i] == near) {
			snprintf(hint, hintlen,
				 "did you mean %s (a column of %s)?  A "
				 "table's columns: SELECT name FROM "
				 "pragma_table_info('NAME', 'SCHEMA')",
				 near, tnames[owner[i]]);
			break;
		}
out:
	free(owner);
	free(names);
	free(cols);
}

static void hint_function(const char *fn, char *hint, size_t hintlen)
{
	for (size_t i = 0;
	     i < sizeof(other_functions) / sizeof(other_functions[0]); i++)
		if (!strcasecmp(fn, other_functions[i].theirs)) {
			snprintf(hint, hintlen, "in SQLite: %s",
				 other_functions[i].ours);
			return;
		}
	snprintf(hint, hintlen,
		 "SQLite's functions: sqlite.org/lang_corefunc.html, "
		 "lang_datefunc.html, lang_aggfunc.html; Probing adds now() "
		 "and ago(D)");
}

void sqlhint_explain(struct sqlite3 *db, const char *sql, const char *msg_in,
		     int compiling, char *err, size_t errlen)
{
	const char *dialect = compiling ? " (SQLite's SQL)" : "";
	char word[NAME_MAX_], hint[512] = "", msg[512];

	/* The message first: it may be the connection's, which the hints'
	 * own statements (pragma_table_info) overwrite. */
	snprintf(msg, sizeof(msg), "%s", msg_in ? msg_in : "");

	hint_interval(sql, hint, sizeof(hint));
	if (!hint[0] && word_after(msg, "no such table: ", word, sizeof(word)))
		hint_table(db, word, hint, sizeof(hint));
	if (!hint[0] &&
	    word_after(msg, "no such function: ", word, sizeof(word)))
		hint_function(word, hint, sizeof(hint));
	if (!hint[0] &&
	    word_after(msg, "no such column: ", word, sizeof(word))) {
		if (!strcasecmp(word, "timestamp") || !strcasecmp(word, "time"))
			snprintf(hint, sizeof(hint),
				 "the recorded tables' time column is ts "
				 "(seconds since the epoch; ago('5m') for a "
				 "window)");
		else
			hint_column(db, word, hint, sizeof(hint));
	}
	/* Other dialects' words for the catalog. */
	if (!hint[0] && (strstr(msg, "near \"SHOW\"") ||
			 strstr(msg, "near \"show\"") ||
			 strstr(msg, "near \"DESCRIBE\"") ||
			 strstr(msg, "near \"describe\"")))
		snprintf(hint, sizeof(hint),
			 "SQLite has no SHOW or DESCRIBE: the tables are "
			 "SELECT schema, name, doc FROM probing.tables; a "
			 "table's columns SELECT name FROM "
			 "pragma_table_info('torch_trace', 'python')");
	if (hint[0])
		errbuf_set(err, errlen, "%s%s\nhint: %s", msg, dialect, hint);
	else
		errbuf_set(err, errlen, "%s%s", msg, dialect);
}
