/*
 * cmd_top: the functions where the target spends its time, refreshing in
 * place (as py-spy top); on a pipe a table per interval, with --once one
 * table at the end.
 *
 * No measurement of its own: the sampler's samples (probing/profile)
 * read back per interval as folded stacks (probing/flamegraph, the
 * interval's window) and added up per function (folded_top).  The run it
 * starts has a duration that it extends at every refresh (action
 * extend): killed, or its terminal closed, top leaves a run that ends by
 * itself within an interval and TOP_LEASE_MS; on the way out it stops it.  A profile
 * already running (perf --cc, the web page's) is read as it is and left
 * running.
 *
 * The terminal: the alternate screen, no cursor, keys without echo while
 * it runs; all of it given back on every way out (q, Ctrl-C, SIGTERM,
 * SIGHUP, an error).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "subprocs.h"
#include "render/folded.h"

#define TOP_INTERVAL_MS 1000
#define TOP_ONCE_MS 5000      /* --once without -d */
#define TOP_LEASE_MS 10000    /* the run outlives a vanished top by this */
#define TOP_FUNCS_MAX 100000  /* functions remembered across refreshes */
#define TOP_RENDER_MS 30000   /* one interval's read */
#define TOP_HEADER_LINES 3

enum top_sort { BY_OWN, BY_TOTAL, BY_OWN_TIME, BY_TOTAL_TIME };

static const char *const sort_names[] = {"%own", "%total", "own time",
					 "total time"};

struct top_opts {
	int interval_ms, duration_ms, hz, rows;
	int native, gil, idle, once, tasks;
	long long thread;
	enum top_sort sort;
	enum cli_format fmt;
};

/* A function's samples: in the last interval, and since top began. */
struct top_fn {
	char *label;
	uint64_t own, total, own_all, total_all;
};

/* A process watched: the target, or with --subprocesses one of its
 * children too. */
struct source {
	struct cmd_ctx *ctx; /* connected */
	double since;	     /* its next window's start */
	int started, hz;     /* started: the run is ours */
	const char *label;   /* its root frame (--subprocesses), or NULL */
	uint64_t task_samples; /* --tasks: its samples that ran a task */
	char tasks_note[400];  /* --tasks: why they may not, from its agent */
};

struct top {
	struct source *src; /* the target first */
	size_t nsrc;
	struct top_fn *fns; /* sorted by label between refreshes */
	size_t n, cap;
	uint64_t samples, samples_all; /* the interval's, all */
	double since, until;	       /* the next window's start; the
					  last one's end */
	double span;		       /* the last window's length */
	double began;		       /* the first window's start */
	int hz;			       /* the target's rate */
};

static double num(const cJSON *o, const char *key, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

/* probing/profile {action, ...}; *body (may be NULL) the reply's body,
 * the caller's to free.  CLI_OK or an exit code after saying why. */
static int profile(struct cmd_ctx *ctx, cJSON *args, cJSON **body)
{
	struct dap_message *resp = NULL;
	int rc = cli_request_ok(ctx, "probing/profile", args, ctx->timeout_ms,
				&resp);

	if (rc == CLI_OK && body)
		*body = cJSON_Duplicate(resp->body, 1);
	if (resp)
		dap_message_free(resp);
	return rc;
}

static cJSON *action(const char *name)
{
	cJSON *a = cJSON_CreateObject();

	cJSON_AddStringToObject(a, "action", name);
	return a;
}

/* How long a run of ours goes on past a refresh (or the start): the next
 * refresh, and the lease. */
static int lease_ms(const struct top_opts *o)
{
	return o->interval_ms + TOP_LEASE_MS;
}

/* Starts a run of ours in a process, or takes the one running; t->since
 * is where its first window begins. */
static int begin_one(const struct top_opts *o, struct source *t)
{
	struct cmd_ctx *ctx = t->ctx;
	cJSON *st = NULL, *args;
	int rc = profile(ctx, action("status"), &st);

	if (rc != CLI_OK)
		return rc;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "running"))) {
		int native = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(st, "native"));

		t->hz = (int)num(st, "hz", 0);
		if ((o->native && !native) || (o->hz && o->hz != t->hz))
			cli_error(CLI_OK,
				  "note: the profiler already runs at %d Hz%s; "
				  "its samples are used as they are",
				  t->hz, native ? " with native stacks" : "");
		t->since = num(st, "now", 0);
		cJSON_Delete(st);
		return CLI_OK;
	}
	cJSON_Delete(st);
	st = NULL;
	args = action("start");
	cJSON_AddNumberToObject(args, "durationMs", lease_ms(o));
	if (o->hz)
		cJSON_AddNumberToObject(args, "hz", o->hz);
	if (o->native)
		cJSON_AddBoolToObject(args, "native", 1);
	if (o->idle)
		cJSON_AddBoolToObject(args, "idle", 1);
	rc = profile(ctx, args, &st);
	if (rc != CLI_OK)
		return rc;
	t->started = 1;
	t->hz = (int)num(st, "hz", 100);
	t->since = num(st, "startedAt", 0);
	cJSON_Delete(st);
	return CLI_OK;
}

