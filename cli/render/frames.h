/*
 * frames: which frame of a backtrace a person wants named.
 *
 * A backtrace (`probing/backtrace`'s body: threads[], each with isMain and
 * frames[] of {func, file, line}, innermost first) mostly shows Python's
 * and the libraries' frames at the top; what names a place in a verdict
 * is the innermost frame of the program's own code.
 */
#ifndef CLI_FRAMES_H
#define CLI_FRAMES_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Is file the program's own (not Python's library, torch, or an installed
 * package)?  NULL and "<string>"-like names are not. */
int frame_own_code(const char *file);

/* The main thread of a backtrace body (isMain), else its first; NULL when
 * it has none. */
const cJSON *frames_main_thread(const cJSON *body);

/* The innermost frame of frames (an array) in the program's own code, else
 * the innermost; NULL when empty. */
const cJSON *frames_own_innermost(const cJSON *frames);

/* "load_batch (train.py:88)" for frame (the file's base name), control
 * characters escaped (cli_text_fit: names are the program's); "" for
 * NULL. */
void frame_where(const cJSON *frame, char *out, size_t len);

#endif
