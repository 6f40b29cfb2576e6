/*
 * dap_token: see dap_token.h.
 */
#include "dap_token.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dap_token_check(const char *text, char *err, size_t errlen)
{
	size_t n = text ? strnlen(text, DAP_TOKEN_MAX + 1) : 0;

	if (n < DAP_TOKEN_MIN || n > DAP_TOKEN_MAX) {
		snprintf(err, errlen, "a token is %d to %d characters "
			 "(this one has %s%zu)", DAP_TOKEN_MIN, DAP_TOKEN_MAX,
			 n > DAP_TOKEN_MAX ? "more than " : "",
			 n > DAP_TOKEN_MAX ? (size_t)DAP_TOKEN_MAX : n);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)text[i];
		if (c <= ' ' || c >= 0x7f) {
			snprintf(err, errlen,
				 "a token is printable ASCII without spaces "
				 "(character %zu is not)",
				 i + 1);
			return -EINVAL;
		}
	}
	return 0;
}

int dap_token_equal(const char *expected, const char *given)
{
	size_t n, m;
	unsigned char d;

	if (!expected || !given)
		return 0;
	n = strlen(expected);
	m = strnlen(given, n + 1);
	/* Every byte of expected is looked at, whatever given holds; the
	 * only branch depends on given's length, which its sender knows. */
	d = (unsigned char)(n != m);
	for (size_t i = 0; i < n; i++) {
		unsigned char g = i < m ? (unsigned char)given[i] : 0;
		d |= (unsigned char)((unsigned char)expected[i] ^ g);
	}
	return d == 0;
}

static const char *home_dir(void)
{
	const char *h = getenv("HOME");
	struct passwd pw, *res = NULL;
	static __thread char buf[1024];

	if (h && h[0] == '/')
		return h;
	if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) || !res ||
	    !res->pw_dir || res->pw_dir[0] != '/')
		return NULL;
	/* pw_dir points into buf (thread-local): valid until the next call
	 * on this thread. */
	return res->pw_dir;
}

int dap_token_path(enum dap_token_place place, char *dir, char *out,
		   size_t outlen)
{
	char d[DAP_TOKEN_PATH_MAX];
	const char *base;
	struct stat st;
	int n;

	if (place == DAP_TOKEN_RUNTIME) {
		base = getenv("XDG_RUNTIME_DIR");
		if (!base || base[0] != '/' || stat(base, &st) ||
		    !S_ISDIR(st.st_mode))
			return -ENOENT;
		n = snprintf(d, sizeof(d), "%s/probing", base);
	} else {
		base = home_dir();
		if (!base)
			return -ENOENT;
		n = snprintf(d, sizeof(d), "%s/.probing", base);
	}
	if (n < 0 || (size_t)n >= sizeof(d) || (size_t)n + 7 > outlen)
		return -ENAMETOOLONG;
	snprintf(out, outlen, "%s/token", d);
	if (dir)
		snprintf(dir, DAP_TOKEN_PATH_MAX, "%s", d);
	return 0;
}

/* The directory of path must be ours (or root's) and writable by nobody
 * else: otherwise someone else could have put the file there. */
static int dir_safe(const char *path, char *err, size_t errlen)
{
	char dir[DAP_TOKEN_PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash || (size_t)(slash - path) >= sizeof(dir))
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (!dir[0])
		return 0;
	if (stat(dir, &st) < 0)
		return -errno;
	if ((st.st_uid != geteuid() && st.st_uid != 0) ||
	    (st.st_mode & 022)) {
		snprintf(err, errlen,
			 "refusing the token file %s: its directory is %s",
			 path,
			 st.st_mode & 022 ? "writable by others (chmod 700 it)"
					  : "owned by another user");
		return -EPERM;
	}
	return 0;
}

int dap_token_read(const char *path, char *out, size_t outlen, char *err,
		   size_t errlen)
{
	char buf[DAP_TOKEN_MAX + 3];
	struct stat st;
	ssize_t n;
	int fd, rc;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP)
			snprintf(err, errlen,
				 "refusing the token file %s: it is a "
				 "symbolic link",
				 path);
		else
			snprintf(err, errlen, "cannot read %s: %s", path,
				 strerror(errno));
		return rc == -ELOOP ? -EPERM : rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(errno));
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		if (!S_ISREG(st.st_mode))
			snprintf(err, errlen,
				 "refusing the token file %s: not a "
				 "regular file",
				 path);
		else if (st.st_uid != geteuid())
			snprintf(err, errlen,
				 "refusing the token file %s: it belongs to "
				 "uid %d, not to us (uid %d)",
				 path, (int)st.st_uid, (int)geteuid());
		else
			snprintf(err, errlen,
				 "refusing the token file %s: its mode is "
				 "%03o: others may read it (chmod 600 it)",
				 path, (unsigned)(st.st_mode & 0777));
		close(fd);
		return -EPERM;
	}
	if (dir_safe(path, err, errlen) == -EPERM) {
		close(fd);
		return -EPERM;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(-rc));
		return rc;
	}
	buf[n] = 0;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	if (dap_token_check(buf, err, errlen)) {
		char why[160];
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen, "the token file %s holds no token: %s",
			 path, why);
		return -EINVAL;
	}
	if (outlen <= (size_t)n)
		return -ENAMETOOLONG;
	memcpy(out, buf, (size_t)n + 1);
	return 0;
}

int dap_token_find(char *out, size_t outlen, char *path, size_t pathlen,
		   char *err, size_t errlen)
{
	static const enum dap_token_place places[] = {DAP_TOKEN_RUNTIME,
						      DAP_TOKEN_HOME};

	snprintf(err, errlen, "no token file");
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		int rc;

		if (dap_token_path(places[i], NULL, path, pathlen))
			continue;
		rc = dap_token_read(path, out, outlen, err, errlen);
		if (rc != -ENOENT)
			return rc;
	}
	snprintf(err, errlen, "no token file");
	return -ENOENT;
}
