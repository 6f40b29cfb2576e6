/*
 * tracereq: probing/trace over crafted stores — rows before the window,
 * values not finite, names that are not UTF-8, steps whose clocks overlap
 * by microseconds, a huge window, missing tables — always valid JSON
 * (strict: no NaN, no Infinity, UTF-8), spans nested, steps whole.
 */
#include "store.h"
#include "test.h"
#include "tracereq.h"

#include <cJSON.h>
#include <math.h>

#define SINCE 1000.0

static const char schema[] =
	"CREATE TABLE python.torch_trace(step INTEGER, seq INTEGER, module "
	"TEXT, stage TEXT, duration REAL, cpu_duration REAL, clock TEXT, "
	"allocated REAL, max_allocated REAL, cached REAL, max_cached REAL, "
	"time_offset REAL, rank INTEGER, ts REAL, native_id INTEGER);"
	"CREATE TABLE process.memory(ts REAL, rss REAL, vms REAL, shared "
	"REAL, peak REAL, swap REAL, threads INTEGER, py_blocks INTEGER, "
	"cuda_allocated REAL, cuda_reserved REAL);"
	"CREATE TABLE process.hangs(id INTEGER, started REAL, detected REAL, "
	"resumed REAL);";

static struct store *open_store(const char *rows)
{
	struct store *st = NULL;
	char err[256];

	CHECK(store_new(&st, err, sizeof(err)) == 0);
	CHECK(store_exec(st, schema, err, sizeof(err)) == 0);
	if (rows && store_exec(st, rows, err, sizeof(err)))
		fprintf(stderr, "rows: %s\n", err);
	return st;
}

/* Strict UTF-8 (no overlong forms, no surrogates). */
static int utf8_ok(const unsigned char *p)
{
	while (*p) {
		int n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 ? 2
				     : (*p & 0xf0) == 0xe0 ? 3
				     : (*p & 0xf8) == 0xf0 ? 4
							   : 0;
		if (!n || (n == 2 && *p < 0xc2))
			return 0;
		for (int i = 1; i < n; i++)
			if ((p[i] & 0xc0) != 0x80)
				return 0;
		p += n;
	}
	return 1;
}

/* The trace of [since, until] over st: parsed, or NULL (err says). */
static cJSON *trace(struct store *st, double since, double until, char *err,
		    size_t errlen)
{
	struct flamereq_env env = {.since = SINCE, .now = 2000, .hz = 100,
				   .name = "t.py (pid 42)", .pid = 42};
	cJSON *args = cJSON_CreateObject(), *body = cJSON_CreateObject(), *doc;
	const cJSON *data;
	int rc;

	cJSON_AddNumberToObject(args, "since", since);
	cJSON_AddNumberToObject(args, "until", until);
	rc = tracereq_answer(st, args, &env, body, err, errlen);
	cJSON_Delete(args);
	if (rc) {
		cJSON_Delete(body);
		return NULL;
	}
	data = cJSON_GetObjectItemCaseSensitive(body, "data");
	CHECK(cJSON_IsString(data));
	CHECK(utf8_ok((const unsigned char *)data->valuestring));
	CHECK(!strstr(data->valuestring, "nan") &&
	      !strstr(data->valuestring, "inf") &&
	      !strstr(data->valuestring, ".-"));
	doc = cJSON_Parse(data->valuestring);
	CHECK(doc != NULL);
	if (!doc)
		fprintf(stderr, "not JSON:\n%s\n", data->valuestring);
	cJSON_Delete(body);
	return doc;
}

static const cJSON *event(const cJSON *doc, const char *ph, const char *name)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "traceEvents"))
	{
		if (!strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, ph) &&
		    !strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name))
			return e;
	}
	return NULL;
}

