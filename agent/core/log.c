/*
 * log: see log.h.
 *
 * State: `orig` (the identity of the file descriptor 2 held at load) is
 * written once, under pthread_once, before any message is written; read
 * without a lock afterwards.  No copy of descriptor 2 is kept: a copy
 * would hold the program's stderr open for the life of the process (a
 * daemon that points 2 at /dev/null would keep its caller's pipe open,
 * and the caller waiting for its end would wait for good).  So messages
 * go to descriptor 2 while it still holds the file it held at load, and
 * nowhere once the program closed it or put another file there.
 */
#include "log.h"
#include "env.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static int level = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_orig; /* descriptor 2 was open at start-up */
static dev_t orig_dev;
static ino_t orig_ino;

/* Takes the stderr the process has now as the agent's. */
static void take_stderr(void)
{
	struct stat st;
	int fl;

	if (fstat(STDERR_FILENO, &st) < 0)
		return; /* closed: no stderr at all */
	/* A regular file opened for reading and writing is the program's
	 * data that took the number (the agent injected after the program
	 * closed 2 and opened it), not a stderr: shells, nohup, systemd and
	 * subprocess open a log write-only.  A descriptor open for reading
	 * only cannot be written at all. */
	fl = fcntl(STDERR_FILENO, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY ||
	    (S_ISREG(st.st_mode) && (fl & O_ACCMODE) == O_RDWR))
		return;
	orig_dev = st.st_dev;
	orig_ino = st.st_ino;
	have_orig = 1;
}

/* As early as the library is loaded: before the program can close or
 * reuse descriptor 2 after that.  fstat and fcntl only, as the
 * constructor's rules allow (agent.c). */
__attribute__((constructor)) static void log_constructor(void)
{
	pthread_once(&once, take_stderr);
}

int log_fd(void)
{
	struct stat st;

	if (have_orig && fstat(STDERR_FILENO, &st) == 0 &&
	    st.st_dev == orig_dev && st.st_ino == orig_ino)
		return STDERR_FILENO;
	return -1;
}

static int current_level(void)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	const char *env;

	if (level >= 0)
		return level;
	level = LOG_WARN;
	env = env_get("PROBING_LOG");
	for (int i = 0; env && i < 4; i++)
		if (strcasecmp(env, names[i]) == 0)
			level = i;
	return level;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, fd;

	if ((int)lvl > current_level())
		return;
	pthread_once(&once, take_stderr);
	if ((fd = log_fd()) < 0)
		return; /* no stderr of ours: nowhere to say it */
	n = snprintf(line, sizeof(line), "[probing %d] ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) < 0) {
		/* Nowhere else to say it. */
	}
}
