/*
 * cmd_backtrace: every thread's Python stack now (probing/backtrace),
 * without pausing the target.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "render/frames.h"

#define BT_THREADS_MAX 64 /* --thread given at most */
#define BT_VALUE_COLS_MIN                                                      \
	20 /* columns of a local's value on a TTY, at least                    \
	    */
#define BT_TEXT_BUF 4096
#define BT_NAME_BUF 1024 /* a name shown, escaped (cut with "…" past it) */

struct bt_opts {
	int locals;
	int native;
	int tasks;
	int nthreads;
	long long threads[BT_THREADS_MAX];
	enum cli_format fmt;
};

static int parse_id(const char *text, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(text, &end, 10);
	return errno || end == text || *end || *out <= 0 ? -1 : 0;
}

static cJSON *bt_args(const struct bt_opts *o, int filter)
{
	cJSON *args = cJSON_CreateObject();

	cJSON_AddBoolToObject(args, "locals", o->locals);
	if (o->native)
		cJSON_AddBoolToObject(args, "native", 1);
	if (o->tasks)
		cJSON_AddBoolToObject(args, "tasks", 1);
	if (filter && o->nthreads) {
		cJSON *ids = cJSON_AddArrayToObject(args, "threads");
		for (int i = 0; i < o->nthreads; i++)
			cJSON_AddItemToArray(
				ids, cJSON_CreateNumber((double)o->threads[i]));
	}
	return args;
}

static long long num_field(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsNumber(v) ? (long long)v->valuedouble : -1;
}

static const char *str_field(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int true_field(const cJSON *obj, const char *key)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

/* Whether thread th is one the user asked for (by Python ident or kernel
 * id); every thread when none was named. */
static int wanted(const struct bt_opts *o, const cJSON *th)
{
	long long id = num_field(th, "threadId");
	long long nid = num_field(th, "nativeId");

	if (!o->nthreads)
		return 1;
	for (int i = 0; i < o->nthreads; i++)
		if (o->threads[i] == id || o->threads[i] == nid)
			return 1;
	return 0;
}

static int count_wanted(const struct bt_opts *o, const cJSON *body)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(body, "threads");
	const cJSON *th;
	int n = 0;

	cJSON_ArrayForEach(th, threads) n += wanted(o, th);
	return n;
}

/* Locals asked for and not given: why (the reprs found no place, or
 * did not end), so --locals never shows none without a word. */
static void locals_warning(const cJSON *body)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(body, "localsError");
	char safe[512];

	if (!cJSON_IsString(e))
		return;
	fflush(stdout);
	fprintf(stderr, "probing: warning: no locals: %s\n",
		cli_text_fit(e->valuestring, 0, safe, sizeof(safe)));
}

static void gil_warning(const cJSON *body)
{
	const cJSON *gil = cJSON_GetObjectItemCaseSensitive(body, "gil");
	const cJSON *holder, *nid;
	char who[128] = "another thread";

	if (!cJSON_IsObject(gil) ||
	    !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(gil, "acquired")))
		return;
	holder = cJSON_GetObjectItemCaseSensitive(gil, "holder");
	nid = cJSON_GetObjectItemCaseSensitive(gil, "holderNativeId");
	char safe[96];
	const cJSON *call = cJSON_GetObjectItemCaseSensitive(gil, "holderCall");

	/* The agent's own call holds it: never one of the program's
	 * threads named for it. */
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gil,
							   "holderIsAgent")))
		snprintf(who, sizeof(who), "the agent's own call (%s)",
			 cJSON_IsString(call)
				 ? cli_text_fit(call->valuestring, 0, safe,
						sizeof(safe))
				 : "another request");
	else

	/* The holder's name is the program's: escaped (cli_text_fit). */
	if (cJSON_IsNumber(nid)) {
		char *h = cli_json_text(holder);
		if (h && cJSON_IsString(holder))
			snprintf(who, sizeof(who), "thread %lld \"%s\"",
				 (long long)nid->valuedouble,
				 cli_text_fit(h, 0, safe, sizeof(safe)));
		else
			snprintf(who, sizeof(who), "thread %lld",
				 (long long)nid->valuedouble);
		free(h);
	} else if (holder && !cJSON_IsNull(holder)) {
		char *h = cli_json_text(holder);
		snprintf(who, sizeof(who), "thread %s",
			 cli_text_fit(h ? h : "?", 0, safe, sizeof(safe)));
		free(h);
	}
	fflush(stdout);
	fprintf(stderr,
		"probing: warning: the GIL is held by %s; stacks were read "
		"without it (no locals)\n",
		who);
}

