/*
 * proc: facts from /proc about a target; see proc.h.
 */
#include "proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CAP_SYS_PTRACE_BIT 19
#define COPY_CHUNK 65536

/* Reads a small /proc file into buf (NUL-terminated).  Returns the length
 * or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* The value after "key:" in a status text, or NULL. */
static const char *field(const char *status, const char *key)
{
	size_t len = strlen(key);

	for (const char *p = status; p && *p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (!strncmp(p, key, len) && p[len] == ':')
			return p + len + 1;
	}
	return NULL;
}

int inject_proc_read(pid_t pid, struct inject_proc *p, char *err, size_t errlen)
{
	char path[64], status[4096];
	const char *v;
	ssize_t n;

	memset(p, 0, sizeof(*p));
	p->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = read_small(path, status, sizeof(status));
	if (n < 0) {
		snprintf(err, errlen, "no such process: %d", (int)pid);
		return n == -ENOENT ? -ESRCH : (int)n;
	}
	if ((v = field(status, "Name")))
		sscanf(v, " %31[^\n]", p->comm);
	if ((v = field(status, "State")))
		sscanf(v, " %c", &p->state);
	if ((v = field(status, "Uid"))) {
		unsigned r, e;
		if (sscanf(v, "%u %u", &r, &e) == 2) {
			p->uid = r;
			p->euid = e;
		}
	}
	if ((v = field(status, "TracerPid")))
		p->tracer = atoi(v);
	if (p->state == 'Z' || p->state == 'X') {
		snprintf(err, errlen, "process %d has exited (a zombie)",
			 (int)pid);
		return -ESRCH;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, p->exe, sizeof(p->exe) - 1);
	p->exe[n > 0 ? n : 0] = '\0';
	return 0;
}

char inject_proc_thread_state(pid_t pid, pid_t tid)
{
	char path[96], buf[1024], *close_paren;
	char state = '?';

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid,
		 (int)tid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return '?';
	/* "tid (comm) S ...": comm may hold spaces and parentheses. */
	close_paren = strrchr(buf, ')');
	if (close_paren && close_paren[1] == ' ')
		state = close_paren[2];
	return state;
}

int inject_proc_threads(pid_t pid, pid_t *tids, size_t max)
{
	char path[64];
	struct dirent *d;
	size_t n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	if (max > 0)
		tids[n++] = pid;
	while (n < max && (d = readdir(dir))) {
		long tid = strtol(d->d_name, NULL, 10);

		if (tid > 0 && tid != pid)
			tids[n++] = (pid_t)tid;
	}
	closedir(dir);
	return (int)n;
}

/* Whether we hold CAP_SYS_PTRACE (effective). */
static int have_ptrace_cap(void)
{
	char status[4096];
	const char *v;
	unsigned long long caps;

	if (read_small("/proc/self/status", status, sizeof(status)) <= 0)
		return 0;
	v = field(status, "CapEff");
	return v && sscanf(v, " %llx", &caps) == 1 &&
	       (caps >> CAP_SYS_PTRACE_BIT) & 1;
}

static size_t add(char *err, size_t errlen, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static size_t add(char *err, size_t errlen, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (at >= errlen)
		return at;
	va_start(ap, fmt);
	n = vsnprintf(err + at, errlen - at, fmt, ap);
	va_end(ap);
	return n > 0 ? at + (size_t)n : at;
}

void inject_proc_explain_denied(pid_t pid, const char *what, int error,
				char *err, size_t errlen)
{
	struct inject_proc p;
	char why[128], buf[16];
	int cap = have_ptrace_cap(), scope = -1;
	uid_t me = geteuid();
	size_t at = 0;

	if (read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf)) >
	    0)
		scope = atoi(buf);
	at = add(err, errlen, at,
		 "not allowed to attach to process %d (%s: "
		 "%s)",
		 (int)pid, what, strerror(error));
	if (inject_proc_read(pid, &p, why, sizeof(why)) == 0) {
		if (p.tracer)
			at = add(err, errlen, at,
				 "; it is already traced by process %d (a "
				 "debugger?): only one tracer at a time, "
				 "detach that one first",
				 (int)p.tracer);
		if (p.uid != me && !cap)
			at = add(err, errlen, at,
				 "; it runs as uid %u and you are uid %u "
				 "without CAP_SYS_PTRACE: run as that user, "
				 "or as root (sudo)",
				 (unsigned)p.uid, (unsigned)me);
	}
	if (scope == 1 && !cap)
		at = add(err, errlen, at,
			 "; kernel.yama.ptrace_scope is 1 (only a parent may "
			 "attach): run with sudo, give the CLI CAP_SYS_PTRACE "
			 "(setcap cap_sys_ptrace+ep), or set it to 0 with "
			 "`sysctl kernel.yama.ptrace_scope=0`");
	else if (scope == 2 && !cap)
		at = add(err, errlen, at,
			 "; kernel.yama.ptrace_scope is 2 (admin only): needs "
			 "CAP_SYS_PTRACE (sudo)");
	else if (scope == 3)
		at = add(err, errlen, at,
			 "; kernel.yama.ptrace_scope is 3: ptrace is off "
			 "until reboot");
	if (cap && scope < 3 && me == 0)
		at = add(err, errlen, at,
			 "; you have CAP_SYS_PTRACE, so a seccomp profile or "
			 "an LSM (AppArmor, SELinux) is refusing it, or the "
			 "process is in a user namespace you do not own");
	else if (!cap)
		at = add(err, errlen, at,
			 "; in a container, add CAP_SYS_PTRACE (docker run "
			 "--cap-add=SYS_PTRACE; Kubernetes: securityContext."
			 "capabilities.add [SYS_PTRACE]) — see "
			 "docs/injection.md");
	(void)at;
}

