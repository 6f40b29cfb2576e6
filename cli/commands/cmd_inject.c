/*
 * cmd_inject: put the agent into a running Python process, wait until it
 * answers, then apply --listen / -D through probing/config.
 *
 * Two ways in (--via): PEP 768 (inject/remote_exec.h: CPython 3.14+ runs
 * our loader at a safe point, no thread is stopped) and ptrace
 * (inject/inject.h: one thread stopped, dlopen through a trampoline).
 * auto, the default, takes PEP 768 where the target has it and it is on,
 * and ptrace otherwise, or when the main thread reaches no safe point in
 * --safe-point-wait; it says which way it went and, on a fallback, why.
 *
 * An agent that already answers at @probing-PID is reused: no second
 * copy is loaded.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "inject.h"
#include "remote_exec.h"
#include "target.h"

#define INJECT_SET_MAX 64     /* -D settings at once */
#define CONNECT_RETRY_US 3000 /* between connects while the agent starts */
#define INJECT_BUSY_TRIES 3   /* injections refused for want of a safe point */
#define SAFE_POINT_WAIT_MAX 600000 /* ms: --safe-point-wait, at most */

/* --via: how the agent goes in. */
enum via { VIA_AUTO, VIA_PEP768, VIA_PTRACE };

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A pid, and nothing else, from the target text; 0 when not one. */
static pid_t target_pid(const char *text)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || *end || v <= 0 || v > 0x7fffffffL)
		return 0;
	return (pid_t)v;
}

static int readable(const char *path)
{
	return access(path, R_OK) == 0;
}

/* The agent library for CPython version (major << 8 | minor):
 * --library, $PROBING_LIBRARY, next to an installed CLI, or in the build
 * tree.  Returns 0 with the path in out. */
static int find_library(const char *given, unsigned version, char *out,
			size_t outlen)
{
	const char *env = getenv("PROBING_LIBRARY");
	static const char *const rel[] = {"../lib/probing", "../agent"};
	char exe[PATH_MAX], name[64], *slash;
	ssize_t n;

	if (given || (env && *env)) {
		const char *p = given ? given : env;
		if (!readable(p))
			return cli_error(
				CLI_ELOAD,
				"library not found or not readable: "
				"%s (from %s)",
				p, given ? "--library" : "PROBING_LIBRARY");
		snprintf(out, outlen, "%s", p);
		return 0;
	}
	snprintf(name, sizeof(name), "libprobing-cp%u%u.so", version >> 8,
		 version & 0xff);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		int n2 = snprintf(out, outlen, "%s/%s/%s", exe, rel[i], name);
		if (n2 > 0 && (size_t)n2 < outlen && readable(out))
			return 0;
	}
	return cli_error(CLI_ELOAD,
			 "cannot find %s (looked in %s/%s and %s/%s); give "
			 "--library PATH or set PROBING_LIBRARY",
			 name, exe, rel[0], exe, rel[1]);
}

/* The hidden test hook: PROBING_INJECT_TEST_DELAY_US=N sleeps N us at
 * each step and names the step on stderr, so a test can kill the CLI
 * at each one. */
static void on_step(void *arg, const char *name)
{
	(void)arg;
	fprintf(stderr, "probing: inject step %s\n", name);
	fflush(stderr);
}

static int inject_exit_code(int rc)
{
	switch (rc) {
	case -ESRCH:
		return CLI_ENOPROC;
	case -EPERM:
	case -EACCES:
		return CLI_EPERM;
	case -ENOEXEC:
	case -EAGAIN:
	case -ENOSYS: /* --via pep768 where the Python has none */
		return CLI_ENOTPY;
	case -ENOENT:
	case -ELIBBAD:
		return CLI_ELOAD;
	case -EINTR:
		return CLI_EINTR;
	default:
		return CLI_EINJECT;
	}
}

/* Connects until the agent answers initialize or until deadline. */
static int wait_agent(struct cmd_ctx *ctx, int64_t deadline)
{
	char err[512];
	int rc;

	for (;;) {
		int left = (int)(deadline - now_ms());

		rc = cli_target_open(ctx->target, left > 0 ? left : 1,
				     &ctx->client, &ctx->init_body, err,
				     sizeof(err));
		if (rc == CLI_OK)
			return CLI_OK;
		if ((rc != CLI_ENOAGENT && rc != CLI_ETIMEOUT) ||
		    now_ms() >= deadline)
			return cli_error(rc == CLI_ENOAGENT ? CLI_ETIMEOUT : rc,
					 "the agent did not answer within %d "
					 "ms of loading (%s); see the "
					 "process's stderr",
					 ctx->timeout_ms, err);
		usleep(CONNECT_RETRY_US);
	}
}

