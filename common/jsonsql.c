/*
 * jsonsql: a JSON value as an SQLite value.  See jsonsql.h.
 */
#include "jsonsql.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EXACT_MAX 9007199254740992.0 /* 2^53: doubles are exact below */

void jsonsql_value(const cJSON *v, struct jsonsql_value *out)
{
	memset(out, 0, sizeof(*out));
	if (!v || cJSON_IsNull(v)) {
		out->kind = JSONSQL_NULL;
	} else if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;

		/* In range before the cast: a cast out of range is UB. */
		if (d == floor(d) && fabs(d) < EXACT_MAX) {
			out->kind = JSONSQL_INT;
			out->i = (int64_t)d;
		} else {
			out->kind = JSONSQL_REAL;
			out->d = d;
		}
	} else if (cJSON_IsString(v)) {
		out->kind = JSONSQL_TEXT;
		out->text = v->valuestring;
	} else if (cJSON_IsBool(v)) {
		out->kind = JSONSQL_INT;
		out->i = cJSON_IsTrue(v);
	} else {
		out->owned = cJSON_PrintUnformatted(v);
		out->kind = out->owned ? JSONSQL_TEXT : JSONSQL_NULL;
		out->text = out->owned;
	}
}

void jsonsql_release(struct jsonsql_value *out)
{
	free(out->owned);
	out->owned = NULL;
	out->text = NULL;
}
