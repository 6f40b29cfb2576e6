/*
 * dx: the playbooks' shared looks (see dx.h).
 */
#include "diagnose/dx.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "render/frames.h"
#include "render/output.h"
#include "serve/selfrun.h"

#define WORDS_MAX 24
#define OUT_MAX (64u << 20)
#define LOOK_MS 60000 /* one look, past its own duration */

/* ---- progress on a terminal ---------------------------------------------- */

#define PROGRESS_MS 200

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int on, stop;
	char playbook[32], step[96];
	struct timespec t0;
} pg = {.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER};

static double since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) +
	       (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void *progress_loop(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pg.lock);
	while (!pg.stop) {
		struct timespec dl;
		struct winsize ws;
		char line[192], fit[600];
		size_t cols = ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1
				      ? (size_t)ws.ws_col - 1
				      : 79;

		/* One line, narrower than the terminal: a wrapped one
		 * would leave a copy behind at every redraw. */
		snprintf(line, sizeof(line), "probing: diagnose %s: %s, %.1f s",
			 pg.playbook, pg.step, since(&pg.t0));
		fprintf(stderr, "\r%s\033[K",
			cli_text_fit(line, cols, fit, sizeof(fit)));
		fflush(stderr);
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_nsec += PROGRESS_MS * 1000000L;
		dl.tv_sec += dl.tv_nsec / 1000000000L;
		dl.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&pg.cond, &pg.lock, &dl);
	}
	pthread_mutex_unlock(&pg.lock);
	return NULL;
}

void dx_progress_start(const char *playbook)
{
	if (!isatty(2) || pg.on)
		return;
	snprintf(pg.playbook, sizeof(pg.playbook), "%s", playbook);
	snprintf(pg.step, sizeof(pg.step), "starting");
	clock_gettime(CLOCK_MONOTONIC, &pg.t0);
	pg.stop = 0;
	pg.on = pthread_create(&pg.thread, NULL, progress_loop, NULL) == 0;
}

void dx_step(const char *fmt, ...)
{
	va_list ap;

	if (!pg.on)
		return;
	pthread_mutex_lock(&pg.lock);
	va_start(ap, fmt);
	vsnprintf(pg.step, sizeof(pg.step), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&pg.lock);
}

void dx_progress_end(void)
{
	if (!pg.on)
		return;
	pthread_mutex_lock(&pg.lock);
	pg.stop = 1;
	pthread_cond_signal(&pg.cond);
	pthread_mutex_unlock(&pg.lock);
	pthread_join(pg.thread, NULL);
	pg.on = 0;
	fputs("\r\033[K", stderr);
	fflush(stderr);
}

/* ---- the looks ------------------------------------------------------------- */

/* What words ask, for the progress line: "asking backtrace", "asking
 * cluster hang". */
static void say_step(const char *const *words)
{
	for (int i = 0; words[i]; i++) {
		if (words[i][0] == '-' || (i && !strcmp(words[i - 1], "-f")))
			continue;
		if (!strcmp(words[i], "cluster") && words[i + 1])
			dx_step("asking cluster %s", words[i + 1]);
		else
			dx_step("asking %s", words[i]);
		return;
	}
}

static int run(struct dx *d, const char *const *words, int extra_ms,
	       struct selfrun_result *r)
{
	const char *argv[WORDS_MAX + 3];
	int n = 0, rc;

	say_step(words);
	argv[n++] = "-t";
	argv[n++] = d->target;
	for (int i = 0; words[i]; i++) {
		if (n >= WORDS_MAX + 2) {
			snprintf(d->err, sizeof(d->err), "too many words");
			return -1;
		}
		argv[n++] = words[i];
	}
	argv[n] = NULL;
	rc = selfrun(argv, LOOK_MS + extra_ms, OUT_MAX, r);
	if (rc) {
		snprintf(d->err, sizeof(d->err), "could not run probing: %s",
			 strerror(-rc));
		d->status = 1;
		return -1;
	}
	if (r->status != 0) {
		size_t len = strlen(r->err);

		while (len && r->err[len - 1] == '\n')
			r->err[--len] = '\0';
		snprintf(d->err, sizeof(d->err), "%s",
			 *r->err ? r->err : "a look at the target failed");
		/* "probing: ..." is the child's; the caller prefixes its own.
		 */
		if (!strncmp(d->err, "probing: ", 9))
			memmove(d->err, d->err + 9, strlen(d->err + 9) + 1);
		d->status = r->status > 0 ? r->status : 5;
		selfrun_free(r);
		return -1;
	}
	return 0;
}