/* "        name = line1" and the other lines of value indented under
 * line1; each line's control characters escaped (cli_text_fit). */
static void print_lines(const char *name, const char *value, char *buf,
			size_t buflen)
{
	int indent = 8 + (int)strlen(name) + 3;
	const char *line = value;

	for (int first = 1; first || *line; first = 0) {
		size_t n = strcspn(line, "\n");
		char *one = strndup(line, n);

		cli_text_fit(one ? one : "", 0, buf, buflen);
		free(one);
		if (first)
			printf("        %s = %s\n", name, buf);
		else
			printf("%*s%s\n", indent, "", buf);
		line += n;
		if (*line == '\n')
			line++;
	}
}

static void print_locals(const cJSON *frame, int tty)
{
	const cJSON *locals = cJSON_GetObjectItemCaseSensitive(frame, "locals");
	const cJSON *l;
	char buf[BT_TEXT_BUF];

	cJSON_ArrayForEach(l, locals)
	{
		const char *name = str_field(l, "name");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(l, "value");
		char *value = cli_json_text(v);

		size_t cols = 0;

		char safe[BT_NAME_BUF];

		/* The name is the program's too (a module's globals). */
		name = cli_text_fit(name ? name : "?", 0, safe, sizeof(safe));
		if (tty) {
			/* One line each on a terminal. */
			int w = cli_term_width() - 12 - (int)strlen(name);
			cols = w < BT_VALUE_COLS_MIN ? BT_VALUE_COLS_MIN : w;
			cli_text_fit(value ? value : "?", cols, buf,
				     sizeof(buf));
			printf("        %s = %s\n", name, buf);
		} else {
			/* Elsewhere (a file, an editor) a repr of several
			 * lines (a module, a tensor) keeps them, each under
			 * the first. */
			print_lines(name, value ? value : "?", buf,
				    sizeof(buf));
		}
		free(value);
	}
}

static void print_header(const cJSON *th)
{
	const char *name = str_field(th, "name");
	const char *state = str_field(th, "state");
	long long id = num_field(th, "nativeId");
	char attrs[128] = "", buf[BT_NAME_BUF], buf2[BT_NAME_BUF];

	if (id < 0)
		id = num_field(th, "threadId");
	if (true_field(th, "isMain"))
		strcat(attrs, "main, ");
	if (true_field(th, "daemon"))
		strcat(attrs, "daemon, ");
	if (true_field(th, "holdsGil"))
		strcat(attrs, "holds GIL, ");
	if (state && strlen(state) < 64)
		strcat(attrs, state);
	else if (*attrs)
		attrs[strlen(attrs) - 2] = '\0';
	/* Names of threads, functions and files are the program's: their
	 * control characters are escaped, never sent to the terminal. */
	printf("Thread %lld \"%s\"%s%s%s\n", id,
	       cli_text_fit(name ? name : "?", 0, buf, sizeof(buf)),
	       *attrs ? " (" : "", cli_text_fit(attrs, 0, buf2, sizeof(buf2)),
	       *attrs ? ")" : "");
}

/* "  #N  func (file:line)": in colour the program's own frames bold,
 * the libraries' (Python's, torch's, packages') dim. */
static void print_python(const cJSON *fr, int depth, int color)
{
	const char *func = str_field(fr, "func");
	const char *file = str_field(fr, "file");
	const char *on = !color ? ""
			 : frame_own_code(file) ? "\033[1m"
						: "\033[2m";
	char buf[BT_NAME_BUF], buf2[BT_NAME_BUF];

	printf("  %s#%-2d %s (%s:%lld)%s\n", on, depth,
	       cli_text_fit(func ? func : "?", 0, buf, sizeof(buf)),
	       cli_text_fit(file ? file : "?", 0, buf2, sizeof(buf2)),
	       num_field(fr, "line"), *on ? "\033[22m" : "");
}

/* "  #N  func (object)", or "(object+0xOFF)" without a name; dim in
 * colour. */
