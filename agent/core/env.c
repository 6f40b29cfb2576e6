/*
 * env: see env.h.
 */
#include "env.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static char bytes[ENV_SNAPSHOT_BYTES];
static const char *entries[ENV_SNAPSHOT_MAX];
static unsigned nentries;
static int incomplete;
static atomic_int taken;

void env_snapshot(void)
{
	size_t used = 0;
	int none = 0;

	/* 0: not taken, 1: being taken, 2: taken. */
	if (!atomic_compare_exchange_strong(&taken, &none, 1))
		return;
	for (char **e = environ; e && *e; e++) {
		size_t n = strlen(*e) + 1;

		if (nentries == ENV_SNAPSHOT_MAX ||
		    n > sizeof(bytes) - used) {
			incomplete = 1;
			break;
		}
		memcpy(bytes + used, *e, n);
		entries[nentries++] = bytes + used;
		used += n;
	}
	atomic_store(&taken, 2);
}

const char *env_entry(unsigned i)
{
	return atomic_load(&taken) == 2 && i < nentries ? entries[i] : NULL;
}

const char *env_get(const char *name)
{
	size_t n = strlen(name);

	if (atomic_load(&taken) != 2)
		return getenv(name);
	for (unsigned i = 0; i < nentries; i++)
		if (!strncmp(entries[i], name, n) && entries[i][n] == '=')
			return entries[i] + n + 1;
	return incomplete ? getenv(name) : NULL;
}
