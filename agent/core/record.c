/*
 * record: the recording on disk.  See record.h.
 */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>

#include "config.h"
#include "env.h"
#include "errbuf.h"
#include "log.h"
#include "recording.h"
#include "rundir.h"
#include "thread.h"

#define FLUSH_ROWS 200000    /* per table per flush; the rest next time */
#define TRIM_EVERY_MS 10000  /* the run's own bounds */
#define PRUNE_EVERY_MS 60000 /* other runs' directories */
#define SUFFIX_MAX 99	     /* an agent started again in one process */
#define MB (1024.0 * 1024.0)
#define RECORD_NICE 10	      /* the thread's nice value */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int running, stop;
	struct store *st;
	struct recording *rec; /* NULL: not recording */
	char root[RUNDIR_PATH_MAX];
	char setting[CONFIG_VALUE_MAX]; /* data.dir the recording is of */
	int live_runs;			/* recordings of running processes */
	uint64_t bytes;			/* this run's files, at the last trim */
	double began;			/* CLOCK_REALTIME s */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int listening; /* the config listener stays across fork */
static const struct recording_feed *feeds[RECORDING_FEEDS_MAX];
static int nfeeds; /* kept across fork and restarts: set once, at init */

/* Read by signal handlers: written before the thread starts. */
static char dir_buf[RUNDIR_PATH_MAX];
static char end_path[RUNDIR_PATH_MAX + 16];
static pid_t run_pid;
static char exc_report[PATH_MAX];
static volatile sig_atomic_t end_written;
static int exit_hook;

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *record_dir(void)
{
	return dir_buf;
}

int record_dir_canon(const char *text, char *canon, size_t canonlen, char *err,
		     size_t errlen)
{
	char root[RUNDIR_PATH_MAX];
	int rc;

	if (!*text)
		text = "auto";
	rc = !strcmp(text, "off") ? 0 : rundir_root(text, root, sizeof(root));
	if (rc == -EINVAL && text[0] != '/' && strcmp(text, "auto"))
		errbuf_set(err, errlen,
			   "data.dir: '%s' is not an absolute path (or auto, "
			   "off)",
			   text);
	else if (rc == -EINVAL)
		errbuf_set(err, errlen,
			   "data.dir: no $HOME or $XDG_STATE_HOME "
			   "to put recordings under: give a path");
	else if (rc)
		errbuf_set(err, errlen, "data.dir: too long");
	if (rc)
		return -EINVAL;
	snprintf(canon, canonlen, "%s", text);
	return 0;
}

/* ---- end.json (async-signal-safe) ---------------------------------------- */

struct abuf {
	char *p;
	size_t cap, n;
};

static void ab_str(struct abuf *b, const char *s)
{
	while (*s && b->n + 1 < b->cap)
		b->p[b->n++] = *s++;
	b->p[b->n] = 0;
}

static void ab_json(struct abuf *b, const char *s)
{
	char one[2] = {0, 0};

	ab_str(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			one[0] = (char)c;
			ab_str(b, "\\");
			ab_str(b, one);
		} else if (c >= 0x20) {
			one[0] = (char)c;
			ab_str(b, one);
		}
	}
	ab_str(b, "\"");
}

static void ab_int(struct abuf *b, long long v)
{
	char d[24];
	int n = 0;
	unsigned long long u =
		v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	if (v < 0)
		ab_str(b, "-");
	do {
		d[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u && n < (int)sizeof(d));
	while (n--) {
		char one[2] = {d[n], 0};

		ab_str(b, one);
	}
}

/* {"end": T, "how": how, "code"|"signal": v, "report": path}. */
static void write_end(const char *how, const char *key, long long v,
		      const char *report)
{
	char text[PATH_MAX + 256], tmp[sizeof(end_path) + 8];
	struct abuf b = {text, sizeof(text), 0}, t = {tmp, sizeof(tmp), 0};
	struct timespec ts;
	int fd;

	if (!end_path[0] || getpid() != run_pid || end_written)
		return;
	end_written = 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	ab_str(&b, "{\"end\": ");
	ab_int(&b, (long long)ts.tv_sec);
	ab_str(&b, ", \"how\": ");
	ab_json(&b, how);
	if (key) {
		ab_str(&b, ", ");
		ab_json(&b, key);
		ab_str(&b, ": ");
		ab_int(&b, v);
	}
	if (report && *report) {
		ab_str(&b, ", \"report\": ");
		ab_json(&b, report);
	}
	ab_str(&b, "}\n");
	ab_str(&t, end_path);
	ab_str(&t, ".tmp");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, text, b.n) == (ssize_t)b.n && close(fd) == 0)
		rename(tmp, end_path);
	else
		close(fd);
}

