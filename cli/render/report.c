/*
 * report: crash and hang reports, read and shown.  See report.h.
 */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "output.h"

#define LINES_MAX 10000000
#define SOURCE_LINE_MAX 1000000 /* lines of a source file scanned */
#define SHOWN_MAX 1024 /* bytes of one field shown, escaped (cut past it) */

/* ---- small helpers ------------------------------------------------------- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A heap copy of s[0..n) with \\ and \xNN undone; NULL when no memory. */
static char *unescape(const char *s, size_t n)
{
	char *out = malloc(n + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 1 < n && s[i + 1] == '\\') {
			*o++ = '\\';
			i++;
		} else if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' &&
			   hexval(s[i + 2]) >= 0 && hexval(s[i + 3]) >= 0) {
			*o++ = (char)(hexval(s[i + 2]) << 4 | hexval(s[i + 3]));
			i += 3;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

static int starts(const char *s, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n >= k && !memcmp(s, prefix, k);
}

/* Appends item to the array *arr of *n elements of size sz.  0 or -ENOMEM;
 * -E2BIG past max (the item is dropped). */
static int push(void *arr, size_t *n, size_t sz, const void *item, size_t max)
{
	void **a = arr;
	void *grown;

	if (*n >= max)
		return -E2BIG;
	/* Grows by powers of two. */
	if ((*n & (*n - 1)) == 0) {
		grown = realloc(*a, (*n ? *n * 2 : 1) * sz);
		if (!grown)
			return -ENOMEM;
		*a = grown;
	}
	memcpy((char *)*a + *n * sz, item, sz);
	(*n)++;
	return 0;
}

static int push_str(char ***arr, size_t *n, const char *s, size_t len,
		    size_t max)
{
	char *c = unescape(s, len);
	int rc;

	if (!c)
		return -ENOMEM;
	rc = push(arr, n, sizeof(char *), &c, max);
	if (rc)
		free(c);
	return rc;
}

/* ---- parsing ------------------------------------------------------------- */

/* "thread TID ident 0xID name "NAME" FLAGS" */
static int parse_thread(const char *s, size_t n, struct cli_report_thread *t)
{
	const char *end = s + n, *p, *q;
	char *num;

	memset(t, 0, sizeof(*t));
	p = s + strlen("thread ");
	t->tid = strtol(p, &num, 10);
	p = num;
	if (starts(p, (size_t)(end - p), " ident ")) {
		p += strlen(" ident ");
		for (q = p; q < end && *q != ' '; q++)
			;
		t->ident = unescape(p, (size_t)(q - p));
		p = q;
	}
	if (starts(p, (size_t)(end - p), " name \"")) {
		p += strlen(" name \"");
		for (q = p; q < end && *q != '"'; q++)
			;
		t->name = unescape(p, (size_t)(q - p));
		p = q < end ? q + 1 : q;
	}
	while (p < end && *p == ' ')
		p++;
	t->flags = unescape(p, (size_t)(end - p));
	if (!t->ident)
		t->ident = strdup("0x0");
	if (!t->name)
		t->name = strdup("");
	return t->ident && t->name && t->flags ? 0 : -ENOMEM;
}

/* "    File "F", line N, in FUNC" */
static int parse_pyframe(const char *s, size_t n, struct cli_report_pyframe *f)
{
	const char *end = s + n, *p = s + strlen("    File \""), *q = NULL;
	static const char mid[] = "\", line ";

	/* The last '", line ' ends the file name. */
	for (const char *x = p; x + sizeof(mid) - 1 <= end; x++)
		if (!memcmp(x, mid, sizeof(mid) - 1))
			q = x;
	memset(f, 0, sizeof(*f));
	if (!q)
		return -EINVAL;
	f->file = unescape(p, (size_t)(q - p));
	p = q + sizeof(mid) - 1;
	f->line = (int)strtol(p, NULL, 10);
	q = strstr(p, ", in ");
	if (q && q < end)
		f->func = unescape(q + 5, (size_t)(end - q - 5));
	else
		f->func = strdup("?");
	return f->file && f->func ? 0 : -ENOMEM;
}

/* "    #N 0xIP FUNC+0xOFF (OBJECT+0xOFF)" or "    #N 0xIP" */
static int parse_nframe(const char *s, size_t n, struct cli_report_nframe *f)
{
	const char *end = s + n, *p = s + strlen("    #"), *q, *open = NULL;
	char *num;

	memset(f, 0, sizeof(*f));
	f->index = (int)strtol(p, &num, 10);
	p = num;
	while (p < end && *p == ' ')
		p++;
	for (q = p; q < end && *q != ' '; q++)
		;
	f->ip = unescape(p, (size_t)(q - p));
	if (!f->ip)
		return -ENOMEM;
	if (q >= end)
		return 0;
	p = q + 1;
	for (const char *x = p; x + 1 < end; x++)
		if (x[0] == ' ' && x[1] == '(')
			open = x;
	if (!open || end[-1] != ')') {
		f->func = unescape(p, (size_t)(end - p));
		return f->func ? 0 : -ENOMEM;
	}
	f->func = unescape(p, (size_t)(open - p));
	f->object = unescape(open + 2, (size_t)(end - 1 - open - 2));
	return f->func && f->object ? 0 : -ENOMEM;
}

/* Which section of the current thread lines go to. */
enum section { NONE, PYTHON, NATIVE };

static int parse_line(struct cli_report *r, const char *s, size_t n,
		      int *in_header, enum section *sec)
{
	struct cli_report_thread *t =
		r->nthreads ? &r->threads[r->nthreads - 1] : NULL;
	int rc = 0;

	if (r->complete)
		return push_str(&r->after, &r->nafter, s, n, LINES_MAX);
	if (*in_header) {
		const char *colon = memchr(s, ':', n);
		struct cli_report_kv kv;

		if (!n) {
			*in_header = 0;
			return 0;
		}
		if (!colon)
			return 0;
		kv.key = unescape(s, (size_t)(colon - s));
		colon += colon + 1 < s + n && colon[1] == ' ' ? 2 : 1;
		kv.value = unescape(colon, (size_t)(s + n - colon));
		if (!kv.key || !kv.value ||
		    push(&r->kv, &r->nkv, sizeof(kv), &kv, 10000)) {
			free(kv.key);
			free(kv.value);
			return -ENOMEM;
		}
		return 0;
	}
	if (starts(s, n, "end:")) {
		r->complete = 1;
		return 0;
	}
	if (starts(s, n, "note: "))
		return push_str(&r->notes, &r->nnotes, s + 6, n - 6, 10000);
	if (starts(s, n, "thread ")) {
		struct cli_report_thread nt;

		*sec = NONE;
		rc = parse_thread(s, n, &nt);
		if (!rc)
			rc = push(&r->threads, &r->nthreads, sizeof(nt), &nt,
				  CLI_REPORT_THREADS_MAX);
		if (rc) {
			free(nt.ident);
			free(nt.name);
			free(nt.flags);
		}
		return rc;
	}
	if (!t)
		return 0;
	if (starts(s, n, "  python (") && n > 12 && s[n - 1] == ':') {
		*sec = PYTHON;
		free(t->python_label);
		t->python_label = unescape(s + 10, n - 10 - 2);
		return t->python_label ? 0 : -ENOMEM;
	}
	if (starts(s, n, "  native (")) {
		*sec = NATIVE;
		t->has_native = 1;
		return 0;
	}
	if (starts(s, n, "    (") && s[n - 1] == ')') {
		if (*sec == NATIVE)
			return push_str(&t->nat_notes, &t->nnat_notes, s + 5,
					n - 6, 1000);
		return push_str(&t->py_notes, &t->npy_notes, s + 5, n - 6,
				1000);
	}
	if (*sec == PYTHON && starts(s, n, "    File \"")) {
		struct cli_report_pyframe f;

		rc = parse_pyframe(s, n, &f);
		if (rc == 0)
			rc = push(&t->py, &t->npy, sizeof(f), &f,
				  CLI_REPORT_FRAMES_MAX);
		if (rc) {
			free(f.file);
			free(f.func);
		}
		return rc == -EINVAL ? 0 : rc;
	}
	if (*sec == NATIVE && starts(s, n, "    #")) {
		struct cli_report_nframe f;

		rc = parse_nframe(s, n, &f);
		if (rc == 0)
			rc = push(&t->nat, &t->nnat, sizeof(f), &f,
				  CLI_REPORT_FRAMES_MAX);
		if (rc) {
			free(f.ip);
			free(f.func);
			free(f.object);
		}
		return rc;
	}
	return 0; /* unknown: a newer writer's */
}

int cli_report_parse(const char *text, size_t len, struct cli_report *out,
		     char *err, size_t errlen)
{
	const char *p = text, *end = text + len;
	enum section sec = NONE;
	int in_header = 1, first = 1;
	size_t lines = 0;

	memset(out, 0, sizeof(*out));
	out->reader_uid = out->reader_gid = -1;
	if (len > CLI_REPORT_BYTES_MAX) {
		end = text + CLI_REPORT_BYTES_MAX;
		out->truncated = 1;
	}
	while (p < end && lines++ < LINES_MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (nl ? nl : end) - p;
		int rc;

		if (n && p[n - 1] == '\r')
			n--;
		if (first && !n) { /* the stderr copy starts with a newline */
			p = nl ? nl + 1 : end;
			continue;
		}
		if (first) {
			if (!starts(p, n, "probing-report: ")) {
				snprintf(err, errlen,
					 "not a Probing report (its first line "
					 "is not \"probing-report: N\")");
				return -EINVAL;
			}
			out->version = atoi(p + strlen("probing-report: "));
			first = 0;
		} else {
			rc = parse_line(out, p, n, &in_header, &sec);
			if (rc == -ENOMEM) {
				snprintf(err, errlen, "out of memory");
				return rc;
			}
			if (rc == -E2BIG)
				out->truncated = 1;
		}
		p = nl ? nl + 1 : end;
	}
	if (first) {
		snprintf(err, errlen, "empty: not a Probing report");
		return -EINVAL;
	}
	return 0;
}

static void free_strs(char **a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(a[i]);
	free(a);
}

void cli_report_release(struct cli_report *r)
{
	for (size_t i = 0; i < r->nkv; i++) {
		free(r->kv[i].key);
		free(r->kv[i].value);
	}
	free(r->kv);
	for (size_t i = 0; i < r->nthreads; i++) {
		struct cli_report_thread *t = &r->threads[i];

		free(t->ident);
		free(t->name);
		free(t->flags);
		free(t->python_label);
		for (size_t k = 0; k < t->npy; k++) {
			free(t->py[k].func);
			free(t->py[k].file);
		}
		free(t->py);
		for (size_t k = 0; k < t->nnat; k++) {
			free(t->nat[k].ip);
			free(t->nat[k].func);
			free(t->nat[k].object);
		}
		free(t->nat);
		free_strs(t->py_notes, t->npy_notes);
		free_strs(t->nat_notes, t->nnat_notes);
	}
	free(r->threads);
	free_strs(r->notes, r->nnotes);
	free_strs(r->after, r->nafter);
	memset(r, 0, sizeof(*r));
}

const char *cli_report_get(const struct cli_report *r, const char *key)
{
	for (size_t i = 0; i < r->nkv; i++)
		if (!strcmp(r->kv[i].key, key))
			return r->kv[i].value;
	return NULL;
}

/* ---- showing ------------------------------------------------------------- */

/* May uid/gid (-1: neither) do `want` (S_IROTH or S_IXOTH's bit, as an
 * "other" bit) to what st describes?  Root may do everything. */
static int permits(const struct stat *st, long uid, long gid, mode_t want)
{
	if (uid == 0)
		return 1;
	if (uid >= 0 && (long)st->st_uid == uid)
		return (st->st_mode & (want << 6)) != 0;
	if (gid >= 0 && (long)st->st_gid == gid)
		return (st->st_mode & (want << 3)) != 0;
	return (st->st_mode & want) != 0;
}

/* Could the report's process (r's reader) read file, a Python source?
 * Its real path (links followed), every directory above it searchable
 * and the file readable by that user, and a regular *.py file.  The
 * checks and the open are not one step: a file swapped between them is
 * still only what that user could read or a Python file. */
static int may_read_source(const struct cli_report *r, const char *file,
			   char *real)
{
	char dir[PATH_MAX], *slash;
	struct stat st;
	size_t n;

	if (!realpath(file, real))
		return 0;
	n = strlen(real);
	if (n < 4 || strcmp(real + n - 3, ".py") || stat(real, &st) ||
	    !S_ISREG(st.st_mode) ||
	    !permits(&st, r->reader_uid, r->reader_gid, S_IROTH))
		return 0;
	snprintf(dir, sizeof(dir), "%s", real);
	while ((slash = strrchr(dir, '/'))) {
		int top = slash == dir;

		slash[top] = '\0'; /* the top keeps its "/" */
		if (stat(dir, &st) ||
		    !permits(&st, r->reader_uid, r->reader_gid, S_IXOTH))
			return 0;
		if (top)
			break;
	}
	return 1;
}

/* Line n of file, stripped, into out; 0 when found and r's reader may
 * read it (may_read_source). */
static int source_line(const struct cli_report *r, const char *file, int n,
		       char *out, size_t outlen)
{
	FILE *f;
	char buf[4096], real[PATH_MAX];
	int cur = 0, found = -1;

	if (n <= 0 || n > SOURCE_LINE_MAX || file[0] != '/' ||
	    !may_read_source(r, file, real))
		return -1;
	f = fopen(real, "r");
	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f)) {
		size_t k = strlen(buf);

		/* a line longer than the buffer continues in the next read */
		if (k && buf[k - 1] != '\n' && !feof(f)) {
			if (cur + 1 == n && found < 0) {
				buf[k] = '\0';
				found = 0;
				break;
			}
			continue;
		}
		if (++cur == n) {
			found = 0;
			break;
		}
	}
	fclose(f);
	if (found)
		return -1;
	{
		char *s = buf, *e;

		while (*s == ' ' || *s == '\t')
			s++;
		e = s + strlen(s);
		while (e > s && (e[-1] == '\n' || e[-1] == '\r' ||
				 e[-1] == ' ' || e[-1] == '\t'))
			*--e = '\0';
		snprintf(out, outlen, "%s", s);
	}
	return out[0] ? 0 : -1;
}