static void print_native(const cJSON *fr, int depth, int color)
{
	const char *func = str_field(fr, "func");
	const char *obj = str_field(fr, "object");
	char buf[BT_NAME_BUF], buf2[BT_NAME_BUF];

	cli_text_fit(obj && *obj ? obj : "?", 0, buf2, sizeof(buf2));
	if (func && *func)
		printf("  %s#%-2d %s (%s)%s\n", color ? "\033[2m" : "", depth,
		       cli_text_fit(func, 0, buf, sizeof(buf)), buf2,
		       color ? "\033[22m" : "");
	else
		printf("  %s#%-2d ?? (%s+0x%llx)%s\n", color ? "\033[2m" : "",
		       depth, buf2, (unsigned long long)num_field(fr, "offset"),
		       color ? "\033[22m" : "");
}

/* The Python frame of "frames" (with its locals) that mixed frame fr
 * is, found by position among the Python frames and checked by name and
 * line; NULL when the two reads differ there. */
static const cJSON *with_locals(const cJSON *frames, int k, const cJSON *fr)
{
	const cJSON *f = cJSON_GetArrayItem(frames, k);
	const char *a = str_field(f, "func"), *b = str_field(fr, "func");

	return a && b && !strcmp(a, b) &&
		       num_field(f, "line") == num_field(fr, "line")
		       ? f
		       : NULL;
}

/* --native: the native frames with the Python ones where the
 * interpreter runs them (mixedFrames); 0 when the thread has none. */
static int print_mixed(const cJSON *th, int locals, int tty, int color)
{
	const cJSON *mixed = cJSON_GetObjectItemCaseSensitive(th,
							      "mixedFrames");
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
	const cJSON *fr;
	int depth = 0, k = 0;

	if (!cJSON_IsArray(mixed) || !cJSON_GetArraySize(mixed))
		return 0;
	cJSON_ArrayForEach(fr, mixed)
	{
		const char *kind = str_field(fr, "kind");

		if (kind && !strcmp(kind, "python")) {
			const cJSON *l = with_locals(frames, k++, fr);

			print_python(fr, depth++, color);
			if (locals && l)
				print_locals(l, tty);
		} else {
			print_native(fr, depth++, color);
		}
	}
	if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(th, "mixedExact")))
		printf("  (the thread ran while its stacks were read: its "
		       "Python frames may sit at the wrong native ones)\n");
	return 1;
}

static void print_thread(const cJSON *th, int locals, int native, int tty)
{
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
	const cJSON *fr;
	const char *nerr = str_field(th, "nativeError");
	int depth = 0, color = cli_color();
	char buf[BT_NAME_BUF];

	print_header(th);
	if (native && print_mixed(th, locals, tty, color))
		return;
	if (native && nerr)
		printf("  (no native frames: %s)\n",
		       cli_text_fit(nerr, 0, buf, sizeof(buf)));
	cJSON_ArrayForEach(fr, frames)
	{
		print_python(fr, depth++, color);
		if (locals)
			print_locals(fr, tty);
	}
	if (depth == 0)
		printf("  (no Python frames)\n");
	if (true_field(th, "truncated"))
		printf("  ... (more frames not shown)\n");
}

/* ---- --tasks: asyncio's tasks as trees under their loop's thread ---- */

#define BT_TASK_DEPTH 32 /* levels of a tree printed; deeper: "..." */

struct task_ix {
	double id;
	const cJSON *task;
	int shown;
};

struct task_tree {
	struct task_ix *ix; /* sorted by id */
	size_t n;
	int color;
	struct task_ix *path[BT_TASK_DEPTH + 1]; /* the root down to here */
};

static int by_id(const void *a, const void *b)
{
	double x = ((const struct task_ix *)a)->id;
	double y = ((const struct task_ix *)b)->id;

	return x < y ? -1 : x > y;
}

static struct task_ix *task_find(const struct task_tree *tr, double id)
{
	struct task_ix key = {.id = id};

	return tr->n ? bsearch(&key, tr->ix, tr->n, sizeof(*tr->ix), by_id)
		     : NULL;
}