void record_end_signal(int sig, const char *report)
{
	write_end("signal", "signal", sig, report);
}

void record_end_report(const char *report)
{
	snprintf(exc_report, sizeof(exc_report), "%s", report ? report : "");
}

static void at_exit(int status, void *arg)
{
	(void)arg;
	if (exc_report[0] && status != 0)
		write_end("exception", "code", status, exc_report);
	else
		write_end("exit", "code", status, NULL);
}

/* ---- the directory ------------------------------------------------------- */

/* mkdir -p, the parts made private. */
static int make_dirs(const char *path)
{
	char p[RUNDIR_PATH_MAX];
	size_t n = strlen(path);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, path, n + 1);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* This process's command line, arguments joined by spaces. */
static void command_line(char *out, size_t outlen)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, out, outlen - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(out, outlen, "?");
		return;
	}
	out[n] = 0;
	for (ssize_t i = 0; i < n - 1; i++)
		if (!out[i])
			out[i] = ' ';
}

/* The job this process is a rank of (torchrun's environment): its
 * directory's name, or "" when it is in none. */
static void job_dir(char *out, size_t outlen, const char *host)
{
	const char *run = env_get("TORCHELASTIC_RUN_ID");
	char parent[RUNDIR_PATH_MAX];
	double start;

	out[0] = 0;
	if (!env_get("RANK") || !env_get("WORLD_SIZE"))
		return;
	if (run && *run && strcmp(run, "none")) {
		rundir_job_name(out, outlen, run);
		return;
	}
	/* No run id: the ranks of one host share their launcher. */
	if (rundir_proc_start((int)getppid(), &start) == 0 &&
	    rundir_name(parent, sizeof(parent), host, (int)getppid(), start) ==
		    0)
		rundir_job_name(out, outlen, parent);
}

static int write_run_json(const char *dir, const char *host, double start,
			  const char *job, char *err, size_t errlen)
{
	char path[RUNDIR_PATH_MAX + 16], tmp[RUNDIR_PATH_MAX + 16];
	char cmd[2048];
	const char *v;
	cJSON *o = cJSON_CreateObject();
	char *text = NULL;
	FILE *f;
	int rc = -ENOMEM;

	command_line(cmd, sizeof(cmd));
	if (o) {
		cJSON_AddNumberToObject(o, "version", 1);
		cJSON_AddNumberToObject(o, "pid", (double)getpid());
		cJSON_AddStringToObject(o, "host", host);
		cJSON_AddNumberToObject(o, "start", start);
		cJSON_AddNumberToObject(o, "agent_start", wall_s());
		cJSON_AddStringToObject(o, "command", cmd);
		if (job[0])
			cJSON_AddStringToObject(o, "job", job);
		if ((v = env_get("RANK")))
			cJSON_AddStringToObject(o, "rank", v);
		if ((v = env_get("WORLD_SIZE")))
			cJSON_AddStringToObject(o, "world", v);
		if ((v = env_get("TORCHELASTIC_RUN_ID")))
			cJSON_AddStringToObject(o, "run_id", v);
		text = cJSON_Print(o);
	}
	cJSON_Delete(o);
	snprintf(path, sizeof(path), "%s/run.json", dir);
	snprintf(tmp, sizeof(tmp), "%s/run.json.tmp", dir);
	if (text) {
		f = fopen(tmp, "we");
		rc = f && fputs(text, f) >= 0 ? 0 : -errno;
		if (f && fclose(f) && !rc)
			rc = -errno;
		if (!rc && rename(tmp, path) < 0)
			rc = -errno;
	}
	free(text);
	if (rc)
		errbuf_set(err, errlen, "%s: %s", path, strerror(-rc));
	return rc;
}

