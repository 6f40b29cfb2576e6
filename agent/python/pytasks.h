/*
 * pytasks: every asyncio task of every running event loop now, read with
 * the GIL through asyncio's API by the embedded agent/python/pytasks.py
 * (see there for how, and why the loops never stop longer than the switch
 * interval).  Shared by python.tasks, probing/backtrace's "tasks" and the
 * debugger's task entries.
 *
 * Threads: pytasks_take() from any thread but a GIL thread.
 */
#ifndef PYTASKS_H
#define PYTASKS_H

#include <stddef.h>
#include <stdint.h>

struct _object;

#define PYTASKS_MAX 16384 /* tasks listed, at most (the rest counted) */
#define PYTASKS_JSON_MAX (8u << 20) /* pytasks_json's text, about, at most */

struct pytask_frame {
	char *func, *file;
	int line;
};

struct pytask {
	uint64_t id;	    /* id() of the task: stable while it lives */
	char *name, *state; /* state: running, pending, cancelling, done,
			       cancelled */
	uint64_t loop;	    /* id() of its loop */
	uint64_t thread_id; /* the loop's thread (Python ident) */
	char *coro;	    /* the coroutine's qualified name */
	struct pytask_frame *frames; /* innermost first */
	size_t nframes;
	char *awaits; /* what it waits for, in words ("" when nothing) */
	uint64_t *awaits_tasks, *awaited_by; /* ids */
	size_t nawaits, nawaited_by;
	double waited_s; /* since first seen waiting on the same thing; -1 */
};

struct pytasks {
	struct pytask *tasks;
	size_t n;
	size_t left_out; /* past PYTASKS_MAX */
	char note[128];	 /* why none: "asyncio is not imported", ... */
};

/* Fills out (release with pytasks_release): up to PYTASKS_MAX tasks,
 * max_depth frames each.  0, or a negative errno with err (the GIL did
 * not come, the listing failed or was cancelled).  cancel may be NULL. */
int pytasks_take(struct pytasks *out, size_t max_depth, volatile int *cancel,
		 char *err, size_t errlen);

void pytasks_release(struct pytasks *t);

/* The tasks as a JSON array of {id, name, state, coro, threadId, loop,
 * awaits, awaitsTasks, awaitedBy, waited (absent: not waiting), frames:
 * [{func, file, line}] innermost first}, about PYTASKS_JSON_MAX of text
 * at most (half a DAP message's cap); *left: the tasks not in it, those
 * past PYTASKS_MAX included.  NULL when out of memory. */
struct cJSON *pytasks_json(const struct pytasks *t, size_t *left);

/* ---- the sampler's attribution (sampler_tasks.c) ---- */

#define PYTASKS_ROOT_NAME_MAX 128 /* bytes of a task's name kept */

/* A task as the sampler finds it in a thread's stack: its coroutine's
 * frame (cpython_raw.frame: what walk_raw reads) and code object; and
 * how to tell, without the GIL, that it is still this task (one that
 * ended is freed, or a task of the same coroutine made at the same
 * addresses since has another name object): the task, its type, the
 * offset of the field that holds its name, and the name's length and
 * cached hash (cpython.read.named_same).  name_field 0: the task's class
 * keeps its name elsewhere (asyncio's pure-Python Task): not checked. */
struct pytask_root {
	uintptr_t frame, code;
	uint64_t thread_id; /* its loop's thread (Python ident) */
	char *name;	    /* at most PYTASKS_ROOT_NAME_MAX bytes */
	uintptr_t task, task_type;
	size_t name_field;
	int64_t name_len, name_hash;
};

struct pytask_roots {
	struct pytask_root *r;
	size_t n, left_out; /* left_out: past PYTASKS_MAX */
	double took_ms;	    /* the listing, the GIL taken (its switches to
			       the program's threads included) */
};

/* Every running loop's tasks not done yet, as roots (release with
 * pytasks_roots_release), waiting at most start_ms for the GIL.  0, or
 * a negative errno with err. */
int pytasks_roots(struct pytask_roots *out, int start_ms, char *err,
		  size_t errlen);
void pytasks_roots_release(struct pytask_roots *r);

/* GIL held: a new reference to pytasks.py's function called name, or
 * NULL with an exception set. */
struct _object *pytasks_get(const char *name);

/* The index of the task with id in t, or -1. */
long pytasks_find(const struct pytasks *t, uint64_t id);

#endif
