/*
 * dbgevents: the DAP events the debugger sends to the attached session —
 * stopped, continued, output (logpoints, conditions that raised),
 * breakpoint (verified when its file loads) and thread (started, exited).
 *
 * Events go to whichever session is attached when they are posted (the
 * session tells: dbgevents_set_owner()); with none they are dropped.
 * Thread events come from polling the target's threads on the debugger's
 * tick (twice a second, debugger.c; read without the GIL): a thread that
 * lives less than that may not be reported.  Below everything else of
 * the debugger: it calls none of its modules.
 *
 * Threads and locks: any thread may post (server_post_event() queues for
 * the loop); the tick runs on the loop thread.  No function takes the GIL
 * or runs Python.
 */
#ifndef DBGEVENTS_H
#define DBGEVENTS_H

#include <stdint.h>

struct server;

/* Posts to srv's sessions (before the loop runs). */
void dbgevents_init(struct server *srv);

/* The attached session from now on (0: none); any thread. */
void dbgevents_set_owner(uint64_t session);

/* Loop thread, on the debugger's tick: `thread` events (started,
 * exited) for the attached session, and the count of logpoint messages
 * dropped since the last tick. */
void dbgevents_tick(void);

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

/* A newly attached session (already the owner) hears of the threads
 * started from now: the threads now running are remembered as known. */
void dbgevents_threads_start(uint64_t session);

/* In a forked child: the parent's server and known threads forgotten. */
void dbgevents_atfork_child(void);

/* The thread a stop that no thread reached names: the main thread (its
 * kernel id is the process's) when it has a Python thread state, else
 * another that has.  Loop thread. */
long dbgevents_main_thread(void);

#endif
