/*
 * dap_hub: the ranks' sessions of a job meet at the parent's hub — this
 * user's processes only, lines bounded, a peer that misbehaves hung up.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands/dap_hub.h"
#include "test.h"

struct heard {
	long long rank[8];
	char line[8][DAP_HUB_LINE_MAX];
	int n;
};

static void record(void *arg, long long rank, const char *line)
{
	struct heard *h = arg;

	if (h->n < 8) {
		h->rank[h->n] = rank;
		snprintf(h->line[h->n], sizeof(h->line[0]), "%s", line);
		h->n++;
	}
}

/* One turn of the parent's loop. */
static void turn(struct dap_hub *hub, struct heard *h)
{
	struct pollfd p[16];
	int n = dap_hub_pollfds(hub, p, 16);

	poll(p, (nfds_t)n, 200);
	dap_hub_ready(hub, p, n, record, h);
}

static int hear(int fd, char *line)
{
	char buf[DAP_HUB_LINE_MAX];
	size_t have = 0;

	for (int i = 0; i < 50; i++) {
		int rc = dap_hub_hear(fd, buf, &have, line, DAP_HUB_LINE_MAX);

		if (rc)
			return rc;
		usleep(10000);
	}
	return 0;
}

static void test_ranks_meet(void)
{
	struct dap_hub *hub;
	struct heard h = {0};
	char name[64], line[DAP_HUB_LINE_MAX];
	int a, b;

	CHECK(dap_hub_new(&hub, name, sizeof(name)) == 0);
	CHECK(name[0] == '@');
	a = dap_hub_join(name, 0);
	b = dap_hub_join(name, 3);
	CHECK(a >= 0 && b >= 0);
	for (int i = 0; i < 5 && dap_hub_ranks(hub) < 2; i++)
		turn(hub, &h);
	CHECK(dap_hub_ranks(hub) == 2);
	CHECK(dap_hub_say(b, "stopped breakpoint") == 0);
	for (int i = 0; i < 5 && !h.n; i++)
		turn(hub, &h);
	CHECK(h.n == 1 && h.rank[0] == 3);
	CHECK_STR(h.line[0], "stopped breakpoint");
	/* Told to every rank but the one that stopped. */
	CHECK(dap_hub_tell(hub, "pause", 3) == 1);
	CHECK(hear(a, line) == 1);
	CHECK_STR(line, "pause");
	CHECK(dap_hub_hear(b, (char[DAP_HUB_LINE_MAX]){0}, &(size_t){0}, line,
			   sizeof(line)) == 0);
	CHECK(dap_hub_tell(hub, "continue", -1) == 2);
	/* A rank that goes is dropped; the hub going is heard. */
	close(b);
	for (int i = 0; i < 5 && dap_hub_ranks(hub) > 1; i++)
		turn(hub, &h);
	CHECK(dap_hub_ranks(hub) == 1);
	dap_hub_free(hub);
	{
		char buf[DAP_HUB_LINE_MAX];
		size_t have = 0;
		int rc;

		/* "continue" was sent before: read, then the end. */
		while ((rc = dap_hub_hear(a, buf, &have, line, sizeof(line))) ==
		       1)
			;
		CHECK(rc == -1);
	}
	close(a);
}

static void test_a_line_too_long_hangs_up(void)
{
	struct dap_hub *hub;
	struct heard h = {0};
	char name[64], big[DAP_HUB_LINE_MAX * 2];
	int a;

	CHECK(dap_hub_new(&hub, name, sizeof(name)) == 0);
	a = dap_hub_join(name, 1);
	CHECK(a >= 0);
	memset(big, 'x', sizeof(big));
	CHECK(send(a, big, sizeof(big), 0) == (ssize_t)sizeof(big));
	for (int i = 0; i < 5; i++)
		turn(hub, &h);
	CHECK(h.n == 0 && dap_hub_ranks(hub) == 0);
	/* A line longer than a line can be is refused before it goes. */
	big[sizeof(big) - 1] = '\0';
	CHECK(dap_hub_say(a, big) == -EMSGSIZE);
	close(a);
	/* Nobody said who they are: told to none. */
	CHECK(dap_hub_tell(hub, "pause", -1) == 0);
	dap_hub_free(hub);
}

