/*
 * proc: what /proc says about a target process before anything touches
 * it — whether it exists and runs, its threads, why ptrace would be (or
 * was) refused, and how the library's path looks from inside it when it
 * lives in another mount namespace (a container).
 *
 * Everything here only reads /proc, except inject_proc_library, which may
 * copy the library into the target's /tmp (and says so).
 */
#ifndef INJECT_PROC_H
#define INJECT_PROC_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#define INJECT_THREADS_MAX 4096 /* threads considered, at most */

struct inject_proc {
	pid_t pid;
	char state;	 /* R, S, D, T, t, Z, ... of the main thread */
	uid_t uid, euid; /* real and effective uid of the target */
	pid_t tracer;	 /* TracerPid: 0 when not traced */
	char comm[32];
	char exe[PATH_MAX]; /* /proc/PID/exe as the target sees it */
};

/* Reads pid's status and exe.  Returns 0, -ESRCH (no such process or a
 * zombie) or -errno with a message. */
int inject_proc_read(pid_t pid, struct inject_proc *p, char *err,
		     size_t errlen);

/* The state letter of thread tid of pid ('?' when unknown). */
char inject_proc_thread_state(pid_t pid, pid_t tid);

/* Fills tids with pid's threads, pid itself first.  Returns how many
 * (at most max), or -errno. */
int inject_proc_threads(pid_t pid, pid_t *tids, size_t max);

/*
 * Writes into err why ptrace of pid is or was refused and what to do:
 * the uids, our CAP_SYS_PTRACE, kernel.yama.ptrace_scope, an existing
 * tracer, containers.  what says which operation failed ("PTRACE_SEIZE",
 * "opening /proc/PID/mem").
 */
void inject_proc_explain_denied(pid_t pid, const char *what, int error,
				char *err, size_t errlen);

/*
 * Makes the library at path (absolute, in our mount namespace) loadable
 * by pid: writes the path the target should dlopen into target_path.
 *   - same mount namespace: path itself;
 *   - else the same path inside the target's root (/proc/PID/root/path),
 *     when a file is there (note says so);
 *   - else a copy in the target's /tmp, /tmp/probing-<pid>-<random>.so,
 *     written through /proc/PID/root/tmp; its path in our namespace goes
 *     into copied (the caller removes it after dlopen), else copied is "".
 * Returns 0, or -errno with exactly why not in err.
 */
int inject_proc_library(pid_t pid, const char *path, char *target_path,
			size_t target_len, char *copied, size_t copied_len,
			char *note, size_t note_len, char *err, size_t errlen);

#endif
