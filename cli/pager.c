/*
 * pager: see pager.h.
 */
#include "pager.h"
#include "render/output.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t pager;

/* Is name an executable on PATH? */
static int on_path(const char *name)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (n && n + strlen(name) + 2 <= sizeof(buf)) {
			memcpy(buf, path, n);
			buf[n] = '/';
			strcpy(buf + n + 1, name);
			if (access(buf, X_OK) == 0)
				return 1;
		}
		path += n + (path[n] == ':');
	}
	return 0;
}

/* Can the first word of command cmd be run: a path that is executable,
 * or a name on PATH?  (A pager that does not start would take the
 * output with it: sh's "not found", then nothing.) */
static int runnable(const char *cmd)
{
	char word[256];
	size_t n;

	cmd += strspn(cmd, " \t");
	n = strcspn(cmd, " \t");
	if (n == 0 || n >= sizeof(word))
		return 0;
	memcpy(word, cmd, n);
	word[n] = '\0';
	return strchr(word, '/') ? access(word, X_OK) == 0 : on_path(word);
}

/* The pager's command, or NULL for none. */
static const char *which(void)
{
	const char *p = getenv("PROBING_PAGER");

	if (!p)
		p = getenv("PAGER");
	if (!p)
		return on_path("less") ? "less" : NULL;
	if (!*p || !strcmp(p, "cat") || !runnable(p))
		return NULL;
	return p;
}

void cli_pager_start(void)
{
	struct winsize ws;
	const char *cmd;
	int fd[2], width = 0;

	if (pager || !isatty(1) || !(cmd = which()))
		return;
	if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		width = ws.ws_col;
	if (pipe(fd) < 0)
		return;
	fflush(stdout);
	pager = fork();
	if (pager < 0) {
		pager = 0;
		close(fd[0]);
		close(fd[1]);
		return;
	}
	if (pager == 0) {
		dup2(fd[0], 0);
		close(fd[0]);
		close(fd[1]);
		if (!getenv("LESS"))
			setenv("LESS", "FRX", 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	dup2(fd[1], 1);
	close(fd[0]);
	close(fd[1]);
	cli_term_keep(width);
}

void cli_pager_end(void)
{
	int status;

	if (pager <= 0)
		return;
	fflush(stdout);
	close(1);
	/* Ctrl-C belongs to the pager now (less stays; the CLI waits). */
	signal(SIGINT, SIG_IGN);
	while (waitpid(pager, &status, 0) < 0 && errno == EINTR)
		;
	pager = 0;
}
