/*
 * target: see target.h.
 */
#include "target.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd.h"
#include "dap_frame.h"
#include "dap_token.h"
#include "inject.h"
#include "proc.h"

static const char *given_token; /* --token or PROBING_TOKEN */

static int proc_exists(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) == 0;
}

int cli_target_cmdline(pid_t pid, char *out, size_t outlen, size_t max)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;

	if (outlen < 2)
		return -EINVAL;
	strcpy(out, "?");
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	buf[n] = '\0';
	if (n == 0) {
		/* A kernel thread or a zombie: the short name. */
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n < 0)
			return -errno;
		while (n > 0 && buf[n - 1] == '\n')
			n--;
		buf[n] = '\0';
		if (n > 0 && (size_t)n + 2 < sizeof(buf)) {
			memmove(buf + 1, buf, (size_t)n);
			buf[0] = '[';
			buf[n + 1] = ']';
			buf[n + 2] = '\0';
		}
	}
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	if (max > outlen - 1)
		max = outlen - 1;
	if (max < sizeof(buf) && strlen(buf) > max) {
		/* Cut at a UTF-8 boundary. */
		size_t cut = max > 3 ? max - 3 : 0;
		while (cut > 0 && ((unsigned char)buf[cut] & 0xC0) == 0x80)
			cut--;
		memcpy(buf + cut, "...", 4);
		buf[max] = '\0';
	}
	memcpy(out, buf, strlen(buf) + 1);
	return 0;
}

int cli_target_resolve(const char *text, struct dap_addr *addr, char *err,
		       size_t errlen)
{
	char why[256] = "";

	if (!text || !*text) {
		snprintf(err, errlen, "empty target");
		return CLI_EUSAGE;
	}
	if (dap_addr_parse(text, addr, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "bad target '%s': %s", text,
			 why[0] ? why
				: "give a pid, HOST:PORT, @name or a socket "
				  "path");
		return CLI_EUSAGE;
	}
	if (addr->pid > 0 && !proc_exists(addr->pid)) {
		snprintf(err, errlen, "no such process: %d", (int)addr->pid);
		return CLI_ENOPROC;
	}
	return CLI_OK;
}

/* The process whose thread tid is (its Tgid), or 0 when unknown. */
static pid_t process_of(pid_t tid)
{
	char path[64], line[128];
	FILE *f;
	long tgid = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %ld", &tgid) == 1)
			break;
	fclose(f);
	return (pid_t)tgid;
}

/* The environment a process started with (its first 64 KiB), read
 * once for the questions below. */
struct proc_env {
	char buf[65536];
	size_t n; /* 0: none read */
};

static void read_environ(pid_t pid, struct proc_env *e)
{
	ssize_t n = cli_proc_environ(pid, e->buf, sizeof(e->buf));

	e->n = n > 0 ? (size_t)n : 0;
}

/* Did the process ask for an agent (environment e), by the rule
 * probing.pth applies: PROBING (else PROBE) set to a value that is not
 * off, or neither set and PROBING_PORT set?  The variable as
 * "NAME=value" into out. */
static int asked_for_agent(const struct proc_env *e, char *out,
			   size_t outlen)
{
	static const char *const off[] = {"", "0", "off", "false", "no"};
	const char *name = "PROBING", *v, *port;

	v = cli_env_value(e->buf, e->n, "PROBING=");
	if (!v || !*v) {
		name = "PROBE";
		v = cli_env_value(e->buf, e->n, "PROBE=");
	}
	port = cli_env_value(e->buf, e->n, "PROBING_PORT=");
	if ((!v || !*v) && port && *port) {
		snprintf(out, outlen, "PROBING_PORT=%.32s", port);
		return 1;
	}
	if (!v)
		return 0;
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		if (!strcasecmp(v, off[i]))
			return 0;
	snprintf(out, outlen, "%s=%.64s", name, v);
	return 1;
}

#define ENV_VARS_MAX 512