/* The last path component of an object ("libc.so.6+0x1234"). */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static int has_flag(const struct cli_report_thread *t, const char *flag)
{
	size_t k = strlen(flag);

	for (const char *p = t->flags; (p = strstr(p, flag)); p += k)
		if ((p == t->flags || p[-1] == ' ') && (!p[k] || p[k] == ' '))
			return 1;
	return 0;
}

/* The flags as "crashed, main". */
static void print_flags(FILE *f, const char *flags)
{
	for (const char *p = flags; *p; p++)
		if (*p == ' ')
			fputs(", ", f);
		else
			fputc(*p, f);
}

/*
 * Every field of a report is the program's text (names of threads,
 * functions, files, its command line, source lines) or may be another
 * user's (a planted report): shown with its control characters escaped
 * (cli_text_fit), never sent to the terminal as it is.  E(s, i) is s so
 * escaped in the i-th of a print's buffers.
 */
#define E(s, i) cli_text_fit((s) ? (s) : "?", 0, b[i], sizeof(b[i]))

static void print_thread(FILE *f, const struct cli_report *r,
			 const struct cli_report_thread *t, int source)
{
	char line[512], b[3][SHOWN_MAX], flags[SHOWN_MAX];

	fprintf(f, "Thread %ld \"%s\"", t->tid, E(t->name, 0));
	if (t->flags[0]) {
		fputs(" (", f);
		print_flags(f, cli_text_fit(t->flags, 0, flags, sizeof(flags)));
		fputs(")", f);
	}
	fputs("\n", f);
	/* The usual order is said once, in the first line; others here. */
	if (t->python_label &&
	    strcmp(t->python_label, "most recent call first"))
		fprintf(f, "  python (%s):\n", E(t->python_label, 0));
	for (size_t i = 0; i < t->npy; i++) {
		const struct cli_report_pyframe *p = &t->py[i];

		fprintf(f, "  #%-2zu %s (%s:%d)\n", i, E(p->func, 0),
			E(p->file, 1), p->line);
		if (source &&
		    source_line(r, p->file, p->line, line, sizeof(line)) == 0)
			fprintf(f, "        %s\n",
				cli_text_fit(line, 0, b[0], sizeof(b[0])));
	}
	for (size_t i = 0; i < t->npy_notes; i++)
		fprintf(f, "  (%s)\n", E(t->py_notes[i], 0));
	if (!t->has_native)
		return;
	fputs("  native:\n", f);
	for (size_t i = 0; i < t->nnat; i++) {
		const struct cli_report_nframe *n = &t->nat[i];

		if (n->object)
			fprintf(f, "  #%-2d %s (%s)\n", n->index, E(n->func, 0),
				E(base_name(n->object), 1));
		else
			fprintf(f, "  #%-2d %s%s%s\n", n->index, E(n->ip, 0),
				n->func ? " " : "", n->func ? E(n->func, 1) : "");
	}
	for (size_t i = 0; i < t->nnat_notes; i++)
		fprintf(f, "  (%s)\n", E(t->nat_notes[i], 0));
}

