/*
 * resultjson: a query's result as probing/query's response body
 * (docs/protocol.md): columns [{name, type}], rows [[value, ...]],
 * truncated, elapsedMs.  Integers and reals are JSON numbers, text is a
 * string, a blob is lower-case hex (JSON has no bytes), NULL is null.
 * The agent's probing/query and the CLI reading a recording both answer
 * with it.
 */
#ifndef RESULTJSON_H
#define RESULTJSON_H

#include <cJSON.h>

struct store_result;

/* Adds res to body.  0, or -ENOMEM (body then holds part of it). */
int store_result_json(const struct store_result *res, cJSON *body);

#endif
