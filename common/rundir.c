/*
 * rundir: see rundir.h.
 */
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fdown.h"

/* Every file a recording makes (sql/recording.c: a database per recorded
 * schema, with its WAL): what a run's size counts and what removing a
 * run deletes. */
const char *const rundir_files[] = {
	"python.db",	  "python.db-wal",  "python.db-shm", "process.db",
	"process.db-wal", "process.db-shm", "profile.db",    "profile.db-wal",
	"profile.db-shm", "gpu.db",	    "gpu.db-wal",    "gpu.db-shm",
	"app.db",	  "app.db-wal",	    "app.db-shm",    "run.json",
	"run.json.tmp",	  "end.json",	    "end.json.tmp",
};
const size_t rundir_nfiles = sizeof(rundir_files) / sizeof(rundir_files[0]);

int rundir_root(const char *setting, char *out, size_t outlen)
{
	const char *base;
	int n;

	if (setting && !strcmp(setting, "off"))
		return -ENOENT;
	if (setting && *setting && strcmp(setting, "auto")) {
		if (setting[0] != '/')
			return -EINVAL;
		n = snprintf(out, outlen, "%s", setting);
	} else if ((base = getenv("XDG_STATE_HOME")) && base[0] == '/') {
		n = snprintf(out, outlen, "%s/probing", base);
	} else if ((base = getenv("HOME")) && base[0] == '/') {
		n = snprintf(out, outlen, "%s/.local/state/probing",
			     strcmp(base, "/") ? base : "");
	} else {
		return -EINVAL;
	}
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	/* No trailing slashes: names are joined with one. */
	while (n > 1 && out[n - 1] == '/')
		out[--n] = 0;
	return 0;
}

/* The system's boot time, seconds since the epoch. */
static int boot_time(double *out)
{
	char line[256];
	/* (The agent's recording thread reads it: owned descriptors, as
	 * every read here, fdown.h.) */
	FILE *f = fdown_fopen("/proc/stat");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "btime ", 6)) {
			*out = strtod(line + 6, NULL);
			rc = 0;
			break;
		}
	fclose(f);
	return rc;
}

int rundir_proc_start(int pid, double *epoch)
{
	char path[64], buf[1024], *p;
	unsigned long long ticks = 0;
	double boot = 0;
	long hz = sysconf(_SC_CLK_TCK);
	size_t n;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fdown_fopen(path);
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* After the command's closing parenthesis: state is field 3,
	 * starttime field 22. */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	p++;
	for (int field = 3; field <= 22 && p; field++) {
		while (*p == ' ')
			p++;
		if (field == 22) {
			ticks = strtoull(p, NULL, 10);
			break;
		}
		p = strchr(p, ' ');
	}
	if (!p || hz <= 0)
		return -EIO;
	if ((rc = boot_time(&boot)))
		return rc;
	*epoch = boot + (double)ticks / (double)hz;
	return 0;
}

int rundir_name(char *out, size_t outlen, const char *host, int pid,
		double start)
{
	char h[64], when[32];
	time_t t = (time_t)floor(start);
	struct tm tm;
	size_t i;
	int n;

	for (i = 0; host[i] && i + 1 < sizeof(h); i++) {
		unsigned char c = (unsigned char)host[i];

		h[i] = c == '/' || c <= ' ' || c >= 0x7f ? '_' : (char)c;
	}
	h[i] = 0;
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm);
	n = snprintf(out, outlen, "%s-%d-%s", h[0] ? h : "_", pid, when);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int rundir_parse_name(const char *name, int *pid, double *start)
{
	char stamp[32];
	const char *dash = strrchr(name, '-'), *p;
	struct tm tm;

	if (!dash || dash == name)
		return -1;
	snprintf(stamp, sizeof(stamp), "%.15s", dash + 1);
	memset(&tm, 0, sizeof(tm));
	p = strptime(stamp, "%Y%m%dT%H%M%S", &tm);
	if (!p || *p || strlen(dash + 1) != 15)
		return -1;
	for (p = dash - 1; p > name && *p >= '0' && *p <= '9'; p--)
		;
	if (*p != '-' || p == name || p + 1 == dash)
		return -1; /* no pid, or no host before it */
	*pid = atoi(p + 1);
	*start = (double)timegm(&tm);
	return 0;
}

void rundir_job_name(char *out, size_t outlen, const char *id)
{
	size_t n = (size_t)snprintf(out, outlen, "job-");

	for (; *id && n + 1 < outlen; id++) {
		char c = *id;

		out[n++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					   (c >= '0' && c <= '9') || c == '.' ||
					   c == '_' || c == '-'
				   ? c
				   : '_';
	}
	if (n < outlen)
		out[n] = 0;
}

int rundir_alive(int pid, double start)
{
	double now;

	if (pid <= 0 || rundir_proc_start(pid, &now))
		return 0;
	/* /proc's clock ticks against a start kept to the second. */
	return fabs(now - start) < 1.5;
}

/* What getdents64 gives (its header, then the name). */
struct dirent64 {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/*
 * The directory is read through a descriptor of the agent's own (fdown.h)
 * with getdents64, not opendir: the walk of a large data directory may
 * take a while, and a program that closes every descriptor meanwhile and
 * opens its own at the same number must have neither read nor closed by
 * the walk (closedir closes whatever the number holds).
 */
static void walk(const char *dir, int depth,
		 void (*fn)(const char *path, const char *name, void *arg),
		 void *arg, int rmdir_jobs)
{
	union {
		char b[8192];
		uint64_t align;
	} buf;
	struct fdown d;
	long n;

	if (fdown_open_take(&d, dir, O_RDONLY | O_DIRECTORY, 0))
		return;
	while (fdown_ours(&d) &&
	       (n = syscall(SYS_getdents64, d.fd, buf.b, sizeof(buf.b))) > 0) {
		for (long at = 0; at < n;) {
			struct dirent64 *e = (struct dirent64 *)(buf.b + at);
			char path[RUNDIR_PATH_MAX];

			if (e->reclen == 0 || at + e->reclen > n)
				break;
			at += e->reclen;
			if (e->name[0] == '.' ||
			    (size_t)snprintf(path, sizeof(path), "%s/%s", dir,
					     e->name) >= sizeof(path))
				continue;
			if (depth == 0 && !strncmp(e->name, "job-", 4)) {
				walk(path, 1, fn, arg, rmdir_jobs);
				if (rmdir_jobs)
					rmdir(path); /* fails unless empty */
				continue;
			}
			fn(path, e->name, arg);
		}
	}
	fdown_close(&d);
}

void rundir_walk(const char *root,
		 void (*fn)(const char *path, const char *name, void *arg),
		 void *arg, int rmdir_jobs)
{
	walk(root, 0, fn, arg, rmdir_jobs);
}
