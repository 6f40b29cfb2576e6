/*
 * resultjson: see resultjson.h.
 */
#include "resultjson.h"

#include <errno.h>
#include <stdlib.h>

#include "store.h"

static cJSON *value_json(const struct store_value *v)
{
	static const char hex[] = "0123456789abcdef";
	char *text;
	cJSON *j;

	switch (v->type) {
	case STORE_INT:
		return cJSON_CreateNumber((double)v->u.i);
	case STORE_REAL:
		return cJSON_CreateNumber(v->u.d);
	case STORE_TEXT:
		return cJSON_CreateString(v->u.s.p ? v->u.s.p : "");
	case STORE_BLOB:
		text = malloc(v->u.s.len * 2 + 1);
		if (!text)
			return NULL;
		for (size_t i = 0; i < v->u.s.len; i++) {
			unsigned char b = (unsigned char)v->u.s.p[i];

			text[2 * i] = hex[b >> 4];
			text[2 * i + 1] = hex[b & 15];
		}
		text[v->u.s.len * 2] = 0;
		j = cJSON_CreateString(text);
		free(text);
		return j;
	case STORE_NULL:
		break;
	}
	return cJSON_CreateNull();
}

int store_result_json(const struct store_result *res, cJSON *body)
{
	cJSON *cols = cJSON_AddArrayToObject(body, "columns");
	cJSON *rows = cJSON_AddArrayToObject(body, "rows");

	if (!cols || !rows)
		return -ENOMEM;
	for (size_t i = 0; i < res->ncols; i++) {
		cJSON *c = cJSON_CreateObject();

		if (!c)
			return -ENOMEM;
		cJSON_AddItemToArray(cols, c);
		cJSON_AddStringToObject(c, "name", res->cols[i].name);
		cJSON_AddStringToObject(
			c, "type",
			res->cols[i].decltype ? res->cols[i].decltype : "");
	}
	for (size_t r = 0; r < res->nrows; r++) {
		cJSON *row = cJSON_CreateArray();

		if (!row)
			return -ENOMEM;
		cJSON_AddItemToArray(rows, row);
		for (size_t i = 0; i < res->ncols; i++) {
			cJSON *v = value_json(&res->cells[r * res->ncols + i]);

			if (!v)
				return -ENOMEM;
			cJSON_AddItemToArray(row, v);
		}
	}
	cJSON_AddBoolToObject(body, "truncated", res->truncated);
	cJSON_AddNumberToObject(body, "elapsedMs", res->elapsed_ms);
	return 0;
}
