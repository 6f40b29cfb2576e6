/*
 * config_lease: see config_lease.h.
 */
#include "config_lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "core/thread.h"
#include "log.h"

#define LEASE_NAME_MAX 64 /* past every setting's name */

struct lease {
	char name[LEASE_NAME_MAX];
	char before[CONFIG_VALUE_MAX];
	char value[CONFIG_VALUE_MAX];
	int64_t until; /* CLOCK_MONOTONIC ms */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct lease leases[CONFIG_LEASES_MAX];
static int nleases;

static int find(const char *name)
{
	for (int i = 0; i < nleases; i++)
		if (!strcmp(leases[i].name, name))
			return i;
	return -1;
}

static void remove_at(int i)
{
	leases[i] = leases[--nleases];
}

int config_lease_take(const char *name, const char *value, int64_t ms)
{
	int i, rc = 0;

	if (strlen(name) >= LEASE_NAME_MAX)
		return -EINVAL;
	pthread_mutex_lock(&lock);
	i = find(name);
	if (i < 0 && nleases < CONFIG_LEASES_MAX) {
		i = nleases++;
		snprintf(leases[i].name, sizeof(leases[i].name), "%s", name);
		if (config_get(name, leases[i].before,
			       sizeof(leases[i].before)))
			leases[i].before[0] = '\0';
	}
	if (i < 0) {
		rc = -ENOSPC;
	} else {
		snprintf(leases[i].value, sizeof(leases[i].value), "%s", value);
		leases[i].until = agent_now_ms() + ms;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void config_lease_drop(const char *name)
{
	int i;

	pthread_mutex_lock(&lock);
	if ((i = find(name)) >= 0)
		remove_at(i);
	pthread_mutex_unlock(&lock);
}

int64_t config_lease_tick(void)
{
	struct lease due[CONFIG_LEASES_MAX];
	int64_t t = agent_now_ms(), next = -1;
	int ndue = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < nleases;) {
		if (leases[i].until <= t) {
			due[ndue++] = leases[i];
			remove_at(i);
			continue;
		}
		if (next < 0 || leases[i].until - t < next)
			next = leases[i].until - t;
		i++;
	}
	pthread_mutex_unlock(&lock);
	/* Outside the lock: setting calls the settings' listeners. */
	for (int i = 0; i < ndue; i++) {
		char now[CONFIG_VALUE_MAX], err[256];

		if (config_get(due[i].name, now, sizeof(now)) ||
		    strcmp(now, due[i].value))
			continue; /* changed since by someone: theirs stays */
		if (config_set(due[i].name, due[i].before, err, sizeof(err)))
			log_warn("%s not put back to %s after its lease: %s",
				 due[i].name, due[i].before, err);
		else
			log_info("%s put back to %s: the client that set it "
				 "for a while did not",
				 due[i].name, due[i].before);
	}
	return next;
}

void config_lease_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
	nleases = 0;
}
