/*
 * dap_token: token format, constant-time comparison, the token file's
 * places and the checks made before it is read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dap_token.h"
#include "test.h"

static void test_check(void)
{
	char err[256], long_token[DAP_TOKEN_MAX + 2];

	CHECK(dap_token_check("0123456789abcdef", err, sizeof(err)) == 0);
	CHECK(dap_token_check("s3cret-token_0123/+=", err, sizeof(err)) == 0);
	CHECK(dap_token_check("short", err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "16 to 128") != NULL);
	CHECK(dap_token_check("", err, sizeof(err)) == -EINVAL);
	CHECK(dap_token_check(NULL, err, sizeof(err)) == -EINVAL);
	CHECK(dap_token_check("0123456789 abcdef", err, sizeof(err)) ==
	      -EINVAL);
	CHECK(dap_token_check("0123456789abcdef\n", err, sizeof(err)) ==
	      -EINVAL);
	CHECK(dap_token_check("0123456789abcdef\xc3\xa9", err, sizeof(err)) ==
	      -EINVAL);
	memset(long_token, 'a', sizeof(long_token) - 1);
	long_token[DAP_TOKEN_MAX] = 0;
	CHECK(dap_token_check(long_token, err, sizeof(err)) == 0);
	long_token[DAP_TOKEN_MAX] = 'a';
	long_token[DAP_TOKEN_MAX + 1] = 0;
	CHECK(dap_token_check(long_token, err, sizeof(err)) == -EINVAL);
}

static void test_equal(void)
{
	const char *t = "0123456789abcdef";

	CHECK(dap_token_equal(t, "0123456789abcdef") == 1);
	CHECK(dap_token_equal(t, "0123456789abcdeX") == 0);
	CHECK(dap_token_equal(t, "X123456789abcdef") == 0);
	CHECK(dap_token_equal(t, "0123456789abcde") == 0);
	CHECK(dap_token_equal(t, "0123456789abcdef0") == 0);
	CHECK(dap_token_equal(t, "") == 0);
	CHECK(dap_token_equal(t, NULL) == 0);
	CHECK(dap_token_equal(NULL, t) == 0);
	CHECK(dap_token_equal(NULL, NULL) == 0);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
	CHECK(chmod(path, mode) == 0);
}

static void test_files(void)
{
	char base[] = "/tmp/probing-token-test-XXXXXX", xdg[128], home[128];
	char dir[DAP_TOKEN_PATH_MAX], path[DAP_TOKEN_PATH_MAX + 16];
	char link[DAP_TOKEN_PATH_MAX + 16];
	char tok[DAP_TOKEN_MAX + 1], err[1024];

	CHECK(mkdtemp(base) != NULL);
	snprintf(xdg, sizeof(xdg), "%s/xdg", base);
	snprintf(home, sizeof(home), "%s/home", base);
	CHECK(mkdir(xdg, 0700) == 0 && mkdir(home, 0700) == 0);
	setenv("XDG_RUNTIME_DIR", xdg, 1);
	setenv("HOME", home, 1);

	/* The places. */
	CHECK(dap_token_path(DAP_TOKEN_RUNTIME, dir, path, sizeof(path)) == 0);
	CHECK(strcmp(path + strlen(xdg), "/probing/token") == 0);
	CHECK(strcmp(dir + strlen(xdg), "/probing") == 0);
	CHECK(dap_token_path(DAP_TOKEN_HOME, dir, path, sizeof(path)) == 0);
	CHECK(strcmp(path + strlen(home), "/.probing/token") == 0);
	setenv("XDG_RUNTIME_DIR", "relative", 1);
	CHECK(dap_token_path(DAP_TOKEN_RUNTIME, dir, path, sizeof(path)) ==
	      -ENOENT);
	setenv("XDG_RUNTIME_DIR", xdg, 1);

	/* None yet; then one in the home place. */
	CHECK(dap_token_find(tok, sizeof(tok), path, sizeof(path), err,
			     sizeof(err)) == -ENOENT);
	snprintf(dir, sizeof(dir), "%s/.probing", home);
	CHECK(mkdir(dir, 0700) == 0);
	snprintf(path, sizeof(path), "%s/token", dir);
	write_file(path, "0123456789abcdef0123\n", 0600);
	CHECK(dap_token_find(tok, sizeof(tok), path, sizeof(path), err,
			     sizeof(err)) == 0);
	CHECK_STR(tok, "0123456789abcdef0123");
	CHECK(strstr(path, "/home/.probing/token") != NULL);

	/* The runtime place comes first. */
	snprintf(dir, sizeof(dir), "%s/probing", xdg);
	CHECK(mkdir(dir, 0700) == 0);
	snprintf(path, sizeof(path), "%s/token", dir);
	write_file(path, "runtime-token-0123456789", 0600);
	CHECK(dap_token_find(tok, sizeof(tok), link, sizeof(link), err,
			     sizeof(err)) == 0);
	CHECK_STR(tok, "runtime-token-0123456789");

	/* Refused: others may read it; a link; not a token; a directory
	 * others may write in. */
	CHECK(chmod(path, 0644) == 0);
	CHECK(dap_token_read(path, tok, sizeof(tok), err, sizeof(err)) ==
	      -EPERM);
	CHECK(strstr(err, "mode is 644") != NULL);
	CHECK(dap_token_find(tok, sizeof(tok), link, sizeof(link), err,
			     sizeof(err)) == -EPERM);
	CHECK(chmod(path, 0400) == 0);
	CHECK(dap_token_read(path, tok, sizeof(tok), err, sizeof(err)) == 0);
	snprintf(link, sizeof(link), "%s/link", dir);
	CHECK(symlink(path, link) == 0);
	CHECK(dap_token_read(link, tok, sizeof(tok), err, sizeof(err)) ==
	      -EPERM);
	CHECK(strstr(err, "symbolic link") != NULL);
	unlink(link);
	CHECK(chmod(path, 0600) == 0);
	write_file(path, "short\n", 0600);
	CHECK(dap_token_read(path, tok, sizeof(tok), err, sizeof(err)) ==
	      -EINVAL);
	CHECK(strstr(err, "holds no token") != NULL);
	write_file(path, "runtime-token-0123456789", 0600);
	CHECK(chmod(dir, 0777) == 0);
	CHECK(dap_token_read(path, tok, sizeof(tok), err, sizeof(err)) ==
	      -EPERM);
	CHECK(strstr(err, "writable by others") != NULL);
	CHECK(chmod(dir, 0700) == 0);
	CHECK(dap_token_read(path, tok, sizeof(tok), err, sizeof(err)) == 0);
	if (geteuid() == 0) {
		/* Another user's file (root can make one). */
		CHECK(chown(path, 65534, (gid_t)-1) == 0);
		CHECK(dap_token_read(path, tok, sizeof(tok), err,
				     sizeof(err)) == -EPERM);
		CHECK(strstr(err, "belongs to uid 65534") != NULL);
		CHECK(chown(path, 0, (gid_t)-1) == 0);
	}
	snprintf(link, sizeof(link), "%s/missing", dir);
	CHECK(dap_token_read(link, tok, sizeof(tok), err, sizeof(err)) ==
	      -ENOENT);

	snprintf(link, sizeof(link), "rm -rf '%s'", base);
	CHECK(system(link) == 0);
}

TEST_MAIN(test_check, test_equal, test_files)