/* "name (coro) state, awaits WHAT, N s" */
static void print_task_line(const cJSON *t, const char *lead, int last)
{
	const char *name = str_field(t, "name"), *coro = str_field(t, "coro");
	const char *state = str_field(t, "state");
	const char *awaits = str_field(t, "awaits");
	const cJSON *waited = cJSON_GetObjectItemCaseSensitive(t, "waited");
	char n[BT_NAME_BUF], c[BT_NAME_BUF], w[BT_NAME_BUF], since[48] = "";

	if (cJSON_IsNumber(waited) && waited->valuedouble >= 0.05)
		snprintf(since, sizeof(since), ", for %.1f s",
			 waited->valuedouble);
	printf("%s%s %s (%s) %s%s%s%s\n", lead, last ? "\u2514\u2500" : "\u251c\u2500",
	       cli_text_fit(name ? name : "?", 0, n, sizeof(n)),
	       cli_text_fit(coro ? coro : "?", 0, c, sizeof(c)),
	       state ? state : "?", awaits && *awaits ? ", awaits " : "",
	       awaits && *awaits ? cli_text_fit(awaits, 0, w, sizeof(w)) : "",
	       since);
}

/* A task's name, escaped; "?" when the reply has none. */
static const char *task_name(const cJSON *t, char *buf, size_t len)
{
	const char *name = str_field(t, "name");

	return cli_text_fit(name ? name : "?", 0, buf, len);
}

/* When c is on the path down to here (it awaits, through others, a task
 * that awaits it): that cycle, named as a deadlock; 1 if so. */
static int print_loop(struct task_tree *tr, struct task_ix *c,
		      const char *lead, int last, int depth)
{
	char name[BT_NAME_BUF];
	int from = depth;

	while (from >= 0 && tr->path[from] != c)
		from--;
	if (from < 0)
		return 0;
	printf("%s%s deadlock: ", lead, last ? "\u2514\u2500" : "\u251c\u2500");
	for (int k = from; k <= depth; k++)
		printf("%s awaits ", task_name(tr->path[k]->task, name,
					       sizeof(name)));
	printf("%s (a cycle of awaits: none of them can end)\n",
	       task_name(c->task, name, sizeof(name)));
	return 1;
}

static void print_task(struct task_tree *tr, struct task_ix *x,
		       const char *lead, int last, int depth)
{
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(x->task,
							       "frames");
	const cJSON *kids = cJSON_GetObjectItemCaseSensitive(x->task,
							     "awaitsTasks");
	const cJSON *fr, *k;
	char sub[512];
	int d = 0, nk = 0, i = 0;

	print_task_line(x->task, lead, last);
	x->shown = 1;
	tr->path[depth] = x;
	snprintf(sub, sizeof(sub), "%s%s", lead, last ? "   " : "\u2502  ");
	cJSON_ArrayForEach(fr, frames)
	{
		printf("%s", sub);
		print_python(fr, d++, tr->color);
	}
	cJSON_ArrayForEach(k, kids) nk += task_find(tr, k->valuedouble) != NULL;
	cJSON_ArrayForEach(k, kids)
	{
		struct task_ix *c = task_find(tr, k->valuedouble);

		if (!c)
			continue;
		i++;
		if (print_loop(tr, c, sub, i == nk, depth))
			continue;
		if (c->shown) /* awaited by another task too: shown there */
			continue;
		if (depth >= BT_TASK_DEPTH) {
			printf("%s...\n", sub);
			break;
		}
		print_task(tr, c, sub, i == nk, depth + 1);
	}
}