/* Does the program of process pid (its /proc/PID/exe) find a probing
 * package, with the environment it started with (e: PYTHONPATH,
 * PYTHONUSERBASE, a virtualenv's), less what starts an agent?  1 yes, 0
 * no, 2 found but nothing starts it (no probing.pth where site reads
 * one), -1 not known; its path into exe.  Only found, not imported: the
 * agent's module may need what the process has and the question does not
 * (an ASan build's runtime, preloaded).  Runs it for 5 s at most. */
static int finds_probing(pid_t pid, struct proc_env *e, char *exe,
			   size_t exelen)
{
	static const char *const keep[] = {
		"PATH=",	    "HOME=",	     "PYTHONPATH=", "PYTHONHOME=",
		"PYTHONUSERBASE=", "PYTHONNOUSERSITE=", "VIRTUAL_ENV=",
	};
	static char argv0[4096];
	char path[64], *envp[ENV_VARS_MAX + 1], ns[2][64];
	struct stat st;
	size_t ne = 0;
	ssize_t n;
	pid_t child;
	int status, waited = 0, fd;

	/* Only a process of our own user: its environment (PYTHONPATH, a
	 * sitecustomize) runs code, which must never run as another user
	 * (root asking about a user's process). */
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) < 0 || st.st_uid != geteuid() ||
	    getuid() != geteuid())
		return -1;
	/* Its files are the ones we see only in our mount namespace. */
	memset(ns, 0, sizeof(ns));
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	if (readlink(path, ns[0], sizeof(ns[0]) - 1) <= 0 ||
	    readlink("/proc/self/ns/mnt", ns[1], sizeof(ns[1]) - 1) <= 0 ||
	    strncmp(ns[0], ns[1], sizeof(ns[0])))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, exelen - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	/* Only what decides where Python looks for packages: nothing that
	 * runs code of its own (LD_PRELOAD, PYTHONSTARTUP) or starts an
	 * agent (PROBING...). */
	for (char *v = e->buf; v < e->buf + e->n && ne < ENV_VARS_MAX;
	     v += strlen(v) + 1)
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			if (!strncmp(v, keep[i], strlen(keep[i]))) {
				envp[ne++] = v;
				break;
			}
	envp[ne] = NULL;
	/* The program as it was started (a virtualenv's python is a link
	 * whose own path makes it the venv's), when argv[0] is that file. */
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, argv0, sizeof(argv0) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		struct stat a, b;

		argv0[n] = '\0';
		if (argv0[0] == '/' && strlen(argv0) < exelen &&
		    stat(argv0, &a) == 0 && stat(exe, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			memcpy(exe, argv0, strlen(argv0) + 1);
	}
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		/* 3: no package; 4: a package but no probing.pth in a
		 * site directory, the line that starts it (PYTHONPATH
		 * reads no .pth files). */
		char *argv[] = {
			exe, "-c",
			"import importlib.util as u, os, site, sys\n"
			"u.find_spec('probing') or sys.exit(3)\n"
			"d = list(getattr(site, 'getsitepackages', list)())\n"
			"site.ENABLE_USER_SITE and "
			"d.append(site.getusersitepackages())\n"
			"sys.exit(0 if any(os.path.isfile(os.path.join("
			"x, 'probing.pth')) for x in d) else 4)",
			NULL};
		int null = open("/dev/null", O_RDWR);

		/* Not our directory on sys.path. */
		if (chdir("/") < 0)
			_exit(127);

		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		execve(exe, argv, envp);
		_exit(127);
	}
	while (waitpid(child, &status, WNOHANG) == 0) {
		if (waited++ >= 500) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			return -1;
		}
		usleep(10000);
	}
	if (!WIFEXITED(status))
		return -1;
	switch (WEXITSTATUS(status)) {
	case 0: return 1;
	case 3: return 0;
	case 4: return 2;
	default: return -1;
	}
}

/* Why a connection to a live pid's socket went nowhere: the pid is a
 * thread of another process, not Python at all, or Python without an
 * agent. */
