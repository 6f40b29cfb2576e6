/*
 * cmd_launch: run a program with the agent from its first line — the
 * PROBING=1 door as a command.  Sets the environment and execs; the exit
 * status is the program's.
 *
 * The agent starts from the probing.pth file of the Python package:
 *   - installed (scripts/install), the .pth is in the site-packages of
 *     the Python it was installed for: PROBING=1 is enough;
 *   - in the build tree, the package is laid out as a user site
 *     directory (build/userbase): PYTHONUSERBASE points there, which
 *     replaces the user's own ~/.local site for that program.
 * Settings go through the environment the agent reads at start-up:
 * --listen is PROBING_LISTEN, -D query.max_rows=5 is
 * PROBING_QUERY_MAX_ROWS=5.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

#define LAUNCH_NOT_FOUND 127 /* as a shell: the program is not there */
#define LAUNCH_NOT_EXEC 126  /* as a shell: it cannot be run */

/* The build tree's user base next to this program, when it holds the
 * package (build/cli/probing -> build/userbase). */
static int build_userbase(char *out, size_t outlen)
{
	char exe[PATH_MAX], pattern[PATH_MAX + 64], *slash;
	glob_t g;
	ssize_t n;
	int found;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	snprintf(pattern, sizeof(pattern),
		 "%s/userbase/lib/python3.*/site-packages/probing.pth", exe);
	found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
	globfree(&g);
	if (found && snprintf(out, outlen, "%s/userbase", exe) >= (int)outlen)
		found = 0;
	return found;
}

/* PROBING_<KEY> for a setting name (the agent's env_name()). */
static int set_env_setting(const char *key, const char *value)
{
	char name[128];
	size_t n = (size_t)snprintf(name, sizeof(name), "PROBING_");

	for (; *key && n + 1 < sizeof(name); key++)
		name[n++] =
			*key == '.' ? '_' : (char)toupper((unsigned char)*key);
	name[n] = '\0';
	return setenv(name, value, 1);
}

static int cmd_launch_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'a'},
		{"address", required_argument, NULL, 'a'},
		{"define", required_argument, NULL, 'D'},
		{NULL, 0, NULL, 0},
	};
	char userbase[PATH_MAX];
	int c;

	(void)ctx;
	/* "+": options end at the program's name. */
	while ((c = getopt_long(argc, argv, "+:a:D:", opts, NULL)) != -1) {
		char *eq;

		switch (c) {
		case 'a':
			setenv("PROBING_LISTEN", optarg, 1);
			break;
		case 'D':
			eq = strchr(optarg, '=');
			if (!eq || eq == optarg)
				return cli_usage_error(&cmd_launch_entry,
						       "-D '%s' is not "
						       "KEY=VALUE",
						       optarg);
			*eq = '\0';
			set_env_setting(optarg, eq + 1);
			break;
		default:
			return cli_option_error(&cmd_launch_entry, c, argc,
						argv);
		}
	}
	if (optind >= argc)
		return cli_usage_error(&cmd_launch_entry,
				       "no program to launch");
	setenv("PROBING", "1", 1);
	if (build_userbase(userbase, sizeof(userbase)))
		setenv("PYTHONUSERBASE", userbase, 1);
	fflush(stdout);
	execvp(argv[optind], argv + optind);
	cli_error(0, "cannot run %s: %s", argv[optind], strerror(errno));
	return errno == ENOENT ? LAUNCH_NOT_FOUND : LAUNCH_NOT_EXEC;
}

const struct cmd_entry cmd_launch_entry = {
	.name = "launch",
	.alias = NULL,
	.usage = "[--listen ADDR] [-D KEY=VALUE]... [--] PROGRAM [ARGS...]",
	.summary = "Run a Python program with the agent from its first line",
	.help = "Runs PROGRAM with PROBING=1, so that the agent starts with "
		"the interpreter\n"
		"(the probing.pth autostart), then `probing -t PID ...` "
		"works at once.\n"
		"From the build tree, PYTHONUSERBASE is pointed at "
		"build/userbase, where the\n"
		"package is.  The exit status is PROGRAM's (127: not found, "
		"126: cannot run).\n"
		"\n"
		"Options:\n"
		"  -a, --listen ADDR    also listen on TCP (PROBING_LISTEN; "
		"--address too)\n"
		"  -D, --define K=V     an agent setting, as PROBING_K=V "
		"(repeatable)\n"
		"\n"
		"Example:\n"
		"  probing launch -- python3 train.py --lr 3e-4\n",
	.flags = CMD_NOTABLE,
	.exec = cmd_launch_exec,
};