static void print_tasks(const cJSON *body, const cJSON *th, int color)
{
	const cJSON *tasks = cJSON_GetObjectItemCaseSensitive(body, "tasks");
	long long tid = num_field(th, "threadId");
	struct task_tree tr = {.color = color};
	const cJSON *t;
	size_t mine = 0;

	cJSON_ArrayForEach(t, tasks) tr.n++;
	tr.ix = tr.n ? calloc(tr.n, sizeof(*tr.ix)) : NULL;
	if (!tr.ix)
		return;
	tr.n = 0;
	cJSON_ArrayForEach(t, tasks)
	{
		double id = cJSON_GetNumberValue(
			cJSON_GetObjectItemCaseSensitive(t, "id"));

		/* (An id that is no number sorts as -1: the comparison
		 * stays a total order.) */
		tr.ix[tr.n].id = isfinite(id) ? id : -1;
		tr.ix[tr.n++].task = t;
		mine += num_field(t, "threadId") == tid;
	}
	qsort(tr.ix, tr.n, sizeof(*tr.ix), by_id);
	if (mine) {
		printf("  asyncio tasks of its event loop (%zu):\n", mine);
		/* Roots: awaited by no task of theirs. */
		for (size_t i = 0; i < tr.n; i++) {
			const cJSON *by = cJSON_GetObjectItemCaseSensitive(
				tr.ix[i].task, "awaitedBy");
			const cJSON *b;
			int awaited = 0;

			if (num_field(tr.ix[i].task, "threadId") != tid)
				continue;
			cJSON_ArrayForEach(b, by) awaited |=
				task_find(&tr, b->valuedouble) != NULL;
			if (!awaited)
				print_task(&tr, &tr.ix[i], "  ", 1, 0);
		}
		/* What is left awaits in a circle (named there). */
		for (size_t i = 0; i < tr.n; i++)
			if (!tr.ix[i].shown &&
			    num_field(tr.ix[i].task, "threadId") == tid)
				print_task(&tr, &tr.ix[i], "  ", 1, 0);
	}
	free(tr.ix);
}

static void tasks_note(const cJSON *body)
{
	const char *note = str_field(body, "tasksNote");
	long long left = num_field(body, "tasksLeftOut");
	char safe[512];

	fflush(stdout);
	if (note && *note)
		fprintf(stderr, "probing: no asyncio tasks shown: %s\n",
			cli_text_fit(note, 0, safe, sizeof(safe)));
	if (left > 0)
		fprintf(stderr,
			"probing: warning: %lld more asyncio tasks not shown "
			"(python.tasks has 16384 at most; the reply, 8 MiB)\n",
			left);
}

static int print_body(const struct bt_opts *o, const cJSON *body)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(body, "threads");
	const cJSON *th;
	int tty = cli_isatty(stdout), n = 0;

	if (o->fmt == CLI_FORMAT_JSON) {
		char *text = cJSON_Print(body);
		if (!text)
			return cli_error(CLI_EFAIL, "out of memory");
		printf("%s\n", text);
		free(text);
		gil_warning(body);
		return CLI_OK;
	}
	gil_warning(body);
	locals_warning(body);
	cJSON_ArrayForEach(th, threads)
	{
		if (!wanted(o, th))
			continue;
		if (n++)
			putchar('\n');
		print_thread(th, o->locals, o->native, tty);
		if (o->tasks)
			print_tasks(body, th, cli_color());
	}
	if (o->tasks)
		tasks_note(body);
	if (n == 0 && !o->nthreads)
		printf("(no Python threads)\n");
	return CLI_OK;
}

static int request(struct cmd_ctx *ctx, const struct bt_opts *o, int filter,
		   struct dap_message **resp)
{
	int rc = cli_request(ctx, "probing/backtrace", bt_args(o, filter),
			     ctx->timeout_ms, resp);

	if (rc != CLI_OK)
		return rc;
	if (!(*resp)->success)
		return CLI_EFAIL;
	if (!cJSON_IsObject((*resp)->body))
		return cli_error(CLI_EFAIL, "probing/backtrace: no body");
	return CLI_OK;
}