/* Makes this process's directory under root; its path in out. */
static int make_run_dir(const char *root, char *out, size_t outlen, char *err,
			size_t errlen)
{
	char host[64] = "?", job[128], name[160], base[RUNDIR_PATH_MAX];
	double start;
	int rc, n;

	if (gethostname(host, sizeof(host)) < 0)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = 0;
	if ((rc = rundir_proc_start((int)getpid(), &start)))
		start = wall_s();
	job_dir(job, sizeof(job), host);
	n = job[0] ? snprintf(base, sizeof(base), "%s/%s", root, job)
		   : snprintf(base, sizeof(base), "%s", root);
	if (n < 0 || (size_t)n >= sizeof(base) ||
	    rundir_name(name, sizeof(name), host, (int)getpid(), start)) {
		errbuf_set(err, errlen, "%s: path too long", root);
		return -ENAMETOOLONG;
	}
	if ((rc = make_dirs(base))) {
		errbuf_set(err, errlen, "%s: %s", base, strerror(-rc));
		return rc;
	}
	/* An agent started again in the same process: a recording of its
	 * own, name.2, name.3, ... */
	for (int k = 1; k <= SUFFIX_MAX; k++) {
		n = k == 1 ? snprintf(out, outlen, "%s/%s", base, name)
			   : snprintf(out, outlen, "%s/%s.%d", base, name, k);
		if (n < 0 || (size_t)n + 32 >= outlen) {
			errbuf_set(err, errlen, "%s: path too long", base);
			return -ENAMETOOLONG;
		}
		if (mkdir(out, 0700) == 0)
			return write_run_json(out, host, start, job, err,
					      errlen);
		if (errno != EEXIST) {
			rc = -errno;
			errbuf_set(err, errlen, "%s: %s", out, strerror(errno));
			return rc;
		}
	}
	errbuf_set(err, errlen, "%s: too many recordings of this process",
		   base);
	return -EEXIST;
}

/* ---- other runs -----------------------------------------------------------
 */

struct old_run {
	char path[RUNDIR_PATH_MAX];
	double mtime;
	uint64_t bytes;
};

/* The files of one run: bytes and newest mtime.  -1: not a run. */
static int run_size(const char *dir, uint64_t *bytes, double *mtime)
{
	char path[RUNDIR_PATH_MAX + 32];
	struct stat sb;
	int any = 0;

	*bytes = 0;
	*mtime = 0;
	for (size_t i = 0; i < rundir_nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, rundir_files[i]);
		if (lstat(path, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue;
		any |= !strcmp(rundir_files[i], "run.json");
		*bytes += (uint64_t)sb.st_size;
		if ((double)sb.st_mtime > *mtime)
			*mtime = (double)sb.st_mtime;
	}
	return any ? 0 : -1;
}

/* Deletes a run's files (those a recording has, and no other) and the
 * directory when that leaves it empty: 0 when it did. */
static int remove_files(const char *dir)
{
	char path[RUNDIR_PATH_MAX + 32];

	for (size_t i = 0; i < rundir_nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, rundir_files[i]);
		unlink(path);
	}
	return rmdir(dir);
}

static void remove_run(const char *dir)
{
	if (remove_files(dir) == 0)
		log_info("recording %s removed (retention)", dir);
}

struct scan {
	struct old_run *list;
	size_t n, cap;
	uint64_t total;
};

