/*
 * sqlfuncs: see sqlfuncs.h.
 */
#include "sqlfuncs.h"

#include <sqlite3.h>
#include <time.h>

#include "units.h"

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sqlfuncs_duration(const char *text, double *out)
{
	static const struct unit units[] = {
		{"", 1},	{"s", 1},	    {"sec", 1},
		{"second", 1},	{"seconds", 1},	    {"ms", 1e-3},
		{"m", 60},	{"min", 60},	    {"mins", 60},
		{"minute", 60}, {"minutes", 60},    {"h", 3600},
		{"hour", 3600}, {"hours", 3600},    {"d", 86400},
		{"day", 86400}, {"days", 86400},
	};
	double v;

	if (units_parse(text, units, sizeof(units) / sizeof(units[0]), &v) ||
	    v > 1e12 * 86400)
		return -1;
	*out = v;
	return 0;
}

static void fn_now(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc, (void)argv;
	sqlite3_result_double(ctx, wall_s());
}

static void fn_ago(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const unsigned char *text;
	double d;

	(void)argc;
	switch (sqlite3_value_type(argv[0])) {
	case SQLITE_INTEGER:
	case SQLITE_FLOAT:
		d = sqlite3_value_double(argv[0]);
		if (d >= 0) {
			sqlite3_result_double(ctx, wall_s() - d);
			return;
		}
		break;
	case SQLITE_TEXT:
		text = sqlite3_value_text(argv[0]);
		if (text && sqlfuncs_duration((const char *)text, &d) == 0) {
			sqlite3_result_double(ctx, wall_s() - d);
			return;
		}
		break;
	}
	sqlite3_result_error(ctx,
			     "ago(D): D is a duration: seconds, or '500ms', "
			     "'30s', '5m', '2h', '1d'",
			     -1);
}

int sqlfuncs_register(struct sqlite3 *db)
{
	int rc = sqlite3_create_function(db, "now", 0, SQLITE_UTF8, NULL,
					 fn_now, NULL, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "ago", 1, SQLITE_UTF8, NULL,
					     fn_ago, NULL, NULL);
	return rc;
}
