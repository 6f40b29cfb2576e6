/*
 * comm_fr: see comm_fr.h.
 */
#include "comm_fr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cpython/pycompat.h"
#include "livetab.h"
#include "python/pymods.h"

/* The dump's functions, newest name first. */
static const char *const dumpers[] = {"_dump_fr_trace_json",
				      "_dump_nccl_trace_json"};

int comm_fr_dump(char **json, char *err, size_t errlen)
{
	PyObject *fn = NULL, *r;
	const char *text;
	Py_ssize_t len;

	*json = NULL;
	/* Only where the program itself has torch.distributed. */
	if (!pymods_ready("torch.distributed"))
		return 0;
	for (size_t i = 0; !fn && i < sizeof(dumpers) / sizeof(dumpers[0]);
	     i++)
		fn = pymods_attr("torch._C._distributed_c10d", dumpers[i]);
	if (!fn)
		return 0;
	r = PyObject_CallNoArgs(fn);
	Py_DECREF(fn);
	text = NULL;
	if (r && PyUnicode_Check(r)) {
		text = PyUnicode_AsUTF8AndSize(r, &len);
	} else if (r && PyBytes_Check(r)) {
		char *b;

		if (PyBytes_AsStringAndSize(r, &b, &len) == 0)
			text = b;
	}
	if (!text) {
		PyErr_Clear();
		Py_XDECREF(r);
		snprintf(err, errlen, "torch's Flight Recorder gave no text");
		return -EIO;
	}
	if ((size_t)len > COMM_FR_JSON_MAX) {
		Py_DECREF(r);
		snprintf(err, errlen,
			 "torch's Flight Recorder dump is %zd bytes, more than "
			 "the %zu read (a smaller TORCH_FR_BUFFER_SIZE keeps "
			 "it under)",
			 len, COMM_FR_JSON_MAX);
		return -E2BIG;
	}
	*json = malloc((size_t)len + 1);
	if (*json) {
		memcpy(*json, text, (size_t)len);
		(*json)[len] = '\0';
	}
	Py_DECREF(r);
	if (!*json) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static const char *text_of(const cJSON *e, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int num_or_null(struct livetab_rows *rows, const cJSON *e,
		       const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

	return cJSON_IsNumber(v) ? livetab_rows_int(rows, (int64_t)v->valuedouble)
				 : livetab_rows_null(rows);
}

/* A time in nanoseconds since the epoch as seconds; 0: NULL (not yet). */
static int ns_or_null(struct livetab_rows *rows, const cJSON *e,
		      const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

	return cJSON_IsNumber(v) && v->valuedouble > 0
		       ? livetab_rows_real(rows, v->valuedouble / 1e9)
		       : livetab_rows_null(rows);
}

/* A JSON value as its text (input sizes, dtypes), or NULL. */
static int json_or_null(struct livetab_rows *rows, const cJSON *e,
			const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
	char *t = v ? cJSON_PrintUnformatted(v) : NULL;
	int rc = livetab_rows_text(rows, t);

	free(t);
	return rc;
}

static int entry_row(struct livetab_rows *rows, const cJSON *e)
{
	const cJSON *pg = cJSON_GetObjectItemCaseSensitive(e, "process_group");
	const cJSON *pg_name = cJSON_GetArrayItem(pg, 0);
	const cJSON *pg_desc = cJSON_GetArrayItem(pg, 1);
	const cJSON *retired = cJSON_GetObjectItemCaseSensitive(e, "retired");
	const char *name = text_of(e, "profiling_name");
	const char *colon = name ? strchr(name, ':') : NULL;
	char backend[32] = "";
	int rc;

	/* "gloo:all_reduce": the backend, then torch's name of the op. */
	if (colon && (size_t)(colon - name) < sizeof(backend))
		snprintf(backend, sizeof(backend), "%.*s", (int)(colon - name),
			 name);
	if ((rc = livetab_rows_begin(rows)) ||
	    (rc = num_or_null(rows, e, "record_id")) ||
	    (rc = livetab_rows_text(rows, cJSON_IsString(pg_name)
						  ? pg_name->valuestring
						  : NULL)) ||
	    (rc = livetab_rows_text(rows, cJSON_IsString(pg_desc)
						  ? pg_desc->valuestring
						  : NULL)) ||
	    (rc = num_or_null(rows, e, "collective_seq_id")) ||
	    (rc = num_or_null(rows, e, "p2p_seq_id")) ||
	    (rc = livetab_rows_text(rows, colon ? colon + 1 : name)) ||
	    (rc = livetab_rows_text(rows, backend[0] ? backend : NULL)) ||
	    (rc = livetab_rows_text(rows, text_of(e, "state"))) ||
	    (rc = cJSON_IsBool(retired)
			  ? livetab_rows_int(rows, cJSON_IsTrue(retired))
			  : livetab_rows_null(rows)) ||
	    (rc = ns_or_null(rows, e, "time_created_ns")) ||
	    (rc = ns_or_null(rows, e, "time_discovered_started_ns")) ||
	    (rc = ns_or_null(rows, e, "time_discovered_completed_ns")) ||
	    (rc = json_or_null(rows, e, "input_sizes")) ||
	    (rc = json_or_null(rows, e, "input_dtypes")) ||
	    (rc = livetab_rows_text(rows, text_of(e, "thread_name"))))
		return rc;
	return num_or_null(rows, e, "timeout_ms");
}

int comm_fr_rows(const char *json, struct livetab_rows *rows, char *err,
		 size_t errlen)
{
	cJSON *d = cJSON_Parse(json), *e;
	const cJSON *entries;
	int rc = 0;

	if (!d) {
		snprintf(err, errlen, "torch's Flight Recorder dump is not JSON");
		return -EIO;
	}
	entries = cJSON_GetObjectItemCaseSensitive(d, "entries");
	cJSON_ArrayForEach(e, entries)
	{
		if ((rc = entry_row(rows, e)))
			break;
	}
	cJSON_Delete(d);
	if (rc)
		snprintf(err, errlen, "%s",
			 rc == -E2BIG ? "too many rows" : "out of memory");
	return rc;
}