/* One entry of the data directory: counted when live, else listed. */
static void scan_one(const char *path, const char *name, void *arg)
{
	struct scan *sc = arg;
	uint64_t bytes;
	double mtime, start;
	int pid;

	if (run_size(path, &bytes, &mtime))
		return;
	sc->total += bytes;
	if (rundir_parse_name(name, &pid, &start) == 0 &&
	    rundir_alive(pid, start)) {
		R.live_runs++;
		return;
	}
	if (sc->n == sc->cap) {
		size_t c = sc->cap ? sc->cap * 2 : 32;
		struct old_run *l = realloc(sc->list, c * sizeof(*l));

		if (!l)
			return;
		sc->list = l;
		sc->cap = c;
	}
	snprintf(sc->list[sc->n].path, sizeof(sc->list[sc->n].path), "%s",
		 path);
	sc->list[sc->n].mtime = mtime;
	sc->list[sc->n].bytes = bytes;
	sc->n++;
}

static int by_mtime(const void *a, const void *b)
{
	double x = ((const struct old_run *)a)->mtime;
	double y = ((const struct old_run *)b)->mtime;

	return x < y ? -1 : x > y;
}

/* The recordings of processes that are gone: older than retention.days,
 * or, oldest first, while all of them together are over
 * retention.max_mb. */
static void prune(void)
{
	struct scan sc = {0};
	double days = (double)config_int("retention.days");
	double max = (double)config_int("retention.max_mb") * MB;
	double now = wall_s();

	R.live_runs = 0;
	rundir_walk(R.root, scan_one, &sc, 1);
	if (sc.n)
		qsort(sc.list, sc.n, sizeof(*sc.list), by_mtime);
	for (size_t i = 0; i < sc.n; i++) {
		int old = days > 0 && now - sc.list[i].mtime > days * 86400;
		int over = max > 0 && (double)sc.total > max;

		if (!old && !over)
			continue;
		remove_run(sc.list[i].path);
		sc.total -= sc.list[i].bytes;
	}
	free(sc.list);
}

/* ---- the thread ------------------------------------------------------------
 */