/* The inode of a namespace link, or 0. */
static ino_t ns_inode(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Copies src to a new file dst (O_EXCL), mode 0755. */
static int copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
	char *buf = malloc(COPY_CHUNK);
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = 0;
	ssize_t n;

	if (!buf || in < 0) {
		rc = buf ? -errno : -ENOMEM;
		snprintf(err, errlen, "cannot read %s: %s", src, strerror(-rc));
		goto done;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (out < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create %s: %s", dst,
			 strerror(-rc));
		goto done;
	}
	while ((n = read(in, buf, COPY_CHUNK)) > 0) {
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0) {
				rc = -errno;
				snprintf(err, errlen, "cannot write %s: %s",
					 dst, strerror(-rc));
				goto done;
			}
			off += w;
		}
	}
	if (n < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot read %s: %s", src, strerror(-rc));
	}
	/* The umask must not take away the exec bit: best effort. */
	if (rc == 0)
		(void)fchmod(out, 0755);
done:
	if (out >= 0 && close(out) < 0 && rc == 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot write %s: %s", dst,
			 strerror(-rc));
	}
	if (out >= 0 && rc)
		unlink(dst);
	if (in >= 0)
		close(in);
	free(buf);
	return rc;
}

int inject_proc_library(pid_t pid, const char *path, char *target_path,
			size_t target_len, char *copied, size_t copied_len,
			char *note, size_t note_len, char *err, size_t errlen)
{
	char mine[64], theirs[64], inside[PATH_MAX + 64], tmp[96];
	struct stat st;
	struct timespec ts;
	int rc;

	copied[0] = '\0';
	note[0] = '\0';
	snprintf(mine, sizeof(mine), "/proc/self/ns/mnt");
	snprintf(theirs, sizeof(theirs), "/proc/%d/ns/mnt", (int)pid);
	if (ns_inode(mine) == ns_inode(theirs) || !ns_inode(theirs)) {
		/* Same namespace (or we cannot tell: then the plain path is
		 * the best guess, and dlerror will say if it is wrong). */
		snprintf(target_path, target_len, "%s", path);
		return 0;
	}
	snprintf(inside, sizeof(inside), "/proc/%d/root%s", (int)pid, path);
	if (stat(inside, &st) == 0 && S_ISREG(st.st_mode)) {
		snprintf(target_path, target_len, "%s", path);
		snprintf(note, note_len,
			 "the process is in another mount namespace; using "
			 "%s as it sees it",
			 path);
		return 0;
	}
	/* Copy it into the target's /tmp. */
	snprintf(tmp, sizeof(tmp), "/proc/%d/root/tmp", (int)pid);
	rc = stat(tmp, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (rc) {
		snprintf(err, errlen,
			 "process %d is in another mount namespace (a "
			 "container) where %s does not exist, and its /tmp "
			 "(%s) cannot be used to copy the library in: %s; "
			 "install Probing inside the container, or mount "
			 "the library there",
			 (int)pid, path, tmp, strerror(-rc));
		return rc;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(target_path, target_len, "/tmp/probing-%d-%lx%lx.so",
		 (int)getpid(), (unsigned long)ts.tv_sec,
		 (unsigned long)ts.tv_nsec);
	snprintf(copied, copied_len, "/proc/%d/root%s", (int)pid, target_path);
	rc = copy_file(path, copied, err, errlen);
	if (rc) {
		char why[512];
		snprintf(why, sizeof(why), "%s", err);
		snprintf(err, errlen,
			 "process %d is in another mount namespace (a "
			 "container) where %s does not exist, and copying it "
			 "into its /tmp failed: %s",
			 (int)pid, path, why);
		copied[0] = '\0';
		return rc;
	}
	snprintf(note, note_len,
		 "the process is in another mount namespace; copied the "
		 "library to its %s (removed after loading)",
		 target_path);
	return 0;
}