static double num(const cJSON *e, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(e, key);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void test_rows_before_the_window_and_not_finite(void)
{
	/* A stage placed 0.3 us before the window, a duration of +Inf, a
	 * hang's times not finite, an RSS of +Inf. */
	struct store *st = open_store(
		"INSERT INTO python.torch_trace VALUES (7, 0, 'enc', "
		"'forward', 0.001, 0.001, 'cpu', 0, 0, 0, 0, 0.5, 0, "
		"1000.0000005, 42), (7, 1, 'dec', 'forward', 9e999, 9e999, "
		"'cpu', 0, 0, 0, 0, 0.4999992, 0, 1000.000001, 42);"
		"INSERT INTO process.hangs VALUES (1, -9e999, 1500, 9e999);"
		"INSERT INTO process.memory(ts, rss) VALUES (1001, 9e999), "
		"(1002, 12.5);");
	char err[256];
	cJSON *doc = trace(st, SINCE, 2000, err, sizeof(err));
	const cJSON *e;

	CHECK(doc != NULL);
	e = event(doc, "X", "enc forward");
	CHECK(e && num(e, "ts") >= 0);
	e = event(doc, "X", "dec forward");
	CHECK(e && num(e, "ts") >= 0 && num(e, "dur") <= 1e15);
	CHECK(event(doc, "i", "hang 1: the main thread stuck") != NULL);
	cJSON_Delete(doc);
	store_free(st);
}

static void test_names_not_utf8(void)
{
	/* A module name cut mid-character, bytes that are no UTF-8. */
	struct store *st = open_store(
		"INSERT INTO python.torch_trace VALUES (1, 0, "
		"CAST(X'6d6f64c3' AS TEXT), 'forward', 0.1, 0.1, 'cpu', 0, 0, "
		"0, 0, 0.0, 0, 1001, 42), (1, 1, CAST(X'fffe41' AS TEXT), "
		"'step', 0.1, 0.1, 'cpu', 0, 0, 0, 0, 0.2, 0, 1001.2, 42);");
	char err[256];
	cJSON *doc = trace(st, SINCE, 2000, err, sizeof(err));

	CHECK(doc != NULL);
	CHECK(event(doc, "X", "mod\xef\xbf\xbd forward") != NULL);
	cJSON_Delete(doc);
	store_free(st);
}

static void test_steps_whose_clocks_overlap(void)
{
	/* Step 1 ends at 1000.1 + its optimizer's 0.1 s; step 2, read with a
	 * clock shift 10 us smaller, begins 10 us before that end. */
	struct store *st = open_store(
		"INSERT INTO python.torch_trace VALUES "
		"(1, 0, 'MLP', 'forward', 0.05, 0.05, 'cpu', 0, 0, 0, 0, 0.0, "
		"0, 1000.1, 42), (1, 1, 'SGD', 'step', 0.1, 0.1, 'cpu', 0, 0, "
		"0, 0, 0.1, 0, 1000.2, 42), (2, 0, 'MLP', 'forward', 0.05, "
		"0.05, 'cpu', 0, 0, 0, 0, 0.001, 0, 1000.30099, 42), (2, 1, "
		"'SGD', 'step', 0.1, 0.1, 'cpu', 0, 0, 0, 0, 0.1, 0, "
		"1000.39999, 42);");
	char err[256];
	cJSON *doc = trace(st, SINCE, 2000, err, sizeof(err));
	const cJSON *s1, *s2, *f2;

	CHECK(doc != NULL);
	s1 = event(doc, "X", "step 1");
	s2 = event(doc, "X", "step 2");
	CHECK(s1 && s2);
	/* Step 2 whole (its 0.2 s), step 1 ending where it begins. */
	CHECK(s2 && fabs(num(s2, "dur") - 200000) < 20);
	CHECK(s1 && s2 &&
	      fabs(num(s1, "ts") + num(s1, "dur") - num(s2, "ts")) < 1e-3);
	f2 = s2 ? event(doc, "X", "MLP forward") : NULL;
	CHECK(f2 != NULL);
	cJSON_Delete(doc);
	store_free(st);
}

static void test_windows(void)
{
	struct store *st = open_store(NULL);
	char err[256];
	cJSON *doc;

	/* Too long a window, an empty one: errors, said. */
	doc = trace(st, -1e10, 2000, err, sizeof(err));
	CHECK(doc == NULL && strstr(err, "longer than 30 days"));
	doc = trace(st, 1500, 1400, err, sizeof(err));
	CHECK(doc == NULL && strstr(err, "empty"));
	/* Nothing recorded: a document with the process only. */
	doc = trace(st, SINCE, 1010, err, sizeof(err));
	CHECK(doc != NULL);
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "traceEvents")) >=
	      1);
	cJSON_Delete(doc);
	store_free(st);
}

TEST_MAIN(test_rows_before_the_window_and_not_finite, test_names_not_utf8,
	  test_steps_whose_clocks_overlap, test_windows)