static void set_status(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void set_status(const char *fmt, ...)
{
	char text[CONFIG_VALUE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	config_set_info("data.status", text);
}

static void show_status(void)
{
	struct recording_stats s;

	recording_stats(R.rec, &s);
	set_status("recording to %s: %d tables, %.1f MB, %llu rows written, "
		   "last flush %.1f ms",
		   dir_buf, s.tables, (double)R.bytes / MB,
		   (unsigned long long)s.rows, s.last_ms);
}

/*
 * Stops writing after an error: the store goes on in memory.  With
 * give_back (the disk is full, or the headroom reached) the recording's
 * files go too, so that the space is the program's again; nothing of
 * ours names the directory any more (crash reports, end.json).
 */
static void give_up(const char *why, int give_back)
{
	char dir[RUNDIR_PATH_MAX];

	recording_close(R.rec);
	R.rec = NULL;
	snprintf(dir, sizeof(dir), "%s", dir_buf);
	if (give_back) {
		end_path[0] = 0;
		dir_buf[0] = 0;
		remove_files(dir);
	}
	log_warn("recording to %s stopped: %s; %srecorded tables stay in "
		 "memory only",
		 dir, why,
		 give_back ? "its files are removed (the space is given back); "
			   : "");
	/* Short things first: the status is cut at CONFIG_VALUE_MAX. */
	set_status("memory only%s: recording to %s stopped: %s",
		   give_back ? " (its files removed)" : "", dir, why);
}

/*
 * The headroom (record.h): the larger of data.min_free_mb and
 * data.min_free_pct of the file system dir is on, in *need; what is
 * free there for an unprivileged writer in *avail.  0 or -errno.
 */
static int headroom(const char *dir, uint64_t *need, uint64_t *avail)
{
	uint64_t mb = (uint64_t)config_int("data.min_free_mb") << 20;
	uint64_t pct = (uint64_t)config_int("data.min_free_pct");
	uint64_t size, share;
	struct statvfs v;

	if (statvfs(dir, &v) < 0)
		return -errno;
	size = (uint64_t)v.f_blocks * v.f_frsize;
	share = size / 100 * pct;
	*need = mb > share ? mb : share;
	*avail = (uint64_t)v.f_bavail * v.f_frsize;
	return 0;
}

/* n bytes as "12 KB" or "3.4 MB". */
static void size_text(char *out, size_t len, uint64_t n)
{
	if (n < (10u << 20))
		snprintf(out, len, "%llu KB", (unsigned long long)(n >> 10));
	else
		snprintf(out, len, "%.1f MB", (double)n / MB);
}

/* "database or disk is full" with the headroom's numbers, in why. */
static void full_why(char *why, size_t len, const char *what, uint64_t need,
		     uint64_t avail)
{
	char a[32], n[32];

	size_text(a, sizeof(a), avail);
	size_text(n, sizeof(n), need);
	snprintf(why, len,
		 "%s (%s free, %s kept free for the program: "
		 "data.min_free_mb, data.min_free_pct)",
		 what, a, n);
}

/* Opens the recording data.dir names (when it is not off). */
static void begin(void)
{
	char setting[CONFIG_VALUE_MAX], err[512], dir[RUNDIR_PATH_MAX];
	int rc;

	config_get("data.dir", setting, sizeof(setting));
	snprintf(R.setting, sizeof(R.setting), "%s", setting);
	rc = rundir_root(setting, R.root, sizeof(R.root));
	if (rc)
		R.root[0] = 0; /* nothing to prune either */
	if (rc == -ENOENT) {
		set_status("off (data.dir=off): recorded tables stay in "
			   "memory only");
		return;
	}
	if (rc == 0)
		rc = make_run_dir(R.root, dir, sizeof(dir), err, sizeof(err));
	else
		errbuf_set(err, sizeof(err), "data.dir '%s': %s", setting,
			   strerror(-rc));
	if (rc == 0)
		rc = recording_open(R.st, dir, &R.rec, err, sizeof(err));
	if (rc) {
		log_warn("not recording to disk: %s; recorded tables stay in "
			 "memory only",
			 err);
		set_status("memory only: %s", err);
		return;
	}
	for (int i = 0; i < nfeeds; i++)
		recording_add_feed(R.rec, feeds[i]);
	snprintf(dir_buf, sizeof(dir_buf), "%s", dir);
	snprintf(end_path, sizeof(end_path), "%s/end.json", dir);
	run_pid = getpid();
	end_written = 0;
	R.bytes = 0;
	R.began = wall_s();
	if (!exit_hook)
		exit_hook = on_exit(at_exit, NULL) == 0;
	log_info("recording to %s", dir);
	set_status("recording to %s", dir);
}

/* The recording's files are closed; its directory stays the process's
 * (crash reports and end.json name it) until another begins. */
static void end(void)
{
	recording_close(R.rec);
	R.rec = NULL;
}

/* Sets the headroom for the next flush or trim: 0, or -ENOSPC (with
 * why) when there is none left: the files must not grow at all. */
static int check_room(char *why, size_t whylen)
{
	uint64_t need = 0, avail = 0;

	if (headroom(dir_buf, &need, &avail))
		return 0; /* the write will say what is wrong */
	recording_set_min_free(R.rec, need);
	if (need && avail < need) {
		full_why(why, whylen, "database or disk is full", need, avail);
		return -ENOSPC;
	}
	return 0;
}

static void flush(void)
{
	char err[512], why[768];
	uint64_t need = 0, avail = 0;
	int rc;

	if (!R.rec)
		return;
	if (check_room(why, sizeof(why))) {
		give_up(why, 1);
		return;
	}
	rc = recording_flush(R.rec, FLUSH_ROWS, err, sizeof(err));
	/* A reader holds a file: nothing lost, the next flush copies it. */
	if (rc == -ENOSPC && headroom(dir_buf, &need, &avail) == 0) {
		full_why(why, sizeof(why), err, need, avail);
		give_up(why, 1);
	} else if (rc && rc != -EBUSY) {
		give_up(err, rc == -ENOSPC);
	}
}

static void trim(void)
{
	char err[512];
	double days = (double)config_int("retention.days");
	double max = (double)config_int("retention.max_mb") * MB;
	uint64_t share;
	int rc;

	if (!R.rec)
		return;
	if (check_room(err, sizeof(err))) {
		give_up(err, 1);
		return;
	}
	/* The processes recording at once share retention.max_mb. */
	share = max > 0 ? (uint64_t)(max / (R.live_runs > 1 ? R.live_runs : 1))
			: 0;
	rc = recording_trim(R.rec, days > 0 ? wall_s() - days * 86400 : 0,
			    share, &R.bytes, err, sizeof(err));
	if (rc)
		give_up(err, rc == -ENOSPC);
	else
		show_status();
}

static void *record_main(void *arg)
{
	int64_t next_trim = agent_now_ms() + TRIM_EVERY_MS, next_prune = 0;
	char setting[CONFIG_VALUE_MAX];

	(void)arg;
	/* Background work: the program's threads come first when they
	 * want a CPU this thread has (nice applies per thread on Linux). */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), RECORD_NICE);
	pthread_mutex_lock(&R.lock);
	while (!R.stop) {
		struct timespec dl;

		agent_deadline(&dl, CLOCK_MONOTONIC,
			       config_int("data.flush_ms"));
		pthread_cond_timedwait(&R.cond, &R.lock, &dl);
		if (R.stop)
			break;
		pthread_mutex_unlock(&R.lock);
		/* data.dir changed: this recording ends, the new one
		 * begins. */
		config_get("data.dir", setting, sizeof(setting));
		if (strcmp(setting, R.setting)) {
			if (R.rec) {
				flush();
				end();
			}
			begin();
			next_prune = 0;
		}
		flush();
		if (agent_now_ms() >= next_prune) {
			if (R.root[0] && R.setting[0] &&
			    strcmp(R.setting, "off"))
				prune();
			next_prune = agent_now_ms() + PRUNE_EVERY_MS;
		}
		if (agent_now_ms() >= next_trim) {
			trim();
			next_trim = agent_now_ms() + TRIM_EVERY_MS;
		}
		pthread_mutex_lock(&R.lock);
	}
	pthread_mutex_unlock(&R.lock);
	flush();
	return NULL;
}