static void stop(struct top *t);

/* Every process's run: the target's failing fails top, a child's is said
 * and the child left out. */
static int begin(const struct top_opts *o, struct top *t)
{
	size_t kept = 0;

	for (size_t i = 0; i < t->nsrc; i++) {
		int rc = begin_one(o, &t->src[i]);

		if (rc != CLI_OK && i == 0) {
			t->nsrc = 0;
			return rc;
		}
		if (rc == CLI_OK)
			t->src[kept++] = t->src[i];
		else
			cli_error(CLI_OK, "note: %s left out",
				  t->src[i].label);
	}
	t->nsrc = kept;
	t->hz = t->src[0].hz;
	t->since = t->src[0].since;
	return CLI_OK;
}

static int by_label(const void *a, const void *b)
{
	return strcmp(((const struct top_fn *)a)->label,
		      ((const struct top_fn *)b)->label);
}

/* The entry of label among the first n (sorted by label), or NULL. */
static struct top_fn *find(struct top *t, size_t n, const char *label)
{
	struct top_fn key = {.label = (char *)label};

	return n ? bsearch(&key, t->fns, n, sizeof(*t->fns), by_label) : NULL;
}

/* Adds an interval's folded stacks to t.  0 or -ENOMEM / -E2BIG. */
static int merge(struct top *t, const struct folded_top *f)
{
	size_t old = t->n; /* sorted; new labels go after, sorted at the end */

	for (size_t i = 0; i < t->n; i++)
		t->fns[i].own = t->fns[i].total = 0;
	for (size_t i = 0; i < f->n; i++) {
		/* folded_top gives each label once: a new one is not among
		 * those added by this loop. */
		struct top_fn *e = find(t, old, f->fns[i].label);

		if (!e) {
			if (t->n >= TOP_FUNCS_MAX)
				return -E2BIG;
			if (t->n == t->cap) {
				size_t cap = t->cap ? 2 * t->cap : 256;
				void *p = realloc(t->fns, cap * sizeof(*t->fns));

				if (!p)
					return -ENOMEM;
				t->fns = p;
				t->cap = cap;
			}
			e = &t->fns[t->n];
			memset(e, 0, sizeof(*e));
			if (!(e->label = strdup(f->fns[i].label)))
				return -ENOMEM;
			t->n++;
		}
		e->own = f->fns[i].self;
		e->total = f->fns[i].total;
		e->own_all += e->own;
		e->total_all += e->total;
	}
	if (t->n)
		qsort(t->fns, t->n, sizeof(*t->fns), by_label);
	t->samples = f->samples;
	t->samples_all += f->samples;
	return 0;
}

/* One process's samples since its last window, as folded text (heap),
 * each line under its label when it has one; the window's bounds in
 * *since, *until.  CLI_OK or an exit code after saying why. */
