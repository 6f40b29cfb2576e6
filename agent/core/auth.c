/*
 * auth: the agent's access token.  See auth.h.
 */
#include "auth.h"
#include "env.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "dap_token.h"
#include "fdown.h"
#include "log.h"

#define TOKEN_BYTES 32 /* random bytes of a generated token */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *token;	      /* atomic; never freed once set */
static char source[DAP_TOKEN_PATH_MAX]; /* under lock */
static char env_error[256];	      /* PROBING_TOKEN is bad: why */
static int none_chosen;		      /* atomic: AUTH_TOKEN_NONE was said */

const char *auth_token(void)
{
	return __atomic_load_n(&token, __ATOMIC_ACQUIRE);
}

int auth_tokenless(void)
{
	return __atomic_load_n(&none_chosen, __ATOMIC_ACQUIRE) && !auth_token();
}

/* Lock held.  The user said AUTH_TOKEN_NONE (src: where). */
static void choose_none_locked(const char *src)
{
	snprintf(source, sizeof(source), "%s", src);
	config_set_info("server.token", "none (" AUTH_TOKEN_NONE
					" chosen: TCP on loopback is open to "
					"every local user)");
	__atomic_store_n(&none_chosen, 1, __ATOMIC_RELEASE);
}

/* Lock held.  Replaces the token (a copy of t) and says where it came
 * from.  Returns 0 or -ENOMEM. */
static int set_locked(const char *t, const char *src)
{
	const char *old = auth_token();
	char *copy;

	if (!old || strcmp(old, t) != 0) {
		copy = strdup(t);
		if (!copy)
			return -ENOMEM;
		/* The old string stays: a reader may still hold it. */
		__atomic_store_n(&token, copy, __ATOMIC_RELEASE);
	}
	snprintf(source, sizeof(source), "%s", src);
	config_set_info("server.token", src);
	return 0;
}

int auth_init(char *err, size_t errlen)
{
	const char *v = env_get("PROBING_TOKEN");
	char why[200];
	int rc;

	if (!v || !*v)
		return 0;
	if (!strcmp(v, AUTH_TOKEN_NONE)) {
		pthread_mutex_lock(&lock);
		choose_none_locked("PROBING_TOKEN");
		pthread_mutex_unlock(&lock);
		return 0;
	}
	if (dap_token_check(v, why, sizeof(why))) {
		snprintf(env_error, sizeof(env_error), "PROBING_TOKEN: %s", why);
		snprintf(err, errlen, "%s", env_error);
		return -EINVAL;
	}
	pthread_mutex_lock(&lock);
	rc = set_locked(v, "PROBING_TOKEN");
	pthread_mutex_unlock(&lock);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

int auth_token_set(const char *t, const char *src, char *err, size_t errlen)
{
	int rc;

	if (!strcmp(t, AUTH_TOKEN_NONE)) {
		pthread_mutex_lock(&lock);
		rc = auth_token() ? -EPERM : 0;
		if (rc)
			snprintf(err, errlen,
				 "the agent has a token already (%s): there is "
				 "no way back to none while it runs",
				 source);
		else
			choose_none_locked(src);
		pthread_mutex_unlock(&lock);
		return rc;
	}
	if (dap_token_check(t, err, errlen))
		return -EINVAL;
	pthread_mutex_lock(&lock);
	rc = set_locked(t, src);
	env_error[0] = 0;
	pthread_mutex_unlock(&lock);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

int auth_check(const char *given)
{
	return dap_token_equal(auth_token(), given);
}

int auth_token_is_users(void)
{
	int mine;

	pthread_mutex_lock(&lock);
	mine = !strcmp(source, "PROBING_TOKEN") ||
	       !strcmp(source, "probing.init") || env_error[0];
	pthread_mutex_unlock(&lock);
	return mine;
}

/* ---- the token file ---------------------------------------------------- */

/* Makes dir (0700) or checks the one there: ours and not writable by
 * others. */
static int make_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", dir,
			 strerror(errno));
		return rc;
	}
	if (lstat(dir, &st) < 0) {
		int rc = -errno;
		snprintf(err, errlen, "cannot use %s: %s", dir,
			 strerror(errno));
		return rc;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		snprintf(err, errlen,
			 "refusing %s for the token file: %s", dir,
			 !S_ISDIR(st.st_mode) ? "not a directory"
			 : st.st_uid != geteuid()
				 ? "it belongs to another user"
				 : "others may write in it (fix: chmod 700)");
		return -EPERM;
	}
	return 0;
}