/* The duration word ("--duration=2000ms") among words, in ms; else 0. */
static int words_ms(const char *const *words)
{
	int ms = 0;

	for (int i = 0; words[i]; i++)
		if (sscanf(words[i], "--duration=%dms", &ms) == 1)
			return ms;
	return 0;
}

int dx_text(struct dx *d, char **out, const char *const *words)
{
	struct selfrun_result r;

	if (run(d, words, words_ms(words), &r))
		return -1;
	*out = r.out;
	r.out = NULL;
	selfrun_free(&r);
	return 0;
}

int dx_json(struct dx *d, cJSON **out, const char *const *words)
{
	char *text;

	if (dx_text(d, &text, words))
		return -1;
	*out = cJSON_Parse(text);
	free(text);
	if (!*out) {
		snprintf(d->err, sizeof(d->err), "%s: the answer is not JSON",
			 words[0]);
		d->status = 1;
		return -1;
	}
	return 0;
}

int dx_query(struct dx *d, cJSON **rows, const char *sql)
{
	const char *words[] = {"-f", "json", "query", "--", sql, NULL};

	if (dx_json(d, rows, words))
		return -1;
	if (!cJSON_IsArray(*rows)) {
		cJSON_Delete(*rows);
		snprintf(d->err, sizeof(d->err), "query: not a list of rows");
		d->status = 1;
		return -1;
	}
	return 0;
}

/* Lines name the program's threads, functions and files, and quote what
 * the looks said: their control characters are escaped here
 * (cli_text_fit), once, for every door that shows them (the terminal,
 * the web page, an assistant).  An escape takes at most 4 bytes for
 * each byte of s. */
static char *escaped(const char *s)
{
	size_t len = strlen(s) * 4 + 1;
	char *out = malloc(len);

	return out ? cli_text_fit(s, 0, out, len) : NULL;
}

static void add_line(char **lines, int *n, const char *fmt, va_list ap)
{
	char *s, *e;

	if (*n >= DX_LINES_MAX || vasprintf(&s, fmt, ap) < 0)
		return;
	e = escaped(s);
	free(s);
	if (e)
		lines[(*n)++] = e;
}

void dx_evidence(struct dx *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_line(d->evidence, &d->nevidence, fmt, ap);
	va_end(ap);
}

void dx_next(struct dx *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_line(d->next, &d->nnext, fmt, ap);
	va_end(ap);
}

void dx_verdict(struct dx *d, const char *fmt, ...)
{
	va_list ap;

	char raw[DX_TEXT_MAX];

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	cli_text_fit(raw, 0, d->verdict, sizeof(d->verdict));
}

void dx_free(struct dx *d)
{
	for (int i = 0; i < d->nevidence; i++)
		free(d->evidence[i]);
	for (int i = 0; i < d->nnext; i++)
		free(d->next[i]);
	d->nevidence = d->nnext = 0;
}

void dx_forgive(struct dx *d)
{
	d->err[0] = '\0';
	d->status = 0;
}

double dx_num(const cJSON *row, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);

	if (cJSON_IsNumber(v))
		return v->valuedouble;
	if (cJSON_IsString(v))
		return strtod(v->valuestring, NULL);
	return 0;
}

