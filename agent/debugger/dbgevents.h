/*
 * dbgevents: the DAP events the debugger sends to the attached session —
 * stopped, continued, output (logpoints, conditions that raised),
 * breakpoint (verified when its file loads) and thread (started, exited).
 *
 * Events go to whichever session is attached when they are posted
 * (dbgsession_owner()); with none they are dropped.  Thread events come
 * from polling the target's threads twice a second on the server's loop
 * (read without the GIL): a thread that lives less than that may not be
 * reported.
 *
 * Threads and locks: any thread may post (server_post_event() queues for
 * the loop); the thread poll runs on the loop thread, and on the same
 * tick flushes the target's buffered output (dbgoutput.h) and retries
 * arming a pause (dbgcontrol.h).  No function takes
 * the GIL or runs Python.
 */
#ifndef DBGEVENTS_H
#define DBGEVENTS_H

#include <stdint.h>

struct server;

/* Posts to srv's sessions and starts the thread poll on its loop (loop
 * thread or before the loop runs). */
void dbgevents_init(struct server *srv);

/* Logpoint output (dbgevents_output) sent per second at most, in a burst
 * of as many; beyond it messages are dropped, counted, and a console
 * `output` event says how many on the next tick (twice a second), so a
 * logpoint on a hot line neither floods the client (whose session would
 * be closed when its output queue fills) nor drops it silently. */
#define DBGEVENTS_LOG_RATE 200

/* `output`: text plus a newline, of category ("console", "stderr", ...),
 * from path:line when path is not NULL (a logpoint's message or error:
 * rate-limited, above). */
void dbgevents_output(const char *category, const char *text, const char *path,
		      int line);

/* `output` of category with text as it is (the target's streams). */
void dbgevents_stream(const char *category, const char *text);

/* `breakpoint` (changed, verified) for each of ids[0..n) at lines. */
void dbgevents_verified(const int *ids, const int *lines, int n);

/* `stopped`: reason, the thread, all threads stopped; preserveFocusHint
 * unless first; the breakpoints hit; text as description and text. */
void dbgevents_stopped(const char *reason, long tid, int first, const int *ids,
		       int nids, const char *text);

/* `continued` (all threads) to session, attached or not. */
void dbgevents_continued(uint64_t session);

/* A newly attached session hears of the threads started from now: the
 * threads now running are remembered as known. */
void dbgevents_threads_start(uint64_t session);

/* In a forked child: the parent's server and known threads forgotten. */
void dbgevents_atfork_child(void);

#endif