static int read_one(const struct top_opts *o, struct source *s, char **text,
		    double *since, double *until)
{
	struct dap_message *resp = NULL;
	cJSON *args = cJSON_CreateObject();
	const cJSON *data;
	size_t len = 0;
	FILE *out;
	int rc;

	cJSON_AddStringToObject(args, "format", "folded");
	cJSON_AddNumberToObject(args, "since", s->since);
	cJSON_AddBoolToObject(args, "idle", o->idle);
	cJSON_AddBoolToObject(args, "gil", o->gil);
	if (o->tasks)
		cJSON_AddBoolToObject(args, "tasks", 1);
	if (o->thread)
		cJSON_AddNumberToObject(args, "thread", (double)o->thread);
	rc = cli_request_ok(s->ctx, "probing/flamegraph", args, TOP_RENDER_MS,
			    &resp);
	if (rc != CLI_OK)
		return rc;
	data = cJSON_GetObjectItemCaseSensitive(resp->body, "data");
	if (o->tasks) {
		const cJSON *why = cJSON_GetObjectItemCaseSensitive(
			resp->body, "tasksNote");

		s->task_samples += (uint64_t)num(resp->body, "taskSamples", 0);
		snprintf(s->tasks_note, sizeof(s->tasks_note), "%s",
			 cJSON_IsString(why) ? why->valuestring : "");
	}
	*until = num(resp->body, "until", s->since);
	*since = num(resp->body, "since", s->since);
	out = cJSON_IsString(data) ? open_memstream(text, &len) : NULL;
	if (out && !s->label) {
		fputs(data->valuestring, out);
	} else if (out) {
		/* "a;b N" lines: each under the process's frame. */
		for (const char *l = data->valuestring; *l;) {
			const char *nl = strchr(l, '\n');
			size_t n = nl ? (size_t)(nl - l) : strlen(l);

			if (n)
				fprintf(out, "%s;%.*s\n", s->label, (int)n, l);
			l += n + (nl != NULL);
		}
	}
	if (out)
		fclose(out);
	dap_message_free(resp);
	if (!out)
		return cli_error(CLI_EFAIL, "the samples did not come");
	/* The next window starts where this one ended: no sample twice. */
	s->since = *until + 1e-6;
	return CLI_OK;
}

/* One interval: the samples since the last, of every process, read and
 * added up. */
static int refresh(const struct top_opts *o, struct top *t)
{
	struct folded_top f = {0};
	char *all = NULL, err[256];
	size_t len = 0;
	FILE *out = open_memstream(&all, &len);
	int rc = out ? CLI_OK : cli_error(CLI_EFAIL, "out of memory");

	for (size_t i = 0; i < t->nsrc && rc == CLI_OK; i++) {
		char *text = NULL;
		double since = 0, until = 0;

		rc = read_one(o, &t->src[i], &text, &since, &until);
		if (rc == CLI_OK && text)
			fputs(text, out);
		free(text);
		if (rc == CLI_OK && i == 0) {
			t->until = until;
			t->span = until - since;
			if (!t->began)
				t->began = t->since;
			t->since = t->src[0].since;
		}
	}
	if (out)
		fclose(out);
	if (rc == CLI_OK) {
		rc = folded_top(all ? all : "", &f, err, sizeof(err));
		if (rc == 0)
			rc = merge(t, &f);
		folded_top_release(&f);
		if (rc)
			rc = cli_error(CLI_EFAIL, "the samples do not add up: %s",
				       rc == -ENOMEM ? "out of memory"
				       : rc == -E2BIG
					       ? "too many functions"
					       : "a folded line did not read");
	}
	free(all);
	return rc;
}

static enum top_sort sort_by;

static int by_sort(const void *pa, const void *pb)
{
	const struct top_fn *a = pa, *b = pb;
	uint64_t x = 0, y = 0;

	switch (sort_by) {
	case BY_OWN:
		x = a->own, y = b->own;
		break;
	case BY_TOTAL:
		x = a->total, y = b->total;
		break;
	case BY_OWN_TIME:
		x = a->own_all, y = b->own_all;
		break;
	case BY_TOTAL_TIME:
		x = a->total_all, y = b->total_all;
		break;
	}
	if (x != y)
		return x < y ? 1 : -1;
	if (a->total_all != b->total_all)
		return a->total_all < b->total_all ? 1 : -1;
	return strcmp(a->label, b->label);
}

static void pct(char *out, size_t len, uint64_t n, uint64_t of)
{
	snprintf(out, len, "%.1f", of ? 100.0 * (double)n / (double)of : 0.0);
}

static void secs(char *out, size_t len, uint64_t n, int hz)
{
	snprintf(out, len, "%.2fs", hz > 0 ? (double)n / hz : 0.0);
}

/* The table of the rows first functions (all: rows <= 0), in o->sort;
 * functions with no sample at all this interval and before are left
 * out. */
