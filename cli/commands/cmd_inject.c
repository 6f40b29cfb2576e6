/*
 * cmd_inject: put the agent into a running Python process with ptrace
 * (inject/inject.h), wait until it answers, then apply --listen / -D
 * through probing/config.
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
#include "target.h"

#define INJECT_SET_MAX 64     /* -D settings at once */
#define CONNECT_RETRY_US 3000 /* between connects while the agent starts */
#define INJECT_BUSY_TRIES 3   /* injections refused for want of a safe point */

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
		return CLI_ENOTPY;
	case -ENOENT:
	case -ELIBBAD:
		return CLI_ELOAD;
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
		printf("restarted the agent in process %d (%s): %s was "
		       "loaded already, its agent stopped (a forked "
		       "child's)\n",
		       (int)pid, cmd, res->target_path);
	else
		printf("injected %s into process %d (%s)\n", lib, (int)pid,
		       cmd);
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
		{NULL, 0, NULL, 0},
	};
	struct then then = {0};
	struct inject_opts io = {0};
	struct inject_result res;
	char lib[PATH_MAX], err[1536];
	unsigned version = 0;
	const char *library = NULL, *delay;
	cJSON *set = NULL;
	int64_t start = now_ms();
	pid_t pid;
	int c, rc;

	set = cJSON_CreateObject();
	while ((c = getopt_long(argc, argv, ":a:L:D:cPbe:", opts,
				NULL)) != -1) {
		char *eq;

		switch (c) {
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
	io.timeout_ms = ctx->timeout_ms;
	delay = getenv("PROBING_INJECT_TEST_DELAY_US");
	if (delay && *delay) {
		io.step_delay_us = atoi(delay);
		io.step = on_step;
	}
	rc = inject_library(pid, lib, &io, &res, err, sizeof(err));
	/* -EBUSY: no thread stopped at a safe point in time, and nothing
	 * was changed (a very busy machine or target).  Trying again is
	 * safe; a few times, while the timeout allows. */
	for (int again = 1; rc == -EBUSY && again < INJECT_BUSY_TRIES &&
			    now_ms() - start < ctx->timeout_ms / 2;
	     again++) {
		fprintf(stderr, "probing: %s; trying again (%d of %d)\n", err,
			again + 1, INJECT_BUSY_TRIES);
		usleep(100000 * (useconds_t)again);
		memset(&res, 0, sizeof(res));
		rc = inject_library(pid, lib, &io, &res, err, sizeof(err));
	}
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
		 "[-D KEY=VALUE]... [--library PATH]",
	.summary = "Put the agent into a running Python process (ptrace)",
	.help = "Loads the agent into process TARGET (a pid; "
		"CPython " PROBING_SUPPORTED ") with ptrace:\n"
		"one thread is stopped for about a millisecond, calls "
		"dlopen() through\n"
		"a small trampoline, and goes on exactly where it was (a "
		"sleeping system\n"
		"call is restarted, never interrupted).  Then waits for the "
		"agent to answer\n"
		"(--timeout), applies the settings, and prints its address.  "
		"An agent that\n"
		"already answers is reused.  See docs/injection.md.\n"
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
		"\n"
		"Needs the right to ptrace the process: the same user (with\n"
		"kernel.yama.ptrace_scope 0), or CAP_SYS_PTRACE.  Exit codes "
		"3, 5, 8, 9, 10, 11:\n"
		"see 'probing --help'.\n"
		"\n"
		"Example:\n"
		"  probing -t 1234 inject --listen 127.0.0.1:9922\n",
	.flags = CMD_TARGET | CMD_NOTABLE,
	.exec = cmd_inject_exec,
};