static int cmd_backtrace_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"locals", no_argument, NULL, 'l'},
		{"native", no_argument, NULL, 'N'},
		{"tasks", no_argument, NULL, 'a'},
		{"thread", required_argument, NULL, 'T'},
		{"format", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0},
	};
	struct bt_opts o = {.fmt = ctx->format};
	struct dap_message *resp = NULL;
	int c, rc;

	while ((c = getopt_long(argc, argv, ":lT:f:", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.locals = 1;
			break;
		case 'N':
			o.native = 1;
			break;
		case 'a':
			o.tasks = 1;
			break;
		case 'T':
			if (o.nthreads == BT_THREADS_MAX)
				return cli_usage_error(&cmd_backtrace_entry,
						       "too many --thread");
			if (parse_id(optarg, &o.threads[o.nthreads++]))
				return cli_usage_error(
					&cmd_backtrace_entry,
					"--thread takes a thread id, not '%s'",
					optarg);
			break;
		case 'f':
			if (cli_format_parse(optarg, &o.fmt))
				return CLI_EUSAGE;
			if (o.fmt == CLI_FORMAT_CSV)
				return cli_usage_error(&cmd_backtrace_entry,
						       "backtrace prints text "
						       "or json, not csv");
			break;
		default:
			return cli_option_error(&cmd_backtrace_entry, c, argc,
						argv);
		}
	}
	if (cli_args_done(&cmd_backtrace_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (o.fmt == CLI_FORMAT_CSV)
		o.fmt = CLI_FORMAT_TABLE;
	rc = cli_connect(ctx, 1);
	if (rc != CLI_OK)
		return rc;
	rc = request(ctx, &o, 1, &resp);
	/* --thread may name a kernel id, which the agent's filter (Python
	 * idents) does not know: ask for every thread and pick here. */
	if (o.nthreads && (rc == CLI_EFAIL ||
			   (rc == CLI_OK && !count_wanted(&o, resp->body)))) {
		if (resp)
			dap_message_free(resp);
		resp = NULL;
		rc = request(ctx, &o, 0, &resp);
	}
	if (rc == CLI_EFAIL && resp && !resp->success)
		rc = cli_error(CLI_EFAIL, "%s", cli_resp_message(resp));
	else if (rc == CLI_OK && o.nthreads && !count_wanted(&o, resp->body))
		rc = cli_error(CLI_EFAIL, "no such thread: %lld%s",
			       o.threads[0],
			       o.nthreads > 1 ? " (nor the others)" : "");
	else if (rc == CLI_OK)
		rc = print_body(&o, resp->body);
	if (resp)
		dap_message_free(resp);
	return rc;
}

const struct cmd_entry cmd_backtrace_entry = {
	.name = "backtrace",
	.alias = "bt dump",
	.usage = "[--locals] [--native] [--tasks] [--thread ID]... [-f json]",
	.summary = "Show every thread's Python stack, innermost frame first",
	.help = "Reads the stacks now, without pausing the target.  Each "
		"thread is shown as\n"
		"  Thread 4242 \"MainThread\" (main, running)\n"
		"    #0  train (/app/train.py:12)\n"
		"with the kernel thread id.  When the agent could not take the "
		"GIL in time\n"
		"(a thread holds it in C code), the stacks are read without "
		"it, without\n"
		"locals, and a warning on stderr names the thread holding "
		"it.\n"
		"\n"
		"With --native each thread's C/C++ frames are shown too, "
		"innermost first,\n"
		"with its Python frames where the interpreter runs them (as "
		"py-spy dump\n"
		"--native):\n"
		"    #0  SHA256_Update (libcrypto.so.3)\n"
		"    #1  ?? (_hashlib.cpython-311-x86_64-linux-gnu.so+0x9a2c)\n"
		"    #2  digest (/app/train.py:8)\n"
		"Each thread is stopped for the instant of a signal; one "
		"that blocks\n"
		"signals is shown without native frames, with the reason.\n"
		"\n"
		"With --tasks each thread running an asyncio event loop is "
		"followed by its\n"
		"tasks, as trees of who awaits whom (a task above the tasks "
		"it awaits),\n"
		"each with its coroutine chain, innermost first, what it "
		"waits for and\n"
		"for how long (since the agent first saw it wait on the same "
		"thing):\n"
		"  asyncio tasks of its event loop (3):\n"
		"  \u2514\u2500 Task-1 (main) pending, awaits gather of 2 (2 "
		"pending)\n"
		"     #0  main (/app/serve.py:40)\n"
		"     \u251c\u2500 worker-0 (worker) pending, awaits asyncio "
		"Queue.get, for 12.0 s\n"
		"Tasks awaiting each other in a circle are named as a "
		"deadlock.  See\n"
		"docs/asyncio.md.\n"
		"\n"
		"Options:\n"
		"  -l, --locals         show each frame's local variables "
		"(name = repr)\n"
		"      --native         show the C/C++ frames too (above)\n"
		"      --tasks          show asyncio's tasks under their "
		"loop's thread (above)\n"
		"  -T, --thread ID      only this thread (kernel id or Python "
		"ident);\n"
		"                       may be repeated\n"
		"  -f, --format json    print the agent's reply as JSON\n",
	.flags = CMD_TARGET | CMD_PAGED,
	.exec = cmd_backtrace_exec,
};
