/*
 * folded: see folded.h.
 */
#include "folded.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	struct folded_fn fn;
	size_t seen; /* the last line that counted it in total, + 1 */
	uint64_t hash;
};

struct table {
	struct entry *e;     /* slots; e[i].fn.label NULL when empty */
	size_t cap, n;
};

static void set_err(char *err, size_t errlen, const char *what, size_t line)
{
	if (err && errlen)
		snprintf(err, errlen, "line %zu: %s", line, what);
}

static uint64_t hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

static int grow(struct table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct entry *e = calloc(cap, sizeof(*e));

	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		size_t j;

		if (!t->e[i].fn.label)
			continue;
		for (j = t->e[i].hash & (cap - 1); e[j].fn.label;
		     j = (j + 1) & (cap - 1))
			;
		e[j] = t->e[i];
	}
	free(t->e);
	t->e = e;
	t->cap = cap;
	return 0;
}

/* The entry of label s (n bytes), added when new; NULL on failure (rc). */
static struct entry *lookup(struct table *t, const char *s, size_t n, int *rc)
{
	uint64_t h = hash(s, n);
	size_t i;

	if ((t->n + 1) * 2 > t->cap) {
		if (t->n >= FOLDED_LABELS_MAX) {
			*rc = -E2BIG;
			return NULL;
		}
		if ((*rc = grow(t)) < 0)
			return NULL;
	}
	for (i = h & (t->cap - 1); t->e[i].fn.label; i = (i + 1) & (t->cap - 1))
		if (t->e[i].hash == h && !strncmp(t->e[i].fn.label, s, n) &&
		    !t->e[i].fn.label[n])
			return &t->e[i];
	t->e[i].fn.label = strndup(s, n);
	if (!t->e[i].fn.label) {
		*rc = -ENOMEM;
		return NULL;
	}
	t->e[i].hash = h;
	t->n++;
	return &t->e[i];
}

static int cmp_fn(const void *a, const void *b)
{
	const struct folded_fn *x = a, *y = b;

	if (x->self != y->self)
		return x->self > y->self ? -1 : 1;
	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->label, y->label);
}

/* Parses one line [p, end); 0, 1 for an empty line, or an error. */
static int line(struct table *t, struct folded_top *out, const char *p,
		const char *end, size_t lineno, char *err, size_t errlen)
{
	const char *sp = end, *q;
	unsigned long long count;
	char *cend;
	size_t depth = 0;
	int rc = 0;

	while (end > p && (end[-1] == '\r' || end[-1] == ' '))
		end--;
	if (end == p)
		return 1;
	for (sp = end; sp > p && sp[-1] != ' '; sp--)
		;
	if (sp == p || sp == end) {
		set_err(err, errlen, "no sample count", lineno);
		return -EINVAL;
	}
	errno = 0;
	count = strtoull(sp, &cend, 10);
	if (errno || cend != end || *sp == '-' || *sp == '+') {
		set_err(err, errlen, "the count is not a number", lineno);
		return -EINVAL;
	}
	end = sp - 1; /* the stack: [p, end) */
	out->samples += count;
	out->stacks++;
	for (q = p; q <= end; q++) {
		const char *f = q;
		struct entry *e;

		while (q < end && *q != ';')
			q++;
		if (q == f)
			continue; /* an empty frame (";;") */
		if (++depth > FOLDED_DEPTH_MAX) {
			set_err(err, errlen, "too many frames", lineno);
			return -E2BIG;
		}
		e = lookup(t, f, (size_t)(q - f), &rc);
		if (!e) {
			set_err(err, errlen,
				rc == -E2BIG ? "too many functions"
					     : "out of memory",
				lineno);
			return rc;
		}
		if (e->seen != lineno) {
			e->seen = lineno;
			e->fn.total += count;
		}
		if (q == end)
			e->fn.self += count;
	}
	return 0;
}

int folded_top(const char *text, struct folded_top *out, char *err,
	       size_t errlen)
{
	struct table t = {0};
	const char *p = text;
	size_t lineno = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (strlen(text) > FOLDED_TEXT_MAX) {
		set_err(err, errlen, "input too large", 0);
		return -E2BIG;
	}
	while (*p && rc >= 0) {
		const char *nl = strchr(p, '\n');
		const char *end = nl ? nl : p + strlen(p);

		rc = line(&t, out, p, end, ++lineno, err, errlen);
		p = nl ? nl + 1 : end;
	}
	/* Whatever was read so far becomes the result, sorted. */
	out->fns = malloc((t.n ? t.n : 1) * sizeof(*out->fns));
	if (!out->fns) {
		for (size_t i = 0; i < t.cap; i++)
			free(t.e[i].fn.label);
		free(t.e);
		return -ENOMEM;
	}
	for (size_t i = 0; i < t.cap; i++)
		if (t.e[i].fn.label)
			out->fns[out->n++] = t.e[i].fn;
	free(t.e);
	qsort(out->fns, out->n, sizeof(*out->fns), cmp_fn);
	return rc < 0 ? rc : 0;
}

void folded_top_release(struct folded_top *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->fns[i].label);
	free(t->fns);
	memset(t, 0, sizeof(*t));
}

void folded_label_split(const char *label, char *func, size_t funclen,
			char *where, size_t wherelen)
{
	size_t n = strlen(label), i;
	int depth = 0;

	/* The '(' that matches the final ')', preceded by a space. */
	for (i = n; n && label[n - 1] == ')' && i-- > 0;) {
		if (label[i] == ')')
			depth++;
		else if (label[i] == '(' && --depth == 0)
			break;
	}
	if (!n || label[n - 1] != ')' || depth || i == 0 ||
	    label[i - 1] != ' ') {
		snprintf(func, funclen, "%s", label);
		snprintf(where, wherelen, "%s", "");
		return;
	}
	snprintf(func, funclen, "%.*s", (int)(i - 1), label);
	snprintf(where, wherelen, "%.*s", (int)(n - i - 2), label + i + 1);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

const char *folded_format_of(const char *path)
{
	if (ends_with(path, ".speedscope.json"))
		return "speedscope";
	if (ends_with(path, ".json"))
		return "chrome";
	if (ends_with(path, ".svg"))
		return "svg";
	if (ends_with(path, ".folded") || ends_with(path, ".collapsed") ||
	    ends_with(path, ".txt"))
		return "folded";
	return NULL;
}
