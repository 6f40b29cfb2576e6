/*
 * server_events: events posted to sessions from any thread.
 *
 * server_post_event() (server.h) queues an event under the server's lock
 * (at most SERVER_EVENTS_MAX waiting) and wakes the loop; the loop takes
 * the whole queue at once (server.c, on its wake-up) and delivers it with
 * server_events_deliver(): to one session, or a copy to every session,
 * skipping those closed or not authed yet.  An event for a session that
 * is gone is dropped.
 */
#ifndef SERVER_EVENTS_H
#define SERVER_EVENTS_H

#define SERVER_EVENTS_MAX 4096

struct server;
struct posted_event;

/* Loop thread: delivers and frees a list taken from the queue. */
void server_events_deliver(struct server *srv, struct posted_event *ev);

/* The server's lock held: takes the whole queue (the caller delivers or
 * frees it). */
struct posted_event *server_events_take_locked(struct server *srv);

/* Frees a list of events unsent (the server is going away). */
void server_events_free(struct posted_event *ev);

#endif
