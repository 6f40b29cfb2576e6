/*
 * config_compat: see config_compat.h.
 */
#include "config_compat.h"
#include "env.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "errbuf.h"
#include "log.h"
#include "nearest.h"
#include "units.h"

#define SETTINGS_MAX 128	      /* names compared for a suggestion */

/* probing.sample_rate: the share of steps traced. */
static int set_sample_rate(const char *value, int apply, char *err,
			   size_t errlen)
{
	char *end, step[32];
	double f;

	errno = 0;
	f = strtod(value, &end);
	if (errno || end == value || *end || !(f > 0) || f > 1) {
		errbuf_set(err, errlen,
			   "probing.sample_rate: '%s' is not a share of steps "
			   "in (0, 1] (it sets torch.step_rate, one step in N)",
			   value);
		return -EINVAL;
	}
	snprintf(step, sizeof(step), "%.0f", round(1 / f));
	if (!apply)
		return config_check("torch.step_rate", step, err, errlen);
	return config_set("torch.step_rate", step, err, errlen);
}

/* "1GB", "512MiB", "1000000": bytes, or -1. */
static long long parse_bytes(const char *text)
{
	static const struct unit units[] = {
		{"", 1},	    {"B", 1},		{"K", 1e3},
		{"KB", 1e3},	    {"KiB", 1024.0},	{"M", 1e6},
		{"MB", 1e6},	    {"MiB", 1048576.0}, {"G", 1e9},
		{"GB", 1e9},	    {"GiB", 1073741824.0},
	};
	double v;

	if (units_parse(text, units, sizeof(units) / sizeof(units[0]), &v) ||
	    !(v > 0) || v >= 9e18)
		return -1;
	return (long long)v;
}

/* probing.max_memory: the caps of the recorded tables. */
static int set_max_memory(const char *value, int apply, char *err,
			  size_t errlen)
{
	long long n = parse_bytes(value);
	char bytes[32], mb[32];
	int rc;

	if (n < 0) {
		errbuf_set(err, errlen,
			   "probing.max_memory: '%s' is not a size (bytes, or "
			   "with a unit: 512MB, 1GB, 1GiB)",
			   value);
		return -EINVAL;
	}
	snprintf(bytes, sizeof(bytes), "%lld", n);
	snprintf(mb, sizeof(mb), "%lld", (n + 1048575) / 1048576);
	/* All checked before any is set. */
	if ((rc = config_check("profile.retention_bytes", bytes, err,
			       errlen)) ||
	    (rc = config_check("torch.max_mb", mb, err, errlen)) ||
	    (rc = config_check("retention.max_mb", mb, err, errlen)) || !apply)
		return rc;
	if ((rc = config_set("profile.retention_bytes", bytes, err, errlen)) ||
	    (rc = config_set("retention.max_mb", mb, err, errlen)))
		return rc;
	return config_set("torch.max_mb", mb, err, errlen);
}

static const struct {
	const char *name, *env;
	int (*set)(const char *value, int apply, char *err, size_t errlen);
	const char *sets; /* the settings it sets, space-separated */
} originals[] = {
	{"probing.sample_rate", "PROBING_SAMPLE_RATE", set_sample_rate,
	 "torch.step_rate"},
	{"probing.max_memory", "PROBING_MAX_MEMORY", set_max_memory,
	 "profile.retention_bytes retention.max_mb torch.max_mb"},
};

#define NORIGINALS (sizeof(originals) / sizeof(originals[0]))

int config_compat_set(const char *name, const char *value, int apply,
		      char *err, size_t errlen)
{
	for (size_t i = 0; i < NORIGINALS; i++)
		if (!strcmp(originals[i].name, name))
			return originals[i].set(value, apply, err, errlen);
	return -ENOENT;
}

const char *config_compat_sets(const char *name)
{
	for (size_t i = 0; i < NORIGINALS; i++)
		if (!strcmp(originals[i].name, name))
			return originals[i].sets;
	return NULL;
}

