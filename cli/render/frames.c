/*
 * frames: see frames.h.
 */
#include "render/frames.h"

#include <stdio.h>
#include <string.h>

#include "render/output.h"

#define FRAME_WHERE_MAX 2048 /* bytes of a place, before escaping */

int frame_own_code(const char *file)
{
	static const char *const libs[] = {"/torch/", "/lib/python",
					   "site-packages/", "dist-packages/"};

	if (!file || !file[0] || file[0] == '<')
		return 0;
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++)
		if (strstr(file, libs[i]))
			return 0;
	return 1;
}

const cJSON *frames_main_thread(const cJSON *body)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(body, "threads");
	const cJSON *th;

	cJSON_ArrayForEach(th, threads)
	{
		if (cJSON_IsTrue(
			    cJSON_GetObjectItemCaseSensitive(th, "isMain")))
			return th;
	}
	return cJSON_GetArrayItem(threads, 0);
}

const cJSON *frames_own_innermost(const cJSON *frames)
{
	const cJSON *f;

	cJSON_ArrayForEach(f, frames)
	{
		const cJSON *file = cJSON_GetObjectItemCaseSensitive(f, "file");

		if (cJSON_IsString(file) && frame_own_code(file->valuestring))
			return f;
	}
	return cJSON_GetArrayItem(frames, 0);
}

void frame_where(const cJSON *frame, char *out, size_t len)
{
	const cJSON *fn = cJSON_GetObjectItemCaseSensitive(frame, "func");
	const cJSON *fl = cJSON_GetObjectItemCaseSensitive(frame, "file");
	const cJSON *ln = cJSON_GetObjectItemCaseSensitive(frame, "line");
	const char *file = cJSON_IsString(fl) ? fl->valuestring : "?";
	const char *base = strrchr(file, '/');

	if (!frame) {
		out[0] = '\0';
		return;
	}
	char raw[FRAME_WHERE_MAX];

	/* The names are the program's: control characters escaped
	 * (cli_text_fit), whoever shows the text. */
	snprintf(raw, sizeof(raw), "%s (%s:%d)",
		 cJSON_IsString(fn) ? fn->valuestring : "?",
		 base ? base + 1 : file,
		 cJSON_IsNumber(ln) ? (int)ln->valuedouble : 0);
	cli_text_fit(raw, 0, out, len);
}