static struct cli_table *table(const struct top_opts *o, struct top *t,
			       int rows)
{
	static const char *const names[] = {"%own",	  "%total",
					    "own time",	  "total time",
					    "function",	  "where"};
	struct cli_table *tab = cli_table_new(6, names);
	struct top_fn *v;
	int shown = 0;

	if (!tab || !t->n)
		return tab;
	if (!(v = malloc(t->n * sizeof(*v)))) {
		cli_table_free(tab);
		return NULL;
	}
	memcpy(v, t->fns, t->n * sizeof(*v));
	sort_by = o->sort;
	qsort(v, t->n, sizeof(*v), by_sort);
	for (size_t i = 0; i < t->n && (rows <= 0 || shown < rows); i++) {
		char c[6][512];
		const char *row[6];

		if (!v[i].total_all)
			continue;
		pct(c[0], sizeof(c[0]), v[i].own, t->samples);
		pct(c[1], sizeof(c[1]), v[i].total, t->samples);
		secs(c[2], sizeof(c[2]), v[i].own_all, t->hz);
		secs(c[3], sizeof(c[3]), v[i].total_all, t->hz);
		folded_label_split(v[i].label, c[4], sizeof(c[4]), c[5],
				   sizeof(c[5]));
		for (int k = 0; k < 6; k++)
			row[k] = c[k];
		cli_table_add(tab, row);
		shown++;
	}
	free(v);
	for (int k = 0; k < 4; k++)
		cli_table_align_right(tab, k);
	cli_table_upper_header(tab);
	return tab;
}

/* "100 Hz, on CPU, native, GIL holders only, asyncio tasks as rows" */
static void what(const struct top_opts *o, const struct top *t, char *out,
		 size_t len)
{
	const char *note = "";
	uint64_t in_tasks = 0;

	/* (with --subprocesses, the first process's note that has one) */
	for (size_t i = 0; i < t->nsrc; i++) {
		in_tasks += t->src[i].task_samples;
		if (t->src[i].tasks_note[0] && !note[0])
			note = t->src[i].tasks_note;
	}
	snprintf(out, len, "%d Hz, %s%s%s%s%s%s", t->hz,
		 o->idle ? "idle and GIL waits included" : "on CPU",
		 o->native ? ", native" : "",
		 o->gil ? ", GIL holders only" : "",
		 !o->tasks	   ? ""
		 : in_tasks	   ? ", asyncio tasks as rows"
				   : ", asyncio tasks as rows: no sample ran "
				     "one yet",
		 o->tasks && note[0] ? "; " : "", o->tasks ? note : "");
}

/* ---- the terminal ------------------------------------------------------ */

static struct termios saved;
static int raw_on, screen_on;
static volatile sig_atomic_t got_signal, resized;

static void on_signal(int sig)
{
	if (sig == SIGWINCH)
		resized = 1;
	else
		got_signal = sig;
}

static void screen_leave(void)
{
	if (screen_on) {
		/* Cursor back, the screen as it was. */
		fputs("\033[?25h\033[?1049l", stdout);
		fflush(stdout);
		screen_on = 0;
	}
	if (raw_on) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
		raw_on = 0;
	}
}

static void screen_enter(void)
{
	struct sigaction sa;
	struct termios raw;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGWINCH, &sa, NULL);
	atexit(screen_leave);
	if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
		raw = saved;
		/* Keys one at a time, not echoed; Ctrl-C still a signal. */
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0)
			raw_on = 1;
	}
	fputs("\033[?1049h\033[?25l", stdout);
	fflush(stdout);
	screen_on = 1;
}

static int term_rows(void)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
		return ws.ws_row;
	return 24;
}

/* Draws one screen: the header, the table cut to the terminal's rows, a
 * line per row ending the line's old text. */
