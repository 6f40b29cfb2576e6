/*
 * sqlhint: see sqlhint.h.
 */
#include "sqlhint.h"

#include <sqlite3.h>
#include <stdio.h>
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
	{"gpu_metrics", "nothing yet: GPU utilisation is not recorded"},
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

void sqlhint_explain(struct sqlite3 *db, const char *sql, const char *msg,
		     int compiling, char *err, size_t errlen)
{
	const char *dialect = compiling ? " (SQLite's SQL)" : "";
	char word[NAME_MAX_], hint[512] = "";

	hint_interval(sql, hint, sizeof(hint));
	if (!hint[0] && word_after(msg, "no such table: ", word, sizeof(word)))
		hint_table(db, word, hint, sizeof(hint));
	if (!hint[0] &&
	    word_after(msg, "no such function: ", word, sizeof(word)))
		hint_function(word, hint, sizeof(hint));
	if (!hint[0] &&
	    word_after(msg, "no such column: ", word, sizeof(word)) &&
	    (!strcasecmp(word, "timestamp") || !strcasecmp(word, "time")))
		snprintf(hint, sizeof(hint),
			 "the recorded tables' time column is ts (seconds "
			 "since the epoch; ago('5m') for a window)");
	if (hint[0])
		errbuf_set(err, errlen, "%s%s\nhint: %s", msg, dialect, hint);
	else
		errbuf_set(err, errlen, "%s%s", msg, dialect);
}