/* The value of setting name in a probing/config reply, or "". */
static const char *setting(const cJSON *body, const char *name)
{
	const cJSON *s,
		*all = cJSON_GetObjectItemCaseSensitive(body, "settings");

	cJSON_ArrayForEach(s, all)
	{
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, "name");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "value");

		if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
			return cJSON_IsString(v) ? v->valuestring : "";
	}
	return "";
}

/* Applies the settings (set may be NULL) and prints the address, and,
 * when it listens on TCP, where the token is. */
static int configure(struct cmd_ctx *ctx, cJSON *set)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	int listen = set && cJSON_GetObjectItemCaseSensitive(set,
							     "server.listen");
	int rc;

	if (set)
		cJSON_AddItemToObject(args, "set", set);
	rc = cli_request(ctx, "probing/config", args, ctx->timeout_ms, &resp);
	if (rc != CLI_OK)
		return rc;
	if (!resp->success) {
		rc = cli_error(CLI_EFAIL,
			       "the agent runs, but the settings were not "
			       "applied: %s",
			       cli_resp_message(resp));
	} else {
		const char *addr = setting(resp->body, "agent.address");

		printf("agent: %s\n", *addr ? addr : "(address unknown)");
		if (listen)
			cli_target_say_token(resp->body);
	}
	dap_message_free(resp);
	return rc;
}

/* What to do once the agent answers: the original Probing's -P and -e. */
struct then {
	int pprof;	    /* start the sampler */
	const char *script; /* run this file's code in the target */
};

#define SCRIPT_MAX (4 << 20) /* bytes of an -e script */