int auth_token_generate(char *out, size_t outlen, char *err, size_t errlen)
{
	unsigned char raw[TOKEN_BYTES];
	size_t got = 0;

	if (outlen < 2 * TOKEN_BYTES + 1)
		return -EINVAL;
	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = -errno;
			snprintf(err, errlen, "getrandom: %s", strerror(errno));
			return rc;
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/* Writes t into a new 0600 file next to path; its name in tmp. */
static int write_tmp(const char *dir, const char *t, char *tmp,
		     size_t tmplen, char *err, size_t errlen)
{
	size_t len = strlen(t);
	char text[DAP_TOKEN_MAX + 2];
	struct fdown f;
	int rc = 0;

	snprintf(tmp, tmplen, "%s/.token.%d.%ld", dir, (int)getpid(),
		 (long)gettid());
	unlink(tmp); /* a leftover of a crashed writer with our pid */
	rc = fdown_open_take(&f, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
			     0600);
	if (rc) {
		snprintf(err, errlen, "cannot create %s: %s", tmp,
			 strerror(-rc));
		return rc;
	}
	memcpy(text, t, len);
	text[len++] = '\n';
	if (write(f.fd, text, len) != (ssize_t)len ||
	    (fdatasync(f.fd) < 0 && errno != EINVAL)) {
		rc = errno ? -errno : -EIO;
		snprintf(err, errlen, "cannot write %s: %s", tmp,
			 strerror(-rc));
	}
	fdown_close(&f);
	if (rc)
		unlink(tmp);
	return rc;
}

/* Loads path, or creates it with a new token (another process creating
 * it at the same moment wins: its token is loaded). */
static int load_or_create(const char *dir, const char *path, char *out,
			  size_t outlen, char *err, size_t errlen)
{
	char tmp[DAP_TOKEN_PATH_MAX + 64], fresh[2 * TOKEN_BYTES + 1];
	int rc;

	rc = make_dir(dir, err, errlen);
	if (rc)
		return rc;
	rc = dap_token_read(path, out, outlen, err, errlen);
	if (rc != -ENOENT)
		return rc;
	rc = auth_token_generate(fresh, sizeof(fresh), err, errlen);
	if (rc)
		return rc;
	rc = write_tmp(dir, fresh, tmp, sizeof(tmp), err, errlen);
	if (rc)
		return rc;
	/* link() never replaces: the file appears whole, or not at all. */
	if (link(tmp, path) < 0) {
		rc = -errno;
		unlink(tmp);
		if (rc == -EEXIST)
			return dap_token_read(path, out, outlen, err, errlen);
		snprintf(err, errlen, "cannot create %s: %s", path,
			 strerror(-rc));
		return rc;
	}
	unlink(tmp);
	log_info("generated a token for TCP clients: %s", path);
	snprintf(out, outlen, "%s", fresh);
	return 0;
}

int auth_token_ensure(char *err, size_t errlen)
{
	static const enum dap_token_place places[] = {DAP_TOKEN_RUNTIME,
						      DAP_TOKEN_HOME};
	char dir[DAP_TOKEN_PATH_MAX], path[DAP_TOKEN_PATH_MAX];
	char t[DAP_TOKEN_MAX + 1], why[512] = "";
	int rc = -ENOENT;

	pthread_mutex_lock(&lock);
	if (auth_token()) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	if (env_error[0]) {
		snprintf(err, errlen, "%s", env_error);
		pthread_mutex_unlock(&lock);
		return -EINVAL;
	}
	if (__atomic_load_n(&none_chosen, __ATOMIC_ACQUIRE)) {
		snprintf(err, errlen,
			 "%s=" AUTH_TOKEN_NONE " says no token, and only "
			 "loopback may be listened on without one",
			 source);
		pthread_mutex_unlock(&lock);
		return -EPERM;
	}
	snprintf(why, sizeof(why), "no runtime directory and no home");
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		if (dap_token_path(places[i], dir, path, sizeof(path)))
			continue;
		rc = load_or_create(dir, path, t, sizeof(t), err, errlen);
		if (rc == 0) {
			rc = set_locked(t, path);
			break;
		}
		/* A file that is there but refused is the user's to fix:
		 * going on to another place would hide it. */
		if (rc == -EPERM || rc == -EINVAL)
			break;
		snprintf(why, sizeof(why), "%s", err);
	}
	pthread_mutex_unlock(&lock);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	else if (rc && rc != -EPERM && rc != -EINVAL)
		snprintf(err, errlen, "no token file could be made: %s", why);
	return rc;
}

/* Lock held.  Stores t in the first usable token file; returns its path
 * in out, or -errno. */
static int store_locked(const char *t, char *out, size_t outlen, char *err,
			size_t errlen)
{
	static const enum dap_token_place places[] = {DAP_TOKEN_RUNTIME,
						      DAP_TOKEN_HOME};
	char dir[DAP_TOKEN_PATH_MAX], tmp[DAP_TOKEN_PATH_MAX + 64];
	char have[DAP_TOKEN_MAX + 1], why[256];
	int rc = -ENOENT;

	snprintf(err, errlen, "no runtime directory and no home");
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		if (dap_token_path(places[i], dir, out, outlen))
			continue;
		rc = make_dir(dir, err, errlen);
		if (rc)
			continue;
		if (dap_token_read(out, have, sizeof(have), why,
				   sizeof(why)) == 0 &&
		    strcmp(have, t) == 0)
			return 0;
		rc = write_tmp(dir, t, tmp, sizeof(tmp), err, errlen);
		if (rc)
			continue;
		if (rename(tmp, out) == 0)
			return 0;
		rc = -errno;
		snprintf(err, errlen, "cannot replace %s: %s", out,
			 strerror(errno));
		unlink(tmp);
	}
	return rc;
}

int auth_token_adopt(const char *t, char *err, size_t errlen)
{
	char path[DAP_TOKEN_PATH_MAX], why[DAP_TOKEN_PATH_MAX + 256];
	int rc;

	if (dap_token_check(t, err, errlen))
		return -EINVAL;
	pthread_mutex_lock(&lock);
	if (store_locked(t, path, sizeof(path), why, sizeof(why))) {
		log_warn("the adopted token is not in a token file (clients "
			 "need --token): %s",
			 why);
		snprintf(path, sizeof(path), "adopted");
	}
	rc = set_locked(t, path);
	env_error[0] = 0;
	pthread_mutex_unlock(&lock);
	if (rc)
		snprintf(err, errlen, "out of memory");
	return rc;
}

void auth_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