static int no_agent(pid_t pid, char *err, size_t errlen)
{
	static struct proc_env env; /* 64 KiB: not on the stack */
	char cmd[CLI_CMDLINE_MAX + 8], why[512], asked[160], exe[512];
	pid_t owner;
	unsigned version;

	if (!proc_exists(pid)) {
		snprintf(err, errlen, "no such process: %d", (int)pid);
		return CLI_ENOPROC;
	}
	owner = process_of(pid);
	if (owner > 0 && owner != pid) {
		cli_target_cmdline(owner, cmd, sizeof(cmd), CLI_CMDLINE_MAX);
		snprintf(err, errlen,
			 "%d is a thread of process %d (%s), not a process: "
			 "give the process's pid (probing -t %d ...)",
			 (int)pid, (int)owner, cmd, (int)owner);
		return CLI_EUSAGE;
	}
	cli_target_cmdline(pid, cmd, sizeof(cmd), CLI_CMDLINE_MAX);
	/* The injector's own test of what the process runs, touching
	 * nothing: a process that is no CPython is said to be one. */
	if (inject_python_version(pid, &version, why, sizeof(why)) ==
		    -ENOEXEC &&
	    strstr(why, "is not CPython")) {
		snprintf(err, errlen,
			 "process %d (%s) is not a Python process, as far as "
			 "can be told (no libpython mapped, and its program "
			 "exports no _PyRuntime): Probing looks inside CPython "
			 "processes",
			 (int)pid, cmd);
		return CLI_ENOAGENT;
	}
	read_environ(pid, &env);
	if (asked_for_agent(&env, asked, sizeof(asked))) {
		/* It was asked for: why there is none. */
		int can = finds_probing(pid, &env, exe, sizeof(exe));

		if (can == 0)
			snprintf(err, errlen,
				 "process %d (%s) has %s in its environment "
				 "but no Probing agent: its Python (%s) has "
				 "no probing package.  `make install` "
				 "installs into every Python of a built "
				 "version, or `scripts/install BUILD PREFIX "
				 "%s`; for this process: `probing -t %d "
				 "inject`",
				 (int)pid, cmd, asked, exe, exe, (int)pid);
		else if (can == 2)
			snprintf(err, errlen,
				 "process %d (%s) has %s in its environment "
				 "but no Probing agent: its Python (%s) finds "
				 "a probing package but no probing.pth in a "
				 "site-packages directory, the line that starts "
				 "the agent (a package on PYTHONPATH alone is "
				 "never started).  `scripts/install BUILD "
				 "PREFIX %s` installs both; for this process: "
				 "`probing -t %d inject`",
				 (int)pid, cmd, asked, exe, exe, (int)pid);
		else if (can == 1)
			snprintf(err, errlen,
				 "process %d (%s) has %s in its environment "
				 "but no Probing agent: it did not start "
				 "(its stderr has a line \"[probing] not "
				 "started: ...\" saying why); `probing -t %d "
				 "inject` starts one now",
				 (int)pid, cmd, asked, (int)pid);
		else /* not ours to run (another user's), or it did not run */
			snprintf(err, errlen,
				 "process %d (%s) has %s in its environment "
				 "but no Probing agent: its Python has no "
				 "probing package (`make install` installs "
				 "into every Python of a built version), or "
				 "the agent did not start (its stderr says "
				 "why); `probing -t %d inject` starts one now",
				 (int)pid, cmd, asked, (int)pid);
		return CLI_ENOAGENT;
	}
	snprintf(err, errlen,
		 "process %d (%s) has no Probing agent; start it with "
		 "PROBING=1, probing.init(), or `probing -t %d inject`",
		 (int)pid, cmd, (int)pid);
	return CLI_ENOAGENT;
}