static void draw(struct cmd_ctx *ctx, const struct top_opts *o, struct top *t,
		 const char *status)
{
	int height = term_rows();
	/* The boxed table's own lines: three borders and its header; and
	 * the last line left empty (a newline there would scroll). */
	int rows = height - TOP_HEADER_LINES - 5;
	struct cli_table *tab = table(o, t, rows > 1 ? rows : 1);
	char desc[128], *buf = NULL, *line, *save = NULL, head[512];
	char kids[48] = "";
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int used = 0;

	what(o, t, desc, sizeof(desc));
	if (mem && tab)
		cli_table_print(tab, mem, CLI_FORMAT_TABLE, 1);
	if (mem)
		fclose(mem);
	fputs("\033[H", stdout);
	if (t->nsrc > 1)
		snprintf(kids, sizeof(kids), " and %zu child process%s",
			 t->nsrc - 1, t->nsrc == 2 ? "" : "es");
	snprintf(head, sizeof(head),
		 "probing top: %s%s%s — %s — %llu samples in %.1f s (%.1f s "
		 "in all)",
		 ctx->target && strspn(ctx->target, "0123456789") ==
					strlen(ctx->target)
			 ? "pid "
			 : "",
		 ctx->target ? ctx->target : "?", kids, desc,
		 (unsigned long long)t->samples, t->span,
		 t->until - t->began);
	printf("%s\033[K\n", cli_text_fit(head, (size_t)cli_term_width(),
					   (char[600]){0}, 600));
	printf("sorted by %s — 1 %%own, 2 %%total, 3 own time, 4 total "
	       "time; q quits\033[K\n",
	       sort_names[o->sort]);
	printf("%s\033[K\n", status ? status : "");
	used = TOP_HEADER_LINES;
	for (line = buf ? strtok_r(buf, "\n", &save) : NULL;
	     line && used < height - 1;
	     line = strtok_r(NULL, "\n", &save)) {
		printf("%s\033[K\n", line);
		used++;
	}
	if (!t->n)
		printf("(no samples yet)\033[K\n");
	fputs("\033[J", stdout);
	fflush(stdout);
	free(buf);
	cli_table_free(tab);
}

/* ---- the three ways of running ------------------------------------------ */

/* Keeps our run going past the next refresh; a run that ended means the
 * target's profile was stopped by someone else. */
static int lease(const struct top_opts *o, struct top *t)
{
	int rc = CLI_OK;

	for (size_t i = 0; i < t->nsrc && rc == CLI_OK; i++) {
		cJSON *args;

		if (!t->src[i].started)
			continue;
		args = action("extend");
		cJSON_AddNumberToObject(args, "durationMs", lease_ms(o));
		rc = profile(t->src[i].ctx, args, NULL);
	}
	return rc;
}

