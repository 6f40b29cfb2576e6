/*
 * config_compat: the original Probing's setting names, and help with
 * names that are not settings.  Part of config (config.h).
 *
 * People come with the original's README: `config probing.sample_rate=0.05`,
 * `config probing.max_memory=1GB`, PROBING_SAMPLE_RATE=0.1.  Those with a
 * counterpart here are set through it:
 *
 *   probing.sample_rate=F  (0 < F <= 1, the share of steps traced)
 *                          torch.step_rate = round(1 / F)
 *   probing.max_memory=N   (bytes, or with a unit: 512MB, 1GB, 1GiB)
 *                          profile.retention_bytes = N, and
 *                          torch.max_mb and retention.max_mb = N in MiB
 *                          (the recorded tables' caps, in memory and on
 *                          disk)
 *   PROBING_RETENTION_DAYS is retention.days's own name.
 *
 * Environment variables named PROBING_* (of the environment the agent was
 * loaded into: env.h) that are neither settings nor
 * one of the variables Probing's tools read are said once, on the
 * program's stderr, with the nearest name when one is near.
 */
#ifndef CONFIG_COMPAT_H
#define CONFIG_COMPAT_H

#include <stddef.h>

/* Sets an original name (apply 0: only checks the value): 0, -EINVAL
 * (reason in err), or -ENOENT when name is not one (nothing written to
 * err). */
int config_compat_set(const char *name, const char *value, int apply,
		      char *err, size_t errlen);

/* The settings original name sets, space-separated, or NULL when name
 * is not one. */
const char *config_compat_sets(const char *name);

/* err for an unknown setting name: "unknown setting 'x'", with the
 * nearest setting when one is near. */
void config_compat_unknown(const char *name, char *err, size_t errlen);

/* The environment's original names (PROBING_SAMPLE_RATE, PROBING_MAX_MEMORY)
 * set, and the PROBING_* variables nobody reads warned about, once.
 * Returns 0, or -EINVAL with the first bad value in err. */
int config_compat_env(char *err, size_t errlen);

#endif
