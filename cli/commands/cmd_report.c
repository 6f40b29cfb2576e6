/*
 * cmd_report: show a crash or hang report file (report.h), after the
 * process is gone.  No agent, no target.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "render/report.h"

/* The whole of path ("-": stdin) into a heap buffer, and whose it is in
 * *owner (the file's owner: the user of the process that wrote it; stdin:
 * ours, we chose to give it); NULL after saying why. */
static char *slurp(const char *path, size_t *len, struct stat *owner)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t cap = 1 << 16, n = 0;
	char *buf;

	if (!f) {
		cli_error(CLI_EFAIL, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (f == stdin || fstat(fileno(f), owner)) {
		owner->st_uid = geteuid();
		owner->st_gid = getegid();
	}
	buf = malloc(cap + 1);
	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, f);

		n += r;
		if (r == 0)
			break;
		if (n == cap) {
			char *g;

			if (cap > CLI_REPORT_BYTES_MAX)
				break; /* the parser reads its cap and says so
					*/
			g = realloc(buf, cap * 2 + 1);
			if (!g) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = g;
			cap *= 2;
		}
	}
	if (f != stdin)
		fclose(f);
	if (!buf) {
		cli_error(CLI_EFAIL, "out of memory");
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

static int cmd_report_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"no-source", no_argument, NULL, 'S'},
		{NULL, 0, NULL, 0},
	};
	enum cli_format fmt = ctx->format;
	struct cli_report r;
	struct stat owner;
	char err[256], *text;
	size_t len = 0;
	int c, rc, source = 1;

	while ((c = getopt_long(argc, argv, ":f:S", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (cli_format_parse(optarg, &fmt))
				return CLI_EUSAGE;
			if (fmt == CLI_FORMAT_CSV)
				return cli_usage_error(&cmd_report_entry,
						       "report prints text or "
						       "json, not csv");
			break;
		case 'S':
			source = 0;
			break;
		default:
			return cli_option_error(&cmd_report_entry, c, argc,
						argv);
		}
	}
	if (argc - optind != 1)
		return cli_usage_error(&cmd_report_entry,
				       argc - optind ? "one FILE at a time"
						     : "which report? give "
						       "FILE");
	text = slurp(argv[optind], &len, &owner);
	if (!text)
		return CLI_EFAIL;
	rc = cli_report_parse(text, len, &r, err, sizeof(err));
	free(text);
	/* Source lines are read with the report's writer's rights only. */
	r.reader_uid = (long)owner.st_uid;
	r.reader_gid = (long)owner.st_gid;
	if (rc) {
		cli_report_release(&r);
		return cli_error(CLI_EFAIL, "%s: %s", argv[optind], err);
	}
	if (fmt == CLI_FORMAT_JSON) {
		cJSON *j = cli_report_json(&r);
		char *s = j ? cJSON_Print(j) : NULL;

		if (s)
			printf("%s\n", s);
		free(s);
		cJSON_Delete(j);
		rc = s ? CLI_OK : cli_error(CLI_EFAIL, "out of memory");
	} else {
		cli_report_print(&r, stdout, source,
				 strcmp(argv[optind], "-") ? argv[optind]
							   : NULL);
		rc = CLI_OK;
	}
	cli_report_release(&r);
	return rc;
}

const struct cmd_entry cmd_report_entry = {
	.name = "report",
	.alias = NULL,
	.usage = "[--no-source] [-f json] FILE",
	.summary = "Show a crash or hang report file (after the process is "
		   "gone)",
	.help = "Reads a report the agent wrote (probing-crash-PID-TIME.txt "
		"when the process\n"
		"died on a fatal signal or an uncaught exception, "
		"probing-hang-PID-TIME.txt\n"
		"when its main thread stopped moving; see crash.enabled and "
		"hang.timeout)\n"
		"and shows what happened, then the crashed or stuck thread "
		"first, each\n"
		"Python frame with its line of source when the file is still "
		"there (a *.py\n"
		"file the report's writer could read), then\n"
		"the native frames.  FILE '-' reads stdin.  A report cut short "
		"(the process\n"
		"died while writing it) is shown as far as it goes and said "
		"to be incomplete.\n"
		"No agent is needed.  See docs/forensics.md.\n"
		"\n"
		"Options:\n"
		"  -S, --no-source      do not show source lines\n"
		"  -f, --format json    print the parsed report as JSON\n"
		"\n"
		"Example:\n"
		"  probing report probing-crash-4242-20250102T030405Z.txt\n",
	.flags = 0,
	.exec = cmd_report_exec,
};
