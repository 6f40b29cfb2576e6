/*
 * selfrun: see selfrun.h.
 */
#include "selfrun.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define ARGS_MAX 64

struct buf {
	char *data;
	size_t len, cap, max;
	int cut;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads what fd has into b (dropping what is past b->max).  Returns 1 at
 * end of file, 0 when more may come, -errno. */
static int drain(int fd, struct buf *b)
{
	char chunk[16384];
	ssize_t n = read(fd, chunk, sizeof(chunk));
	size_t take;

	if (n == 0)
		return 1;
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	take = (size_t)n;
	if (take > b->max - b->len) {
		take = b->max - b->len;
		b->cut = 1;
	}
	if (b->len + take + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + take + 1)
			cap *= 2;
		p = realloc(b->data, cap);
		if (!p)
			return -ENOMEM;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, chunk, take);
	b->len += take;
	b->data[b->len] = '\0';
	return 0;
}

static int spawn(const char *const *argv, int out_w, int err_w, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dflt;
	char *args[ARGS_MAX + 2];
	size_t n = 0;
	int rc;

	args[n++] = "probing";
	for (; argv[n - 1]; n++) {
		if (n > ARGS_MAX)
			return -E2BIG;
		args[n] = (char *)argv[n - 1];
	}
	args[n] = NULL;
	if ((rc = posix_spawn_file_actions_init(&fa)))
		return -rc;
	rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, out_w, 1);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, err_w, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
	/* Whatever a server thread opened without O_CLOEXEC stays here. */
	if (!rc)
		rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
	/* The child starts as a command typed in a shell would: no signal
	 * blocked (web blocks SIGINT and SIGTERM for its sigwait), none
	 * ignored that matters (mcp ignores SIGPIPE). */
	sigemptyset(&none);
	sigemptyset(&dflt);
	sigaddset(&dflt, SIGINT);
	sigaddset(&dflt, SIGTERM);
	sigaddset(&dflt, SIGPIPE);
	if (!rc && !(rc = posix_spawnattr_init(&at))) {
		rc = posix_spawnattr_setflags(
			&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
		if (!rc)
			rc = posix_spawnattr_setsigmask(&at, &none);
		if (!rc)
			rc = posix_spawnattr_setsigdefault(&at, &dflt);
		if (!rc)
			rc = posix_spawn(pid, "/proc/self/exe", &fa, &at, args,
					 environ);
		posix_spawnattr_destroy(&at);
	}
	posix_spawn_file_actions_destroy(&fa);
	return -rc;
}

int selfrun(const char *const *argv, int timeout_ms, size_t max_out,
	    struct selfrun_result *r)
{
	struct buf out = {.max = max_out}, err = {.max = SELFRUN_ERR_MAX};
	int op[2] = {-1, -1}, ep[2] = {-1, -1};
	int64_t deadline = now_ms() + timeout_ms;
	int killed = 0, ws = 0, rc;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	if (pipe2(op, O_CLOEXEC) || pipe2(ep, O_CLOEXEC)) {
		rc = -errno;
		goto fail;
	}
	rc = spawn(argv, op[1], ep[1], &pid);
	close(op[1]);
	close(ep[1]);
	op[1] = ep[1] = -1;
	if (rc)
		goto fail;
	while (op[0] >= 0 || ep[0] >= 0) {
		struct pollfd p[2] = {{.fd = op[0], .events = POLLIN},
				      {.fd = ep[0], .events = POLLIN}};
		int64_t left = deadline - now_ms();

		if (left <= 0 && !killed) {
			kill(pid, SIGKILL);
			killed = 1;
		}
		/* After the kill its pipes end at once (unless it left a
		 * child holding them: give that a second). */
		if (killed && left <= -1000)
			break;
		if (poll(p, 2, (int)(left > 0 ? left : 100)) < 0 &&
		    errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &ep[0] : &op[0];

			if (*fd < 0 || !p[i].revents)
				continue;
			rc = drain(*fd, i ? &err : &out);
			if (rc) {
				close(*fd);
				*fd = -1;
			}
		}
	}
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (op[0] >= 0)
		close(op[0]);
	if (ep[0] >= 0)
		close(ep[0]);
	if (!out.data && !(out.data = calloc(1, 1))) {
		free(err.data);
		return -ENOMEM;
	}
	if (!err.data && !(err.data = calloc(1, 1))) {
		free(out.data);
		return -ENOMEM;
	}
	r->status = killed	      ? -1
		    : WIFEXITED(ws)   ? WEXITSTATUS(ws)
		    : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws)
				      : -1;
	r->out = out.data;
	r->out_len = out.len;
	r->out_cut = out.cut;
	r->err = err.data;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (op[i] >= 0)
			close(op[i]);
		if (ep[i] >= 0)
			close(ep[i]);
	}
	return rc;
}

void selfrun_free(struct selfrun_result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

int selfrun_hand_down(const char *token, int timeout_ms)
{
	char ms[16];

	if (token && setenv("PROBING_TOKEN", token, 1))
		return -ENOMEM;
	if (timeout_ms > 0) {
		snprintf(ms, sizeof(ms), "%d", timeout_ms);
		if (setenv("PROBING_TIMEOUT", ms, 1))
			return -ENOMEM;
	}
	return 0;
}