static void on_change(const char *name)
{
	(void)name;
	pthread_mutex_lock(&R.lock);
	pthread_cond_signal(&R.cond);
	pthread_mutex_unlock(&R.lock);
}

int record_add_feed(const struct recording_feed *f)
{
	for (int i = 0; i < nfeeds; i++)
		if (feeds[i] == f)
			return 0;
	if (nfeeds >= RECORDING_FEEDS_MAX)
		return -ENOSPC;
	feeds[nfeeds++] = f;
	return 0;
}

int record_start(struct store *st, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int rc;

	if (R.running)
		return 0;
	R.st = st;
	R.stop = 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&R.cond, &ca);
	pthread_condattr_destroy(&ca);
	begin();
	if (!listening && config_on_change("data.", on_change) == 0)
		listening = 1;
	rc = agent_thread_start(&R.thread, "probing-record", record_main, NULL);
	if (rc) {
		errbuf_set(err, errlen, "record: pthread_create: %s",
			   strerror(-rc));
		end();
		return rc;
	}
	R.running = 1;
	return 0;
}

void record_stop(void)
{
	if (!R.running)
		return;
	pthread_mutex_lock(&R.lock);
	R.stop = 1;
	pthread_cond_signal(&R.cond);
	pthread_mutex_unlock(&R.lock);
	/* Its last flush is bounded by the disk; a late thread is left to
	 * end on its own, with the recording. */
	if (agent_thread_join(R.thread, 5000) == 0)
		end();
	R.running = 0;
}

void record_atfork_child(void)
{
	pthread_mutex_init(&R.lock, NULL);
	R.running = 0;
	R.stop = 0;
	R.rec = NULL; /* the parent's: its hook is on the parent's store */
	dir_buf[0] = 0;
	end_path[0] = 0;
	exc_report[0] = 0;
}