static int connect_failed(const struct dap_addr *addr, int rc, int timeout_ms,
			  const char *why, char *err, size_t errlen)
{
	char where[DAP_ADDR_TEXT_MAX + 16];

	dap_addr_format(addr, where, sizeof(where));
	if (addr->pid > 0 &&
	    (rc == DAP_ECONNREFUSED || rc == -ECONNREFUSED || rc == -ENOENT))
		return no_agent(addr->pid, err, errlen);
	if (rc == DAP_ETIMEDOUT || rc == -ETIMEDOUT) {
		snprintf(err, errlen,
			 "agent at %s not answering (no connection within "
			 "%d ms)",
			 where, timeout_ms);
		return CLI_ETIMEOUT;
	}
	if (rc == DAP_ECONNREFUSED || rc == -ECONNREFUSED) {
		/* What makes an agent listen there. */
		snprintf(err, errlen,
			 "connection refused: nothing listens at %s%s", where,
			 addr->kind == DAP_ADDR_TCP
				 ? " (an agent listens on TCP when asked: "
				   "PROBING_PORT=N or PROBING_LISTEN=ADDR in "
				   "the program's environment, "
				   "probing.init(listen=...), or `probing -t "
				   "PID inject --listen ADDR`; `probing list` "
				   "shows the agents here and their addresses)"
				 : "");
		return CLI_EREFUSED;
	}
	if (rc == -ENOENT) {
		snprintf(err, errlen, "no socket at %s", where);
		return CLI_EREFUSED;
	}
	if (rc == DAP_EPEER) {
		snprintf(err, errlen, "%s", why);
		return CLI_EPEER;
	}
	snprintf(err, errlen, "cannot connect to %s: %s", where,
		 why && *why ? why : dap_strerror(rc));
	return CLI_EREFUSED;
}

/* The agent hung up on initialize: most likely SO_PEERCRED said no. */
static int closed_on_init(const struct dap_addr *addr, char *err, size_t errlen)
{
	char path[64], where[DAP_ADDR_TEXT_MAX + 16];
	struct stat st;

	dap_addr_format(addr, where, sizeof(where));
	snprintf(path, sizeof(path), "/proc/%d", (int)addr->pid);
	if (addr->pid > 0 && geteuid() != 0 && stat(path, &st) == 0 &&
	    st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "the agent of process %d closed the connection: it "
			 "belongs to uid %d and answers only that user or root",
			 (int)addr->pid, (int)st.st_uid);
	} else {
		snprintf(err, errlen,
			 "the agent at %s closed the connection without "
			 "answering",
			 where);
	}
	return CLI_ETIMEOUT;
}

int cli_target_lost(int dap_err, const char *what, int timeout_ms, char *err,
		    size_t errlen)
{
	if (dap_err == DAP_ETIMEDOUT)
		snprintf(err, errlen,
			 "agent not answering (no reply to %s in %d ms)", what,
			 timeout_ms);
	else if (dap_err == DAP_ECLOSED)
		snprintf(err, errlen,
			 "the agent closed the connection during %s", what);
	else if (dap_err <= DAP_EFRAME && dap_err >= DAP_EPROTO)
		snprintf(err, errlen,
			 "the reply to %s is not valid DAP (%s): is this a "
			 "Probing agent?",
			 what, dap_strerror(dap_err));
	else
		snprintf(err, errlen, "lost the agent during %s: %s", what,
			 dap_strerror(dap_err));
	return CLI_ETIMEOUT;
}

void cli_target_set_token(const char *token)
{
	given_token = token && *token ? token : NULL;
}

const char *cli_target_given_token(void)
{
	return given_token;
}

int cli_target_token(const struct dap_addr *addr, char *out, size_t outlen,
		     char *src, size_t srclen)
{
	char path[DAP_TOKEN_PATH_MAX], why[1024];
	int rc;

	if (given_token && !strcmp(given_token, CLI_TOKEN_NONE)) {
		snprintf(src, srclen,
			 "none sent: --token or PROBING_TOKEN "
			 "is " CLI_TOKEN_NONE);
		return 0;
	}
	if (given_token) {
		snprintf(out, outlen, "%s", given_token);
		snprintf(src, srclen, "--token or PROBING_TOKEN");
		return 1;
	}
	snprintf(src, srclen, "none given");
	if (addr->kind != DAP_ADDR_TCP)
		return 0;
	rc = dap_token_find(out, outlen, path, sizeof(path), why, sizeof(why));
	if (rc == 0) {
		snprintf(src, srclen, "%s", path);
		return 1;
	}
	if (rc != -ENOENT)
		snprintf(src, srclen, "%s", why);
	return 0;
}