static void stop(struct top *t)
{
	for (size_t i = 0; i < t->nsrc; i++) {
		if (t->src[i].started)
			profile(t->src[i].ctx, action("stop"), NULL);
		t->src[i].started = 0;
	}
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits up to ms for a key (a terminal in raw mode) or a signal; returns
 * the key, 0 for none. */
static int wait_key(int ms)
{
	struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
	unsigned char c;

	if (!raw_on) {
		struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

		nanosleep(&ts, NULL); /* a signal cuts it short */
		return 0;
	}
	if (poll(&p, 1, ms) == 1 && read(STDIN_FILENO, &c, 1) == 1)
		return c;
	return 0;
}

static int live(struct top_opts *o, struct top *t)
{
	struct cmd_ctx *ctx = t->src[0].ctx;

	long long next = now_ms() + o->interval_ms;
	long long end = o->duration_ms ? now_ms() + o->duration_ms : 0;
	int rc = CLI_OK, err_fd = dup(STDERR_FILENO);
	FILE *said = tmpfile();

	/* What goes wrong is said on stderr, which the alternate screen
	 * would take away with it: kept, and said again after. */
	if (said && err_fd >= 0)
		dup2(fileno(said), STDERR_FILENO);
	screen_enter();
	draw(ctx, o, t, "reading the first samples...");
	while (!cli_sigint && !got_signal) {
		long long left = next - now_ms();
		int key;

		if (left > 0) {
			key = wait_key((int)left);
			if (key == 'q' || key == 'Q')
				break;
			if (key >= '1' && key <= '4') {
				o->sort = (enum top_sort)(key - '1');
				draw(ctx, o, t, NULL);
			} else if (resized) {
				resized = 0;
				draw(ctx, o, t, NULL);
			}
			continue;
		}
		next += o->interval_ms;
		if ((rc = lease(o, t)) != CLI_OK ||
		    (rc = refresh(o, t)) != CLI_OK)
			break;
		draw(ctx, o, t, NULL);
		if (end && now_ms() >= end)
			break;
	}
	screen_leave();
	stop(t);
	if (said && err_fd >= 0) {
		char buf[4096];
		size_t n;

		fflush(stderr);
		dup2(err_fd, STDERR_FILENO);
		rewind(said);
		while ((n = fread(buf, 1, sizeof(buf), said)) > 0)
			fwrite(buf, 1, n, stderr);
	}
	if (said)
		fclose(said);
	if (err_fd >= 0)
		close(err_fd);
	if (got_signal == SIGTERM || got_signal == SIGHUP) {
		/* The terminal is back: die of it, as without top. */
		signal(got_signal, SIG_DFL);
		raise(got_signal);
	}
	return rc;
}

/* Not a terminal: a table per interval, each after a line that says
 * which. */
static int plain(struct top_opts *o, struct top *t)
{
	long long end = o->duration_ms ? now_ms() + o->duration_ms : 0;
	int rc = CLI_OK;
	char desc[128];

	what(o, t, desc, sizeof(desc));
	while (!cli_sigint) {
		struct cli_table *tab;

		wait_key(o->interval_ms);
		if (cli_sigint)
			break;
		if ((rc = lease(o, t)) != CLI_OK ||
		    (rc = refresh(o, t)) != CLI_OK)
			break;
		if (!(tab = table(o, t, o->rows))) {
			rc = cli_error(CLI_EFAIL, "out of memory");
			break;
		}
		printf("# %.1f s: %llu samples (%s)\n", t->until - t->began,
		       (unsigned long long)t->samples, desc);
		cli_table_print(tab, stdout, o->fmt, 0);
		putchar('\n');
		cli_table_free(tab);
		if (fflush(stdout) == EOF) /* the reader is gone */
			break;
		if (end && now_ms() >= end)
			break;
	}
	stop(t);
	return rc;
}

/* --once: the whole duration as one interval, one table. */
static int once(struct top_opts *o, struct top *t)
{
	struct cli_table *tab;
	int rc = CLI_OK;

	long long end = now_ms() + o->duration_ms;

	/* In slices, extending the run at each: a killed top --once -d 10m
	 * leaves a run that ends as any other's. */
	while (!cli_sigint && now_ms() < end) {
		long long left = end - now_ms();

		wait_key(left < o->interval_ms ? (int)left : o->interval_ms);
		if ((rc = lease(o, t)) != CLI_OK) {
			stop(t);
			return rc;
		}
	}
	rc = refresh(o, t);
	stop(t);
	if (rc != CLI_OK)
		return rc;
	if (!(tab = table(o, t, o->rows)))
		return cli_error(CLI_EFAIL, "out of memory");
	cli_table_print(tab, stdout, o->fmt, cli_isatty(stdout));
	cli_table_free(tab);
	if (cli_isatty(stdout) && o->fmt <= CLI_FORMAT_TABLE) {
		char desc[128];

		what(o, t, desc, sizeof(desc));
		printf("%llu samples over %.1f s (%s)\n",
		       (unsigned long long)t->samples, t->until - t->began,
		       desc);
	}
	return CLI_OK;
}

/* The children's own connections (--subprocesses), as many as sp's. */
static struct cmd_ctx sp_ctx[SUBPROCS_MAX];

static int source_of_target(struct cmd_ctx *ctx, struct top *t)
{
	int rc = cli_connect(ctx, 1);

	if (rc != CLI_OK)
		return rc;
	if (ctx->rec)
		return cli_error(CLI_EUSAGE,
				 "top watches a running process; for a "
				 "recording: probing -t %s flamegraph",
				 ctx->target ? ctx->target : "PID");
	t->src = calloc(1, sizeof(*t->src));
	if (!t->src)
		return cli_error(CLI_EFAIL, "out of memory");
	t->src[0].ctx = ctx;
	t->nsrc = 1;
	return CLI_OK;
}

/* The target and its children with agents (subprocs.h), each on its own
 * connection; a child that does not answer is said and left out. */
static int sources_of_children(struct cmd_ctx *ctx, int inject,
			       struct subprocs **out, struct top *t)
{
	struct subprocs *sp = calloc(1, sizeof(*sp));
	int rc;

	*out = sp;
	t->src = sp ? calloc(SUBPROCS_MAX, sizeof(*t->src)) : NULL;
	if (!sp || !t->src)
		return cli_error(CLI_EFAIL, "out of memory");
	rc = subprocs_find(ctx, inject, sp);
	for (size_t i = 0; rc == CLI_OK && i < sp->n; i++) {
		sp_ctx[i] = *ctx;
		sp_ctx[i].target = sp->nodes[i].addr;
		sp_ctx[i].client = NULL;
		sp_ctx[i].init_body = NULL;
		sp_ctx[i].rec = NULL;
		if (cli_connect(&sp_ctx[i], 1) != CLI_OK || sp_ctx[i].rec) {
			if (i == 0)
				return CLI_ENOAGENT; /* said */
			cli_error(CLI_OK, "note: %s left out", sp->labels[i]);
			continue;
		}
		t->src[t->nsrc].ctx = &sp_ctx[i];
		t->src[t->nsrc].label = sp->labels[i];
		t->nsrc++;
	}
	return rc;
}

static int cmd_top_exec(struct cmd_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{"interval", required_argument, NULL, 'i'},
		{"duration", required_argument, NULL, 'd'},
		{"once", no_argument, NULL, 'O'},
		{"hz", required_argument, NULL, 'H'},
		{"native", no_argument, NULL, 'N'},
		{"gil", no_argument, NULL, 'G'},
		{"idle", no_argument, NULL, 'I'},
		{"tasks", no_argument, NULL, 'K'},
		{"sort", required_argument, NULL, 's'},
		{"thread", required_argument, NULL, 'T'},
		{"top", required_argument, NULL, 'n'},
		{"format", required_argument, NULL, 'f'},
		{"subprocesses", no_argument, NULL, 'S'},
		{"inject", no_argument, NULL, 'J'},
		{NULL, 0, NULL, 0},
	};
	struct top_opts o = {.interval_ms = TOP_INTERVAL_MS,
			     .fmt = ctx->format};
	struct top t = {0};
	struct subprocs *sp = NULL;
	int c, rc, subprocesses = 0, inject = 0;

	while ((c = getopt_long(argc, argv, ":i:d:n:T:f:", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'i':
			if (cli_parse_duration(optarg, 1000, &o.interval_ms) <
				    0 ||
			    o.interval_ms < 100)
				return cli_usage_error(&cmd_top_entry,
						       "--interval must be "
						       "100ms or more, like "
						       "1s or 500ms");
			break;
		case 'd':
			if (cli_parse_duration(optarg, 1000, &o.duration_ms) <
			    0)
				return cli_usage_error(&cmd_top_entry,
						       "--duration must be "
						       CLI_DURATION_HELP);
			break;
		case 'O':
			o.once = 1;
			break;
		case 'H':
			if (cli_parse_ms(optarg, &o.hz) < 0 || o.hz > 10000)
				return cli_usage_error(&cmd_top_entry,
						       "--hz must be in [1, "
						       "10000]");
			break;
		case 'N':
			o.native = 1;
			break;
		case 'G':
			o.gil = 1;
			break;
		case 'I':
			o.idle = 1;
			break;
		case 'K':
			o.tasks = 1;
			break;
		case 's':
			if (!strcmp(optarg, "own"))
				o.sort = BY_OWN;
			else if (!strcmp(optarg, "total"))
				o.sort = BY_TOTAL;
			else if (!strcmp(optarg, "own-time"))
				o.sort = BY_OWN_TIME;
			else if (!strcmp(optarg, "total-time"))
				o.sort = BY_TOTAL_TIME;
			else
				return cli_usage_error(&cmd_top_entry,
						       "--sort is own, total, "
						       "own-time or "
						       "total-time, not '%s'",
						       optarg);
			break;
		case 'T':
			o.thread = atoll(optarg);
			if (o.thread <= 0 ||
			    strspn(optarg, "0123456789") != strlen(optarg))
				return cli_usage_error(&cmd_top_entry,
						       "--thread takes a "
						       "thread's Python ident "
						       "(threading.get_ident"
						       "()), not '%s'",
						       optarg);
			break;
		case 'n':
			if (cli_parse_ms(optarg, &o.rows) < 0)
				return cli_usage_error(&cmd_top_entry,
						       "--top must be a "
						       "positive number");
			break;
		case 'f':
			if (cli_format_parse(optarg, &o.fmt))
				return CLI_EUSAGE;
			break;
		case 'S':
			subprocesses = 1;
			break;
		case 'J':
			inject = 1;
			break;
		default:
			return cli_option_error(&cmd_top_entry, c, argc, argv);
		}
	}
	if (cli_args_done(&cmd_top_entry, argc, argv) != CLI_OK)
		return CLI_EUSAGE;
	if (o.once && !o.duration_ms)
		o.duration_ms = TOP_ONCE_MS;
	if (inject && !subprocesses)
		return cli_usage_error(&cmd_top_entry,
				       "--inject goes with --subprocesses");
	if (subprocesses && o.thread)
		return cli_usage_error(&cmd_top_entry,
				       "--thread is one process's thread: not "
				       "with --subprocesses");
	rc = subprocesses ? sources_of_children(ctx, inject, &sp, &t)
			  : source_of_target(ctx, &t);
	if (rc != CLI_OK)
		return rc;
	cli_sigint_catch();
	signal(SIGPIPE, SIG_IGN); /* a reader gone: fflush says so */
	rc = begin(&o, &t);
	if (rc == CLI_OK && o.once)
		rc = once(&o, &t);
	else if (rc == CLI_OK && cli_isatty(stdout) &&
		 o.fmt == CLI_FORMAT_AUTO)
		rc = live(&o, &t);
	else if (rc == CLI_OK)
		rc = plain(&o, &t);
	for (size_t i = 0; i < t.n; i++)
		free(t.fns[i].label);
	free(t.fns);
	/* The children's connections are ours; the target's, the caller's. */
	for (size_t i = 0; sp && i < sp->n; i++)
		if (sp_ctx[i].client)
			cli_close(&sp_ctx[i]);
	free(sp);
	free(t.src);
	return rc; /* Ctrl-C is how a live view ends: not an error */
}

const struct cmd_entry cmd_top_entry = {
	.name = "top",
	.alias = NULL,
	.usage = "[--interval D] [--native] [--gil] [--idle] [--tasks] "
		 "[--sort KEY] "
		 "[--thread ID] [--once] [-d D] [-n N] [-f FORMAT] "
		 "[--subprocesses [--inject]]",
	.summary = "Where the target spends its time, refreshing in place",
	.help = "Samples the target (the profiler of `flamegraph`) and shows "
		"the functions\n"
		"it spends its time in, refreshed every second, as py-spy "
		"top does:\n"
		"  %OWN        share of the last interval's samples in the "
		"function itself\n"
		"  %TOTAL      share in it or in what it calls\n"
		"  OWN TIME    seconds in the function itself since top "
		"began\n"
		"  TOTAL TIME  seconds in it or below it since top began\n"
		"Every thread's samples count (per thread: --thread).  Keys: "
		"1 to 4 sort by\n"
		"the columns in that order, q quits (so does Ctrl-C); the "
		"terminal is given\n"
		"back as it was.  Not on a terminal (a pipe, a file, -f), a "
		"table per\n"
		"interval, each after a '# SECONDS: N samples' line; with "
		"--once, one table\n"
		"of the whole duration.\n"
		"\n"
		"The profile top starts ends with it (and by itself within "
		"an interval and\n"
		"10 s when top is killed); one already running (perf --cc, "
		"probing web) is\n"
		"read as it is and left running.\n"
		"\n"
		"Options:\n"
		"  -i, --interval D     refresh every D (1s; 100ms at least)\n"
		"  -d, --duration D     stop after D (with --once: sample "
		"for D, 5s)\n"
		"      --once           one table at the end, then exit\n"
		"      --native         C/C++ frames too (functions of "
		"libraries and the\n"
		"                       interpreter)\n"
		"      --gil            only samples of the thread holding "
		"the GIL\n"
		"      --idle           idle and GIL-waiting samples too "
		"(default: on CPU)\n"
		"      --tasks          in an asyncio program, a row per "
		"task (\"task NAME\":\n"
		"                       the samples that ran it, across its "
		"awaits) and its\n"
		"                       coroutines' functions "
		"(docs/asyncio.md)\n"
		"      --sort KEY       own, total, own-time or total-time "
		"(own)\n"
		"  -T, --thread ID      one thread (its Python ident)\n"
		"      --hz N           sampling rate (the agent's "
		"profile.hz, 100)\n"
		"  -n, --top N          rows in a table not on a terminal "
		"(all)\n"
		"  -f, --format FORMAT  table, json or csv (not on a "
		"terminal, or --once)\n"
		"      --subprocesses   the target's Python children too "
		"(DataLoader workers,\n"
		"                       multiprocessing pools) that have an "
		"agent, their samples\n"
		"                       added in, a row per process "
		"(\"process PID\", its total);\n"
		"                       those without one are named on "
		"stderr\n"
		"      --inject         with --subprocesses: give them an "
		"agent first\n",
	.flags = CMD_TARGET,
	.exec = cmd_top_exec,
};