/* Another user's process can neither join nor be heard (root only: the
 * test becomes nobody in a child). */
static void test_another_user_is_refused(void)
{
	struct dap_hub *hub;
	struct heard h = {0};
	char name[64];
	pid_t pid;
	int status = -1;

	if (geteuid() != 0) {
		printf("test_another_user_is_refused: skipped (not root)\n");
		return;
	}
	CHECK(dap_hub_new(&hub, name, sizeof(name)) == 0);
	pid = fork();
	if (pid == 0) {
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(3);
		/* The hub is root's: refused on this side too. */
		fd = dap_hub_join(name, 5);
		_exit(fd == -EPERM ? 0 : 4);
	}
	for (int i = 0; i < 10; i++)
		turn(hub, &h);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(dap_hub_ranks(hub) == 0 && h.n == 0);
	dap_hub_free(hub);
}

/* A listener under the hub's name that never accepts (another user's,
 * say), its backlog full: a rank's join fails at once, it never hangs. */
static void test_a_full_backlog_never_holds_a_rank(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char name[64];
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0), fds[8], n = 0, rc = 0;
	socklen_t len;

	snprintf(name, sizeof(name), "@probing-job-test-%d", (int)getpid());
	memcpy(sa.sun_path + 1, name + 1, strlen(name) - 1);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	CHECK(bind(lfd, (struct sockaddr *)&sa, len) == 0 && listen(lfd, 0) == 0);
	/* Joins until one is refused: the backlog (0, and what Linux adds)
	 * fills after a few. */
	while (n < 8 && (rc = dap_hub_join(name, n)) >= 0)
		fds[n++] = rc;
	CHECK(n < 8 && rc == -EAGAIN);
	while (n > 0)
		close(fds[--n]);
	close(lfd);
}

/* Out of descriptors: the hub stops polling its listener (a pending
 * connection would keep poll() returning at once) until a peer goes. */
static void test_out_of_descriptors_is_no_spin(void)
{
	struct rlimit old, low;
	struct dap_hub *hub;
	struct heard h = {0};
	struct pollfd p[16];
	char name[64];
	int fds[64], n = 0, deaf = 0;

	getrlimit(RLIMIT_NOFILE, &old);
	CHECK(dap_hub_new(&hub, name, sizeof(name)) == 0);
	low = old;
	low.rlim_cur = (rlim_t)dup(0) + 1; /* the next free number, and one */
	close((int)low.rlim_cur - 1);
	setrlimit(RLIMIT_NOFILE, &low);
	/* Each join takes a descriptor here and, accepted, one in the hub:
	 * the hub runs out first or with the joins. */
	for (int i = 0; i < 64 && !deaf; i++) {
		int fd = dap_hub_join(name, i);

		if (fd >= 0)
			fds[n++] = fd;
		turn(hub, &h);
		dap_hub_pollfds(hub, p, 16);
		deaf = p[0].fd == -1;
	}
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK(deaf);
	/* A second later (or when a peer goes), the listener is polled
	 * again, and what waited is taken. */
	while (n > 0)
		close(fds[--n]);
	usleep(1100 * 1000);
	dap_hub_pollfds(hub, p, 16);
	CHECK(p[0].fd >= 0);
	for (int i = 0; i < 5; i++)
		turn(hub, &h);
	CHECK(dap_hub_ranks(hub) == 0);
	dap_hub_free(hub);
}

TEST_MAIN(test_ranks_meet, test_a_line_too_long_hangs_up,
	  test_another_user_is_refused, test_a_full_backlog_never_holds_a_rank,
	  test_out_of_descriptors_is_no_spin)