/* Reads path whole (at most SCRIPT_MAX); NULL after saying why. */
static char *read_script(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t n = 0;

	if (!f) {
		cli_error(CLI_EUSAGE, "--execute: cannot read %s: %s", path,
			  strerror(errno));
		return NULL;
	}
	buf = malloc(SCRIPT_MAX + 1);
	if (buf)
		n = fread(buf, 1, SCRIPT_MAX + 1, f);
	if (!buf || ferror(f) || n > SCRIPT_MAX) {
		cli_error(CLI_EUSAGE, "--execute: %s: %s", path,
			  !buf ? "out of memory"
			  : n > SCRIPT_MAX ? "over 4 MiB"
					   : strerror(errno));
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* The settings, then -P and -e, in that order. */
static int configure_then(struct cmd_ctx *ctx, cJSON *set,
			  const struct then *then)
{
	struct dap_message *resp = NULL;
	char *code;
	cJSON *args;
	int rc = configure(ctx, set);

	if (rc == CLI_OK && then->pprof) {
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "action", "start");
		rc = cli_request(ctx, "probing/profile", args, ctx->timeout_ms,
				 &resp);
		if (rc == CLI_OK && !resp->success)
			rc = cli_error(CLI_EFAIL, "the sampler did not start: %s",
				       cli_resp_message(resp));
		else if (rc == CLI_OK)
			printf("sampler: started ('probing -t %s perf' for its "
			       "state, 'flamegraph' for the profile)\n",
			       ctx->target);
		dap_message_free(resp);
		resp = NULL;
	}
	if (rc == CLI_OK && then->script) {
		if (!(code = read_script(then->script)))
			return CLI_EUSAGE;
		args = cJSON_CreateObject();
		cJSON_AddStringToObject(args, "expression", code);
		cJSON_AddStringToObject(args, "context", "repl");
		free(code);
		rc = cli_request(ctx, "evaluate", args, ctx->timeout_ms, &resp);
		if (rc == CLI_OK)
			rc = cli_evaluate_show(resp);
		dap_message_free(resp);
	}
	return rc;
}

static void print_injected(pid_t pid, const char *lib,
			   const struct inject_result *res, double agent_ms)
{
	char cmd[CLI_CMDLINE_MAX + 8];

	cli_target_cmdline(pid, cmd, sizeof(cmd), CLI_CMDLINE_MAX);
	if (res->restarted)
		printf("restarted the agent in process %d (%s) with ptrace: "
		       "%s was loaded already, its agent stopped (a forked "
		       "child's)\n",
		       (int)pid, cmd, res->target_path);
	else
		printf("injected %s into process %d (%s) with ptrace\n", lib,
		       (int)pid, cmd);
	if (res->note[0])
		printf("  %s\n", res->note);
	printf("  thread %d was stopped %.2f ms, %s\n", (int)res->tid,
	       res->stopped_ms, res->where);
	printf("  %s took %.1f ms; the agent answered %.1f ms after the "
	       "start\n",
	       res->restarted ? "the restart" : "dlopen", res->dlopen_ms,
	       agent_ms);
	printf("  loader code left in unused bytes of %s and %s\n",
	       res->code_file, res->data_file);
}

static void print_remote(pid_t pid, const struct inject_remote_result *res,
			 double agent_ms)
{
	char cmd[CLI_CMDLINE_MAX + 8];

	cli_target_cmdline(pid, cmd, sizeof(cmd), CLI_CMDLINE_MAX);
	if (res->restarted)
		printf("restarted the agent in process %d (%s) through PEP "
		       "768: %s was loaded already, its agent stopped (a "
		       "forked child's)\n",
		       (int)pid, cmd, res->target_path);
	else
		printf("injected %s into process %d (%s) through PEP 768\n",
		       res->target_path, (int)pid, cmd);
	if (res->note[0])
		printf("  %s\n", res->note);
	printf("  the main thread (%d) took the request at a safe point "
	       "%.1f ms after it was made and ran the loader for %.1f ms, "
	       "holding the GIL; no thread was stopped\n",
	       (int)res->tid, res->taken_ms, res->run_ms);
	printf("  the agent answered %.1f ms after the start\n", agent_ms);
}

/* Whether, after PEP 768's error rc, the ptrace way may follow in auto:
 * nothing was loaded and nothing will be. */
static int may_fall_back(int rc)
{
	switch (rc) {
	case -ENOSYS:  /* no PEP 768 in that Python */
	case -ENOTSUP: /* turned off there */
	case -EBUSY:   /* no safe point in time: withdrawn */
	case -ENOPKG:  /* no ctypes there */
	case -EROFS:   /* no loader file in its /tmp */
	case -ENOSPC:
	case -EDQUOT:
	case -EACCES:
	case -ENOTDIR:
	case -ENAMETOOLONG:
		return 1;
	default:
		return 0;
	}
}

static volatile sig_atomic_t pep768_stop;

static void on_stop(int sig)
{
	(void)sig;
	pep768_stop = 1;
}

/*
 * The PEP 768 way.  0 once the loader ran (then *done), or its error with
 * err, saying whether ptrace may follow (*fall_back); -EALREADY as
 * inject_library's.  Ctrl-C, SIGTERM or SIGHUP while it waits withdraw
 * the request and remove its files from the target's /tmp (-EINTR): a
 * request left behind would load the agent after the user gave up.
 */
static int via_pep768(struct cmd_ctx *ctx, pid_t pid, const char *lib,
		      int safe_point_ms, struct inject_remote_result *res,
		      int *fall_back, char *err, size_t errlen)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	struct inject_remote_opts ro = {
		.timeout_ms = ctx->timeout_ms,
		.safe_point_ms = safe_point_ms,
		.stop = &pep768_stop,
	};
	struct sigaction sa, old[3];
	int rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	rc = inject_remote_library(pid, lib, &ro, res, err, errlen);
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	*fall_back = rc && may_fall_back(rc);
	return rc;
}