void config_compat_unknown(const char *name, char *err, size_t errlen)
{
	const char *names[SETTINGS_MAX], *doc, *near;
	char value[CONFIG_VALUE_MAX];
	size_t n = 0;

	while (n < SETTINGS_MAX &&
	       config_entry(n, &names[n], value, sizeof(value), &doc) == 0)
		n++;
	near = nearest_word(name, names, n);
	if (near)
		errbuf_set(err, errlen,
			   "unknown setting '%s'; did you mean '%s'?", name,
			   near);
	else
		errbuf_set(err, errlen,
			   "unknown setting '%s' ('probing config' lists them)",
			   name);
}

/* The PROBING_* variables read elsewhere: the agent's shorthands, the
 * CLI's, and those of the project's own build and test tools (set in the
 * environment the programs they start inherit). */
static const char *const known_env[] = {
	"PROBING_PORT",	      "PROBING_LISTEN",
	"PROBING_READONLY",   "PROBING_CRASH",
	"PROBING_TOKEN",      "PROBING_LOG",
	"PROBING_NODES",      "PROBING_TARGET",
	"PROBING_TIMEOUT",    "PROBING_LIBRARY",
	"PROBING_BUILD",      "PROBING_E2E_VERSIONS",
	"PROBING_TARGET_PRELOAD", "PROBING_SOAK_N",
	"PROBING_INJECT_TEST_DELAY_US", "PROBING_TEST_PYTHONS",
	"PROBING_E2E_TWIN",   "PROBING_E2E_EVERY",
	"PROBING_E2E_ONCE",   "PROBING_GPU_PYTHON",
	"PROBING_WEB_ARTIFACTS", "PROBING_EDITOR_ARTIFACTS",
};

#define ENV_NAMES_MAX (SETTINGS_MAX + 32)
_Static_assert(NORIGINALS + sizeof(known_env) / sizeof(known_env[0]) <= 32,
	       "ENV_NAMES_MAX has no room for every name read");

int config_compat_env(char *err, size_t errlen)
{
	static char setting_env[SETTINGS_MAX][96];
	const char *names[ENV_NAMES_MAX], *tails[ENV_NAMES_MAX], *doc, *sname,
		*near, *v;
	char value[CONFIG_VALUE_MAX], name[96], msg[256];
	const char *e;
	size_t n = 0;
	int rc = 0;

	for (size_t i = 0; i < NORIGINALS; i++) {
		v = env_get(originals[i].env);
		if (v && *v && originals[i].set(v, 1, msg, sizeof(msg))) {
			if (!rc)
				errbuf_set(err, errlen, "%s: %s",
					   originals[i].env, msg);
			rc = -EINVAL;
		}
	}
	/* Every name read: the settings', the originals', the others. */
	for (size_t i = 0; i < SETTINGS_MAX &&
			   config_entry(i, &sname, value, sizeof(value), &doc) == 0;
	     i++) {
		config_env_name(sname, setting_env[i], sizeof(setting_env[i]));
		names[n++] = setting_env[i];
	}
	for (size_t i = 0; i < NORIGINALS; i++)
		names[n++] = originals[i].env;
	for (size_t i = 0; i < sizeof(known_env) / sizeof(known_env[0]); i++)
		names[n++] = known_env[i];
	for (unsigned i = 0; (e = env_entry(i)); i++) {
		size_t len = strcspn(e, "="), k;

		if (strncmp(e, "PROBING_", 8) || len >= sizeof(name))
			continue;
		memcpy(name, e, len);
		name[len] = '\0';
		for (k = 0; k < n && strcmp(names[k], name); k++)
			;
		if (k < n)
			continue;
		/* Compared after "PROBING_": the common start is no likeness. */
		for (k = 0; k < n; k++)
			tails[k] = names[k] + 8;
		near = nearest_word(name + 8, tails, n);
		if (near)
			log_warn("%s is not a Probing setting (ignored); did "
				 "you mean PROBING_%s?",
				 name, near);
		else
			log_warn("%s is not a Probing setting (ignored; "
				 "'probing config' lists them, as "
				 "PROBING_<NAME>)",
				 name);
	}
	return rc;
}