void cli_target_say_token(const cJSON *config)
{
	const cJSON *s, *all = cJSON_GetObjectItemCaseSensitive(config,
								"settings");
	const char *where = "";

	cJSON_ArrayForEach(s, all)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "value");

		if (cJSON_IsString(n) && !strcmp(n->valuestring, "server.token") &&
		    cJSON_IsString(v))
			where = v->valuestring;
	}
	if (!strncmp(where, "none", 4))
		printf("token: none: the target's user chose PROBING_TOKEN=none, "
		       "so every local user can connect to it on loopback\n");
	else if (*where)
		printf("token: %s (TCP clients present it: --token or "
		       "PROBING_TOKEN; on this machine the CLI reads the token "
		       "file by itself)\n",
		       where);
	else
		printf("token: (the agent did not say where its token is)\n");
}

/* The agent said no to the token (or its absence). */
static int auth_failed(const struct dap_addr *addr, int sent, const char *src,
		       const struct dap_message *resp, char *err,
		       size_t errlen)
{
	char where[DAP_ADDR_TEXT_MAX + 16];

	dap_addr_format(addr, where, sizeof(where));
	if (sent)
		snprintf(err, errlen,
			 "the agent at %s refused the token (from %s): %s",
			 where, src, cli_resp_message(resp));
	else
		snprintf(err, errlen,
			 "the agent at %s needs a token (%s): give --token "
			 "TOKEN or set PROBING_TOKEN; an agent that made its "
			 "own keeps it on its machine in "
			 "$XDG_RUNTIME_DIR/probing/token or ~/.probing/token",
			 where, src);
	return CLI_EAUTH;
}

int cli_target_open(const char *text, int timeout_ms, struct dap_client **out,
		    cJSON **init_body, char *err, size_t errlen)
{
	struct dap_addr addr;
	struct dap_client *c = NULL;
	struct dap_message *resp = NULL;
	char why[256] = "", token[DAP_TOKEN_MAX + 1], src[1024];
	cJSON *args;
	int rc, sent;

	*out = NULL;
	rc = cli_target_resolve(text, &addr, err, errlen);
	if (rc != CLI_OK)
		return rc;
	rc = dap_client_connect(&addr, timeout_ms, &c, why, sizeof(why));
	if (rc < 0)
		return connect_failed(&addr, rc, timeout_ms, why, err, errlen);
	if (!init_body) {
		*out = c;
		return CLI_OK;
	}
	args = cJSON_CreateObject();
	cJSON_AddStringToObject(args, "clientID", "probing-cli");
	cJSON_AddStringToObject(args, "clientName", "probing CLI");
	cJSON_AddStringToObject(args, "adapterID", "probing");
	cJSON_AddBoolToObject(args, "linesStartAt1", 1);
	cJSON_AddBoolToObject(args, "columnsStartAt1", 1);
	cJSON_AddStringToObject(args, "pathFormat", "path");
	sent = cli_target_token(&addr, token, sizeof(token), src, sizeof(src));
	if (sent)
		cJSON_AddStringToObject(args, DAP_TOKEN_ARG, token);
	rc = dap_client_request(c, "initialize", args, timeout_ms, &resp, why,
				sizeof(why));
	if (rc == DAP_ECLOSED) {
		rc = closed_on_init(&addr, err, errlen);
		goto fail;
	}
	if (rc < 0) {
		rc = cli_target_lost(rc, "initialize", timeout_ms, err, errlen);
		goto fail;
	}
	if (!resp->success && dap_error_id(resp) == DAP_ERROR_AUTH) {
		rc = auth_failed(&addr, sent, src, resp, err, errlen);
		goto fail;
	}
	if (!resp->success) {
		snprintf(err, errlen, "initialize failed: %s",
			 resp->message ? resp->message : "no reason given");
		rc = CLI_EFAIL;
		goto fail;
	}
	*init_body = resp->body ? cJSON_Duplicate(resp->body, 1)
				: cJSON_CreateObject();
	dap_message_free(resp);
	*out = c;
	return CLI_OK;
fail:
	if (resp)
		dap_message_free(resp);
	dap_client_free(c);
	return rc;
}