/* The ptrace way, tried again while no thread stops at a safe point. */
static int via_ptrace(struct cmd_ctx *ctx, pid_t pid, const char *lib,
		      int64_t start, struct inject_result *res, char *err,
		      size_t errlen)
{
	struct inject_opts io = {.timeout_ms = ctx->timeout_ms};
	const char *delay = getenv("PROBING_INJECT_TEST_DELAY_US");
	int rc;

	if (delay && *delay) {
		io.step_delay_us = atoi(delay);
		io.step = on_step;
	}
	rc = inject_library(pid, lib, &io, res, err, errlen);
	/* -EBUSY: no thread stopped at a safe point in time, and nothing
	 * was changed (a very busy machine or target).  Trying again is
	 * safe; a few times, while the timeout allows. */
	for (int again = 1; rc == -EBUSY && again < INJECT_BUSY_TRIES &&
			    now_ms() - start < ctx->timeout_ms / 2;
	     again++) {
		fprintf(stderr, "probing: %s; trying again (%d of %d)\n", err,
			again + 1, INJECT_BUSY_TRIES);
		usleep(100000 * (useconds_t)again);
		memset(res, 0, sizeof(*res));
		rc = inject_library(pid, lib, &io, res, err, errlen);
	}
	return rc;
}

static int parse_via(const char *text, enum via *via)
{
	if (!strcmp(text, "auto"))
		*via = VIA_AUTO;
	else if (!strcmp(text, "pep768"))
		*via = VIA_PEP768;
	else if (!strcmp(text, "ptrace"))
		*via = VIA_PTRACE;
	else
		return -1;
	return 0;
}

