/*
 * config_lease: settings a client changed for a while, put back by the
 * agent when the while is over — should the client never come back to
 * do it (killed, its connection lost, its machine gone).
 *
 * probing/config's restoreAfterMs: `probing trace` switches torch module
 * tracing on for its window with a lease of the window and a margin; its
 * own put-back (a set without a lease) ends the lease; if it dies, the
 * recorder thread (memory.h) restores the value from before at expiry —
 * unless someone changed the setting meanwhile (then theirs stays).
 * Leasing a setting already leased keeps the first value from before.
 *
 * Any thread (one mutex); config_lease_tick on the recorder thread.
 */
#ifndef CONFIG_LEASE_H
#define CONFIG_LEASE_H

#include <stdint.h>

#define CONFIG_LEASES_MAX 32

/* Leases name, about to be set to value, until ms from now: remembers
 * its value now.  0, or -ENOSPC (too many leases), -EINVAL (no such
 * name could be a setting's). */
int config_lease_take(const char *name, const char *value, int64_t ms);

/* name set without a lease: any lease of it ends, nothing restored. */
void config_lease_drop(const char *name);

/* Restores the settings whose lease is over (and whose value is still
 * the one leased).  The ms until the next lease ends, or -1 when none. */
int64_t config_lease_tick(void);

/* A forked child holds no client's lease. */
void config_lease_atfork_child(void);

#endif
