/*
 * ops: what `probing mcp` (and `probing web`) can do, each one a command
 * the CLI already has.
 *
 * An op is a name, a sentence saying when to use it (an assistant reads it
 * to choose), typed parameters, and the words of the `probing` command that
 * answers it, built from the parameters.  ops_run() checks the parameters,
 * runs the command (selfrun.h) and hands back what it printed.  Nothing
 * here talks to an agent itself.
 *
 * Ops that run code in the target (OP_EVAL) are listed and run only when
 * the server was started to allow them (`probing mcp --allow-eval`); the
 * agent's read-only mode (server.readonly) refuses them again in the
 * target.
 */
#ifndef CLI_OPS_H
#define CLI_OPS_H

#include <cjson/cJSON.h>
#include <stddef.h>

enum op_type { OP_STR, OP_BOOL, OP_INT };

struct op_param {
	const char *name;
	enum op_type type;
	int required;
	const char *doc;
	const char *const *choices; /* OP_STR: the allowed values, NULL-ended;
				     * or NULL (any) */
};

#define OP_EVAL 0x1	/* runs code in the target */
#define OP_WORDS_MAX 24 /* words of one command */

/* The words of one command, as an op builds them. */
struct op_words {
	const char *w[OP_WORDS_MAX + 1]; /* NULL-terminated */
	int n;
	char text[1024]; /* room for words the op formats (op_words_fmt) */
	size_t used;
};

struct op {
	const char *name;  /* "backtrace" */
	const char *title; /* "Python stacks of every thread" */
	const char *doc;   /* what it shows and when to use it */
	const struct op_param *params;
	int flags;	/* OP_* */
	int timeout_ms; /* beyond the command's own: the time it may take */
	/* Adds the command's words for args (checked against params).
	 * Returns 0, or -1 with the reason in err. */
	int (*build)(const cJSON *args, struct op_words *w, char *err,
		     size_t errlen);
};

/* The ops, ending with one whose name is NULL. */
extern const struct op ops_all[];

/* The op named name, or NULL. */
const struct op *ops_find(const char *name);

/* What running an op gave. */
struct op_result {
	int ok;	    /* the command exited 0 */
	int status; /* its exit code (cmd.h's enum cli_exit), -1: timed out */
	char *text; /* what it printed: stdout, then stderr's lines when it
		     * failed (owned, NUL-terminated) */
};

/*
 * Checks args (a JSON object, or NULL for none) against op's parameters,
 * builds the command and runs it.  Returns 0 with *r set (free with
 * ops_result_free), or -1 with the reason in err when the arguments are
 * wrong or the command could not be started.
 */
int ops_run(const struct op *op, const cJSON *args, struct op_result *r,
	    char *err, size_t errlen);

void ops_result_free(struct op_result *r);

/* Runs the op named op_name with args (taken: freed here) and parses
 * its answer as JSON: new, or NULL on any failure. */
cJSON *ops_run_json(const char *op_name, cJSON *args);

/* The JSON Schema of op's parameters ({"type": "object", ...}), new. */
cJSON *ops_schema(const struct op *op);

/* ---- the parts, for other tables of commands (web.c) --------------------- */

/* Appends a word (borrowed), or one formatted into w->text.  0, or -1 when
 * there is no room. */
int op_words_add(struct op_words *w, const char *word);
int op_words_fmt(struct op_words *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Checks args against params (NULL-named end) as ops_run does; name is
 * what the message calls the caller.  0, or -1 with the reason in err. */
int ops_check(const char *name, const struct op_param *params,
	      const cJSON *args, char *err, size_t errlen);

/* Is path's file name one the agent gives its reports
 * (probing-crash-*.txt, probing-hang-*.txt)?  What a door serves of the
 * files it is asked for (mcp's resources, web's report page). */
int ops_report_name_ok(const char *path);

/*
 * Whether a door may serve the report at path (the MCP report tool and
 * resources, the web page's report): a report's name, links followed to
 * a regular file whose real name is a report's too, and either a report
 * that this user's recordings (end.json's report) or live agents
 * (process.hangs.path) name, or a report owned by this user in the
 * directory of one of those.  Never one that another user put anywhere
 * (../../tmp/probing-crash-1-2.txt): a report names source files whose
 * lines are shown (report.h says whose rights read them).  Runs
 * list_recordings, list_agents and one query per live agent (at most
 * 64).  0 with the real path in real, or -1 with why in err.
 */
int ops_report_served(const char *path, char *real, size_t reallen,
		      char *err, size_t errlen);

/* An argument as a string (NULL when not one), a boolean (1 only for
 * true), an integer (dflt when not a number). */
const char *ops_str(const cJSON *args, const char *name);
int ops_bool(const cJSON *args, const char *name);
int ops_int(const cJSON *args, const char *name, int dflt);

/* args' "duration" (dflt when absent) in *ms, at most 2 minutes.  0, or
 * -1 with the reason in err. */
int ops_duration(const cJSON *args, const char *dflt, int *ms, char *err,
		 size_t errlen);

/* Runs the command w (timeout_ms past nothing: the whole time it may
 * take) as ops_run does.  0 with *r set, or -1 with the reason in err. */
int ops_exec(const struct op_words *w, int timeout_ms, struct op_result *r,
	     char *err, size_t errlen);

#endif