static int cmd_inject_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"library", required_argument, NULL, 'L'},
		{"define", required_argument, NULL, 'D'},
		{"crash", no_argument, NULL, 'c'},
		{"pprof", no_argument, NULL, 'P'},
		{"address", required_argument, NULL, 'l'},
		{"background", no_argument, NULL, 'b'},
		{"execute", required_argument, NULL, 'e'},
		{"via", required_argument, NULL, 'V'},
		{"safe-point-wait", required_argument, NULL, 'W'},
		{NULL, 0, NULL, 0},
	};
	struct then then = {0};
	struct inject_result res;
	struct inject_remote_result rres;
	char lib[PATH_MAX], err[1536];
	unsigned version = 0;
	const char *library = NULL, *env_via;
	enum via via = VIA_AUTO;
	int safe_point_ms = INJECT_REMOTE_SAFE_POINT_DEFAULT, fall_back = 0;
	cJSON *set = NULL;
	int64_t start = now_ms();
	pid_t pid;
	int c, rc;

	env_via = getenv("PROBING_INJECT_VIA");
	if (env_via && *env_via && parse_via(env_via, &via))
		return cli_usage_error(&cmd_inject_entry,
				       "PROBING_INJECT_VIA must be auto, pep768 "
				       "or ptrace, not '%s'",
				       env_via);
	set = cJSON_CreateObject();
	while ((c = getopt_long(argc, argv, ":a:L:D:cPbe:", opts,
				NULL)) != -1) {
		char *eq, *end;
		long ms;

		switch (c) {
		case 'V':
			if (parse_via(optarg, &via)) {
				cJSON_Delete(set);
				return cli_usage_error(&cmd_inject_entry,
						       "--via is auto, pep768 "
						       "or ptrace, not '%s'",
						       optarg);
			}
			break;
		case 'W':
			errno = 0;
			ms = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || ms < 1 ||
			    ms > SAFE_POINT_WAIT_MAX) {
				cJSON_Delete(set);
				return cli_usage_error(
					&cmd_inject_entry,
					"--safe-point-wait is milliseconds, 1 "
					"to %d, not '%s'",
					SAFE_POINT_WAIT_MAX, optarg);
			}
			safe_point_ms = (int)ms;
			break;
		case 'P':
			then.pprof = 1;
			break;
		case 'e':
			then.script = optarg;
			break;
		case 'b':
			/* The original's "background server": always on. */
			break;
		case 'a':
		case 'l':
			cJSON_DeleteItemFromObjectCaseSensitive(
				set, "server.listen");
			cJSON_AddStringToObject(set, "server.listen", optarg);
			break;
		case 'L':
			library = optarg;
			break;
		case 'c':
			/* The crash handler (docs/forensics.md). */
			cJSON_DeleteItemFromObjectCaseSensitive(set,
								"crash.enabled");
			cJSON_AddStringToObject(set, "crash.enabled", "on");
			break;
		case 'D':
			eq = strchr(optarg, '=');
			if (!eq || eq == optarg) {
				cJSON_Delete(set);
				return cli_usage_error(&cmd_inject_entry,
						       "-D '%s' is not "
						       "KEY=VALUE",
						       optarg);
			}
			if (cJSON_GetArraySize(set) >= INJECT_SET_MAX) {
				cJSON_Delete(set);
				return cli_usage_error(&cmd_inject_entry,
						       "at most %d settings",
						       INJECT_SET_MAX);
			}
			*eq = '\0';
			cJSON_DeleteItemFromObjectCaseSensitive(set, optarg);
			cJSON_AddStringToObject(set, optarg, eq + 1);
			break;
		default:
			cJSON_Delete(set);
			return cli_option_error(&cmd_inject_entry, c, argc,
						argv);
		}
	}
	if (optind < argc || !ctx->target || !(pid = target_pid(ctx->target))) {
		cJSON_Delete(set);
		return cli_usage_error(&cmd_inject_entry,
				       optind < argc
					       ? "unexpected argument '%s'"
					       : "inject needs a pid: "
						 "-t PID%s",
				       optind < argc ? argv[optind] : "");
	}
	if (cJSON_GetArraySize(set) == 0) {
		cJSON_Delete(set);
		set = NULL;
	}
	if (kill(pid, 0) < 0 && errno == ESRCH) {
		cJSON_Delete(set);
		return cli_error(CLI_ENOPROC, "no such process: %d", (int)pid);
	}

	/* One agent per process: reuse the one that answers.  A socket that
	 * exists but is slow to answer is an agent still starting (its
	 * socket comes first): give it the whole timeout. */
	rc = cli_target_open(ctx->target, ctx->timeout_ms, &ctx->client,
			     &ctx->init_body, err, sizeof(err));
	if (rc == CLI_OK) {
		printf("process %d already has a Probing agent; reusing it "
		       "(nothing injected)\n",
		       (int)pid);
		return configure_then(ctx, set, &then);
	}
	if (rc != CLI_ENOAGENT) {
		cJSON_Delete(set);
		return cli_error(rc, "%s", err);
	}

	/* The library built for the target's CPython (the injector's own
	 * check, touching nothing): an unsupported version is refused here
	 * with the list of those this install has. */
	rc = inject_python_version(pid, &version, err, sizeof(err));
	if (rc) {
		cJSON_Delete(set);
		return cli_error(inject_exit_code(rc), "%s", err);
	}
	rc = find_library(library, version, lib, sizeof(lib));
	if (rc) {
		cJSON_Delete(set);
		return rc;
	}
	if (via != VIA_PTRACE) {
		rc = via_pep768(ctx, pid, lib, safe_point_ms, &rres, &fall_back,
				err, sizeof(err));
		if (rc == 0) {
			rc = wait_agent(ctx, start + ctx->timeout_ms +
						     (int64_t)rres.total_ms);
			if (rc != CLI_OK) {
				fprintf(stderr,
					"probing: %s was loaded through PEP "
					"768 (by thread %d, %.1f ms after the "
					"request)\n",
					rres.target_path, (int)rres.tid,
					rres.taken_ms);
				cJSON_Delete(set);
				return rc;
			}
			print_remote(pid, &rres, (double)(now_ms() - start));
			return configure_then(ctx, set, &then);
		}
		if (rc != -EALREADY && (via == VIA_PEP768 || !fall_back)) {
			cJSON_Delete(set);
			return cli_error(inject_exit_code(rc), "PEP 768: %s%s",
					 err,
					 fall_back ? "; --via ptrace (or auto) "
						     "loads it by stopping a "
						     "thread instead"
						   : "");
		}
		/* Before 3.14 there is nothing to explain. */
		if (rc != -EALREADY && (rc != -ENOSYS || rres.version >= 0x030e))
			fprintf(stderr, "probing: PEP 768: %s; using ptrace "
				"instead\n", err);
	}
	if (via == VIA_PTRACE || rc != -EALREADY)
		rc = via_ptrace(ctx, pid, lib, start, &res, err, sizeof(err));
	if (rc == -EALREADY) {
		/* Loaded, but not answering yet: an agent starting up (say,
		 * from an injection whose CLI was killed after the thread
		 * went in).  Wait for it like for our own. */
		printf("process %d has the agent library loaded already; "
		       "waiting for its agent (nothing injected)\n",
		       (int)pid);
		rc = wait_agent(ctx, start + ctx->timeout_ms);
		if (rc != CLI_OK) {
			cJSON_Delete(set);
			return rc;
		}
		return configure_then(ctx, set, &then);
	}
	if (rc) {
		cJSON_Delete(set);
		return cli_error(inject_exit_code(rc), "%s", err);
	}
	rc = wait_agent(ctx, start + ctx->timeout_ms + (int64_t)res.total_ms);
	if (rc != CLI_OK) {
		cJSON_Delete(set);
		return rc;
	}
	print_injected(pid, res.target_path, &res, (double)(now_ms() - start));
	return configure_then(ctx, set, &then);
}