const char *dx_str(const cJSON *row, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- folded stacks --------------------------------------------------------
 */

/* Splits "a;b;c N" into frames; drops the root (the thread). */
static int parse_line(char *line, struct dx_stack *st)
{
	char *sp = strrchr(line, ' '), *p, *end;
	int cap = 16;

	if (!sp)
		return -1;
	*sp = '\0';
	st->count = strtol(sp + 1, &end, 10);
	if (*end || st->count <= 0)
		return -1;
	st->frames = malloc(sizeof(char *) * (size_t)cap);
	st->n = 0;
	st->idle = 0;
	if (!st->frames)
		return -1;
	p = strchr(line, ';'); /* past the thread */
	while (p) {
		char *f = p + 1, *next = strchr(f, ';');

		if (next)
			*next = '\0';
		if (!next && (!strcmp(f, "(idle)") || !strcmp(f, "(gil)"))) {
			st->idle = 1;
			break;
		}
		if (st->n == cap) {
			char **v = realloc(st->frames,
					   sizeof(char *) * (size_t)cap * 2);

			if (!v)
				return -1;
			st->frames = v;
			cap *= 2;
		}
		if (!(st->frames[st->n] = strdup(f)))
			return -1;
		st->n++;
		p = next;
	}
	return 0;
}

static void stack_free(struct dx_stack *st)
{
	for (int i = 0; i < st->n; i++)
		free(st->frames[i]);
	free(st->frames);
	st->frames = NULL;
	st->n = 0;
}

int dx_sample_main(struct dx *d, int ms, int idle, struct dx_samples *s)
{
	char dur[32], *text, *line, *save = NULL, main_root[64] = "";
	/* Without -o, to a pipe: folded stacks. */
	const char *words[] = {
		"flamegraph",		dur, "--threads", "--lines",
		idle ? "--idle" : NULL, NULL};

	memset(s, 0, sizeof(*s));
	snprintf(dur, sizeof(dur), "--duration=%dms", ms);
	if (dx_text(d, &text, words))
		return -1;
	/* The main thread's root: "MainThread (thread N)". */
	if (strstr(text, "MainThread (thread "))
		snprintf(main_root, sizeof(main_root), "MainThread (thread ");
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		struct dx_stack st = {0};

		if (main_root[0] && strncmp(line, main_root, strlen(main_root)))
			continue;
		if (parse_line(line, &st)) {
			stack_free(&st);
			continue;
		}
		if (s->n % 64 == 0) {
			struct dx_stack *v =
				realloc(s->v, sizeof(*v) * (size_t)(s->n + 64));

			if (!v) {
				stack_free(&st);
				break;
			}
			s->v = v;
		}
		s->v[s->n++] = st;
		s->total += st.count;
	}
	free(text);
	return 0;
}

void dx_samples_free(struct dx_samples *s)
{
	for (int i = 0; i < s->n; i++)
		stack_free(&s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* "func (file:line)": the file part (into out, without ":line"). */
static void frame_file(const char *frame, char *out, size_t len)
{
	const char *open = strrchr(frame, '(');
	const char *colon = open ? strrchr(open, ':') : NULL;
	const char *close = open ? strrchr(open, ')') : NULL;
	size_t n;

	out[0] = '\0';
	if (!open || !close)
		return;
	n = (size_t)((colon ? colon : close) - open - 1);
	if (n >= len)
		n = len - 1;
	memcpy(out, open + 1, n);
	out[n] = '\0';
}

int dx_frame_own(const char *frame)
{
	char file[1024];

	frame_file(frame, file, sizeof(file));
	/* Folded stacks name an installed package's file from the package
	 * on ("torch/nn/modules/module.py": common/flamegraph.c's
	 * short_file); the program's own files are absolute (CPython makes
	 * __main__'s and sys.path[0]'s so since 3.9). */
	return file[0] == '/' && frame_own_code(file);
}

void dx_frame_func(const char *frame, char *out, size_t len)
{
	const char *open = strrchr(frame, '(');
	size_t n = open ? (size_t)(open - frame) : strlen(frame);

	while (n && frame[n - 1] == ' ')
		n--;
	if (n >= len)
		n = len - 1;
	memcpy(out, frame, n);
	out[n] = '\0';
}

void dx_frame_short(const char *frame, char *out, size_t len)
{
	const char *open = strrchr(frame, '(');
	const char *slash = open ? strrchr(open, '/') : NULL;
	char func[512];

	if (!slash) {
		snprintf(out, len, "%s", frame);
		return;
	}
	dx_frame_func(frame, func, sizeof(func));
	snprintf(out, len, "%s (%s", func, slash + 1);
}
