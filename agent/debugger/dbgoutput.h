/*
 * dbgoutput: the target's stdout and stderr as `output` events (category
 * "stdout" / "stderr") for the attached debugger, when it asked for them
 * (attach argument redirectOutput, as debugpy calls it).
 *
 * How: the `write` of the objects sys.stdout and sys.stderr are when the
 * debugger attaches is shadowed by an instance attribute — a C function
 * that calls the original write first (the output still goes where it
 * went, with the same result or exception) and then copies the text.  The
 * stream objects stay the same objects, so references taken before (a
 * logging handler's stream) are covered too.  Not covered: bytes written
 * to .buffer, and output that does not go through these objects (C code
 * writing to file descriptor 1 or 2, child processes).  A stream whose
 * object takes no attributes is left alone (a console `output` event
 * says so).
 *
 * Bounded: text is gathered in a buffer of DBGOUTPUT_CHUNK_MAX bytes per
 * stream and sent when it holds a line and DBGOUTPUT_COALESCE_MS passed
 * since the last event, when it is full, or on the debugger's periodic
 * tick (every 0.5 s).  At most DBGOUTPUT_RATE bytes per second are
 * forwarded (a burst of as much); the rest is dropped and counted, and a
 * console event says how much was dropped.  So a target printing 100 MB
 * queues at most a few MB of events, and the target never waits for the
 * debugger.
 *
 * Removed without residue: a detach stops forwarding at once (no GIL
 * needed) and the cleanup after it (dbgcontrol.h, GIL) deletes the
 * instance attributes again, unless the program replaced them meanwhile.
 *
 * Threads and locks: the write wrapper runs in the writing thread with
 * the GIL; a mutex guards the buffers and the budget (taken before the
 * session's lock: events ask who the owner is).  The periodic flush
 * runs on the loop thread without the GIL.
 */
#ifndef DBGOUTPUT_H
#define DBGOUTPUT_H

#include <stddef.h>

#define DBGOUTPUT_CHUNK_MAX (16u << 10) /* bytes of one event */
#define DBGOUTPUT_RATE (1u << 20)	/* bytes forwarded per second */
#define DBGOUTPUT_COALESCE_MS 50

/*
 * Worker thread: starts forwarding for the attached debugger — takes the
 * GIL (bounded by python.gil_timeout_ms) to shadow the streams' write.
 * Returns 0 (also when it was on already), or -ETIMEDOUT etc. with err;
 * a stream that cannot be wrapped is not an error (see above).
 */
int dbgoutput_start(char *err, size_t errlen);

/* Any thread, no GIL, no lock: stops forwarding now (a detach); what is
 * buffered is never sent. */
void dbgoutput_stop(void);

/* GIL held: removes the wrappers (the cleanup after a detach). */
void dbgoutput_remove(void);

/* Loop thread: sends what is buffered, and the note about dropped
 * output. */
void dbgoutput_flush(void);

/* In a forked child: the parent's wrappers forward nothing. */
void dbgoutput_atfork_child(void);

#endif