const struct cmd_entry cmd_inject_entry = {
	.name = "inject",
	.alias = NULL,
	.usage = "[--listen ADDR] [--crash] [--pprof] [--execute FILE] "
		 "[-D KEY=VALUE]... [--library PATH] [--via auto|pep768|ptrace] "
		 "[--safe-point-wait MS]",
	.summary = "Put the agent into a running Python process (PEP 768 or "
		   "ptrace)",
	.help = "Loads the agent into process TARGET (a pid; "
		"CPython " PROBING_SUPPORTED "), one of two ways:\n"
		"  PEP 768 (CPython 3.14+): the interpreter's own remote "
		"debugging support, as\n"
		"    sys.remote_exec() uses it: the main thread runs a small "
		"loader at its next\n"
		"    safe point (it holds the GIL a few ms meanwhile); no "
		"thread is stopped.\n"
		"  ptrace: one thread is stopped for about a millisecond, "
		"calls dlopen()\n"
		"    through a small trampoline, and goes on exactly where it "
		"was (a sleeping\n"
		"    system call is restarted, never interrupted).\n"
		"The first line of the output says which way it went.  Then "
		"waits for the\n"
		"agent to answer (--timeout), applies the settings, and prints "
		"its address.\n"
		"An agent that already answers is reused.  See "
		"docs/injection.md.\n"
		"\n"
		"Options:\n"
		"  -a, --listen ADDR    also listen on TCP (server.listen), "
		"e.g. 127.0.0.1:9922;\n"
		"                       TCP needs a token, loopback too "
		"(other local users reach\n"
		"                       it): the target's PROBING_TOKEN, "
		"else one generated into\n"
		"                       the token file, whose path is printed "
		"(docs/security.md)\n"
		"      --address ADDR   the same (the original Probing's "
		"name)\n"
		"  -P, --pprof          then start the sampler (as 'probing "
		"perf --start')\n"
		"  -e, --execute FILE   then run FILE's Python code in the "
		"process (as 'probing\n"
		"                       eval'; its output is printed)\n"
		"  -b, --background     accepted for the original's scripts: "
		"the agent always\n"
		"                       serves in the background\n"
		"  -D, --define K=V     set an agent setting (repeatable; "
		"'probing config'\n"
		"                       lists them)\n"
		"  -c, --crash          write a report of every thread's "
		"stack when the process\n"
		"                       crashes (crash.enabled=on; see "
		"docs/forensics.md)\n"
		"  -L, --library PATH   the agent library (default: "
		"$PROBING_LIBRARY, then the one\n"
		"                       for the target's version next to this "
		"program:\n"
		"                       ../lib/probing/libprobing-cpXY.so or "
		"../agent/libprobing-cpXY.so)\n"
		"      --via WAY        auto (default; $PROBING_INJECT_VIA): "
		"PEP 768 where the\n"
		"                       target has it and it is on, else "
		"ptrace, which also\n"
		"                       follows when the main thread reaches no "
		"safe point in\n"
		"                       --safe-point-wait (it waits in C); "
		"pep768 or ptrace:\n"
		"                       that way only\n"
		"      --safe-point-wait MS\n"
		"                       how long PEP 768 waits for the main "
		"thread (default\n"
		"                       2000)\n"
		"\n"
		"Needs the right to ptrace the process (PEP 768 too: its "
		"memory is written):\n"
		"the same user (with kernel.yama.ptrace_scope 0), or "
		"CAP_SYS_PTRACE.  Exit codes "
		"3, 5, 8, 9, 10, 11:\n"
		"see 'probing --help'.\n"
		"\n"
		"Example:\n"
		"  probing -t 1234 inject --listen 127.0.0.1:9922\n",
	.flags = CMD_TARGET | CMD_NOTABLE,
	.exec = cmd_inject_exec,
};