static const char *kind_title(const char *kind)
{
	if (!kind)
		return "Report";
	if (!strcmp(kind, "crash"))
		return "Crash";
	if (!strcmp(kind, "exception"))
		return "Exception";
	if (!strcmp(kind, "hang"))
		return "Hang";
	return kind;
}

void cli_report_print(const struct cli_report *r, FILE *f, int source,
		      const char *path)
{
	const char *reason = cli_report_get(r, "reason");
	const char *pid = cli_report_get(r, "pid");
	const char *when = cli_report_get(r, "time");
	const char *cmd = cli_report_get(r, "cmdline");
	const char *since = cli_report_get(r, "stuck-since");
	char b[3][SHOWN_MAX];

	fprintf(f, "%s: %s\n", E(kind_title(cli_report_get(r, "kind")), 0),
		E(reason, 1));
	fprintf(f, "  process %s (%s) at %s\n", E(pid, 0), E(cmd, 1),
		E(when, 2));
	if (since)
		fprintf(f, "  stuck since %s\n", E(since, 0));
	for (size_t i = 0; i < r->nafter; i++)
		if (r->after[i][0])
			fprintf(f, "  %s\n", E(r->after[i], 0));
	if (path)
		fprintf(f, "  report %s\n", E(path, 0));
	if (!r->complete)
		fputs("  INCOMPLETE: the report was cut short while it was "
		      "written\n",
		      f);
	if (r->truncated)
		fputs("  (only part of the report was read: over the "
		      "limits)\n",
		      f);
	fputs("  frames: most recent call first\n", f);
	/* The thread it is about first (the writer puts it first too). */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < r->nthreads; i++) {
			const struct cli_report_thread *t = &r->threads[i];
			int lead = has_flag(t, "crashed") ||
				   has_flag(t, "stuck") ||
				   has_flag(t, "exception");

			if (lead != (pass == 0))
				continue;
			fputs("\n", f);
			print_thread(f, r, t, source);
		}
	for (size_t i = 0; i < r->nnotes; i++)
		fprintf(f, "\n(%s)\n", E(r->notes[i], 0));
}

#undef E

/* ---- JSON ------------------------------------------------------------------
 */

static cJSON *str_array(char **a, size_t n)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < n; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(a[i]));
	return arr;
}

cJSON *cli_report_json(const struct cli_report *r)
{
	cJSON *o = cJSON_CreateObject(), *h, *ths;

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "version", r->version);
	cJSON_AddBoolToObject(o, "complete", r->complete);
	cJSON_AddBoolToObject(o, "truncated", r->truncated);
	h = cJSON_AddObjectToObject(o, "header");
	for (size_t i = 0; h && i < r->nkv; i++)
		cJSON_AddStringToObject(h, r->kv[i].key, r->kv[i].value);
	ths = cJSON_AddArrayToObject(o, "threads");
	for (size_t i = 0; ths && i < r->nthreads; i++) {
		const struct cli_report_thread *t = &r->threads[i];
		cJSON *th = cJSON_CreateObject(), *py, *nat, *fl;
		char *save = NULL, *flags = strdup(t->flags);

		if (!th)
			break;
		cJSON_AddItemToArray(ths, th);
		cJSON_AddNumberToObject(th, "tid", (double)t->tid);
		cJSON_AddStringToObject(th, "ident", t->ident);
		cJSON_AddStringToObject(th, "name", t->name);
		fl = cJSON_AddArrayToObject(th, "flags");
		for (char *w = flags ? strtok_r(flags, " ", &save) : NULL; w;
		     w = strtok_r(NULL, " ", &save))
			cJSON_AddItemToArray(fl, cJSON_CreateString(w));
		free(flags);
		if (t->python_label)
			cJSON_AddStringToObject(th, "pythonLabel",
						t->python_label);
		py = cJSON_AddArrayToObject(th, "python");
		for (size_t k = 0; py && k < t->npy; k++) {
			cJSON *fr = cJSON_CreateObject();

			cJSON_AddStringToObject(fr, "func", t->py[k].func);
			cJSON_AddStringToObject(fr, "file", t->py[k].file);
			cJSON_AddNumberToObject(fr, "line", t->py[k].line);
			cJSON_AddItemToArray(py, fr);
		}
		cJSON_AddItemToObject(th, "pythonNotes",
				      str_array(t->py_notes, t->npy_notes));
		if (!t->has_native)
			continue;
		nat = cJSON_AddArrayToObject(th, "native");
		for (size_t k = 0; nat && k < t->nnat; k++) {
			const struct cli_report_nframe *n = &t->nat[k];
			cJSON *fr = cJSON_CreateObject();

			cJSON_AddNumberToObject(fr, "index", n->index);
			cJSON_AddStringToObject(fr, "ip", n->ip);
			if (n->func)
				cJSON_AddStringToObject(fr, "func", n->func);
			if (n->object)
				cJSON_AddStringToObject(fr, "object",
							n->object);
			cJSON_AddItemToArray(nat, fr);
		}
		cJSON_AddItemToObject(th, "nativeNotes",
				      str_array(t->nat_notes, t->nnat_notes));
	}
	cJSON_AddItemToObject(o, "notes", str_array(r->notes, r->nnotes));
	cJSON_AddItemToObject(o, "after", str_array(r->after, r->nafter));
	return o;
}
