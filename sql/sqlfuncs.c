/*
 * sqlfuncs: see sqlfuncs.h.
 */
#include "sqlfuncs.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "units.h"

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int sqlfuncs_duration(const char *text, double *out)
{
	static const struct unit units[] = {
		{"", 1},	{"s", 1},	    {"sec", 1},
		{"second", 1},	{"seconds", 1},	    {"ms", 1e-3},
		{"m", 60},	{"min", 60},	    {"mins", 60},
		{"minute", 60}, {"minutes", 60},    {"h", 3600},
		{"hour", 3600}, {"hours", 3600},    {"d", 86400},
		{"day", 86400}, {"days", 86400},
	};
	double v;

	if (units_parse(text, units, sizeof(units) / sizeof(units[0]), &v) ||
	    v > 1e12 * 86400)
		return -1;
	*out = v;
	return 0;
}

static void fn_now(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc, (void)argv;
	sqlite3_result_double(ctx, wall_s());
}

static void fn_ago(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const unsigned char *text;
	double d;

	(void)argc;
	switch (sqlite3_value_type(argv[0])) {
	case SQLITE_INTEGER:
	case SQLITE_FLOAT:
		d = sqlite3_value_double(argv[0]);
		if (d >= 0) {
			sqlite3_result_double(ctx, wall_s() - d);
			return;
		}
		break;
	case SQLITE_TEXT:
		text = sqlite3_value_text(argv[0]);
		if (text && sqlfuncs_duration((const char *)text, &d) == 0) {
			sqlite3_result_double(ctx, wall_s() - d);
			return;
		}
		break;
	}
	sqlite3_result_error(ctx,
			     "ago(D): D is a duration: seconds, or '500ms', "
			     "'30s', '5m', '2h', '1d'",
			     -1);
}

int sqlfuncs_register(struct sqlite3 *db)
{
	int rc = sqlite3_create_function(db, "now", 0, SQLITE_UTF8, NULL,
					 fn_now, NULL, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db, "ago", 1, SQLITE_UTF8, NULL,
					     fn_ago, NULL, NULL);
	return rc;
}

/* ---- bounded string functions (sqlfuncs_register_bounded) ------------- */

struct bound {
	int (*expired)(void *);
	void *arg;
	int kind; /* per function: LIKE/GLOB, or the trim's sides */
};

enum { K_LIKE, K_GLOB };
enum { TRIM_LEFT = 1, TRIM_RIGHT = 2 };

/* One character of UTF-8 at *p (p < end), read as SQLite reads it (a
 * lead byte and the continuation bytes after it; overlong, surrogate
 * and non-characters as U+FFFD); *p moves past it. */
static uint32_t utf8_read(const unsigned char **p, const unsigned char *end)
{
	uint32_t c = *(*p)++;

	if (c < 0xc0)
		return c;
	c = c < 0xe0   ? c & 0x1f
	    : c < 0xf0 ? c & 0x0f
	    : c < 0xf8 ? c & 0x07
		       : c & 0x03;
	while (*p < end && (**p & 0xc0) == 0x80)
		c = (c << 6) + (*(*p)++ & 0x3f);
	if (c < 0x80 || (c & 0xFFFFF800) == 0xD800 ||
	    (c & 0xFFFFFFFE) == 0xFFFE)
		c = 0xFFFD;
	return c;
}

/* The bytes of the character at p (SQLite's SQLITE_SKIP_UTF8). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	const unsigned char *q = p + 1;

	if (*p >= 0xc0)
		while (q < end && (*q & 0xc0) == 0x80)
			q++;
	return (size_t)(q - p);
}

/* A pattern's tokens: every one but T_STAR matches one character. */
enum { T_STAR, T_ONE, T_LIT, T_SET, T_NONE };

struct pat {
	int glob;     /* GLOB: * ? [...], case kept; else LIKE: % _ */
	uint32_t esc; /* LIKE's escape character, 0: none */
};

struct tok {
	int type;
	uint32_t c;		  /* T_LIT */
	const unsigned char *set; /* T_SET: after the '[' */
};

/* The token at *p (< end); *p moves past it. */
static void next_tok(const struct pat *pt, const unsigned char **p,
		     const unsigned char *end, struct tok *t)
{
	uint32_t c = utf8_read(p, end);

	t->type = T_LIT;
	t->c = c;
	if (!pt->glob) {
		if (pt->esc && c == pt->esc) {
			/* The next character as it is; none: nothing
			 * matches (SQLite's "no match"). */
			if (*p < end)
				t->c = utf8_read(p, end);
			else
				t->type = T_NONE;
		} else if (c == '%') {
			t->type = T_STAR;
		} else if (c == '_') {
			t->type = T_ONE;
		}
		return;
	}
	if (c == '*') {
		t->type = T_STAR;
	} else if (c == '?') {
		t->type = T_ONE;
	} else if (c == '[') {
		/* The class runs to the first ']' that is not its first
		 * member (after an optional '^'); unterminated: nothing
		 * matches. */
		const unsigned char *q = *p;

		t->type = T_SET;
		t->set = q;
		if (q < end && *q == '^')
			q++;
		if (q < end && *q == ']')
			q++;
		while (q < end && *q != ']')
			q++;
		if (q == end)
			t->type = T_NONE;
		*p = q < end ? q + 1 : q;
	}
}

/* Is c in the GLOB class at set (terminated: next_tok checked)?  As
 * SQLite's patternCompare reads it. */
static int in_set(const unsigned char *set, const unsigned char *end,
		  uint32_t c)
{
	const unsigned char *q = set;
	uint32_t c2, prior = 0;
	int seen = 0, invert = 0;

	c2 = utf8_read(&q, end);
	if (c2 == '^') {
		invert = 1;
		c2 = utf8_read(&q, end);
	}
	if (c2 == ']') {
		seen = c == ']';
		c2 = utf8_read(&q, end);
	}
	while (c2 != ']') {
		if (c2 == '-' && q < end && *q != ']' && prior > 0) {
			c2 = utf8_read(&q, end);
			if (c >= prior && c <= c2)
				seen = 1;
			prior = 0;
		} else {
			if (c == c2)
				seen = 1;
			prior = c2;
		}
		c2 = utf8_read(&q, end);
	}
	return seen ^ invert;
}

static int lower_ascii(uint32_t c)
{
	return c >= 'A' && c <= 'Z' ? (int)(c + 32) : (int)c;
}

static int tok_matches(const struct pat *pt, const struct tok *t,
		       const unsigned char *pend, uint32_t c)
{
	switch (t->type) {
	case T_ONE:
		return 1;
	case T_LIT:
		return c == t->c || (!pt->glob && c < 0x80 && t->c < 0x80 &&
				     lower_ascii(c) == lower_ascii(t->c));
	case T_SET:
		return in_set(t->set, pend, c);
	}
	return 0;
}

/*
 * Does s match p?  1, 0, or -1 when b's clock ran out.  Wildcards match
 * any run of characters, every other token one character: on a mismatch
 * only the last wildcard moves on (one character further along s), which
 * finds a match whenever there is one and bounds the work by |p| * |s|.
 */
static int match(const struct pat *pt, const unsigned char *p,
		 const unsigned char *pe, const unsigned char *s,
		 const unsigned char *se, const struct bound *b)
{
	const unsigned char *star_p = NULL, *star_s = NULL;
	unsigned long work = 0, check = SQLFUNCS_CHECK_STEPS;

	for (;;) {
		/* Work counts a step and the pattern bytes it read: a
		 * GLOB set is scanned twice per step (next_tok, in_set). */
		if (++work >= check) {
			check = work + SQLFUNCS_CHECK_STEPS;
			if (b->expired && b->expired(b->arg))
				return -1;
		}
		if (p < pe) {
			const unsigned char *q = p, *s2 = s;
			struct tok t;

			next_tok(pt, &q, pe, &t);
			work += 2 * (unsigned long)(q - p);
			if (t.type == T_STAR) {
				star_p = p = q;
				star_s = s;
				continue;
			}
			if (s < se &&
			    tok_matches(pt, &t, pe, utf8_read(&s2, se))) {
				p = q;
				s = s2;
				continue;
			}
		} else if (s == se) {
			return 1;
		}
		if (!star_p || star_s >= se)
			return 0;
		star_s += utf8_len(star_s, se);
		s = star_s;
		p = star_p;
	}
}

static void fn_like(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const struct bound *b = sqlite3_user_data(ctx);
	sqlite3 *db = sqlite3_context_db_handle(ctx);
	const unsigned char *p = sqlite3_value_text(argv[0]);
	int np = sqlite3_value_bytes(argv[0]);
	const unsigned char *s, *e;
	struct pat pt = {.glob = b->kind == K_GLOB, .esc = 0};
	int rc;

	if (np > sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, -1)) {
		sqlite3_result_error(ctx, "LIKE or GLOB pattern too complex",
				     -1);
		return;
	}
	if (argc == 3) {
		if (!(e = sqlite3_value_text(argv[2])))
			return;
		size_t ne = strlen((const char *)e);

		if (!ne || utf8_len(e, e + ne) != ne) {
			sqlite3_result_error(ctx,
					     "ESCAPE expression must be a "
					     "single character",
					     -1);
			return;
		}
		pt.esc = utf8_read(&e, e + ne);
	}
	s = sqlite3_value_text(argv[1]);
	if (!p || !s)
		return; /* NULL (or out of memory, which SQLite notes) */
	/* Both end at their first NUL, as in SQLite. */
	rc = match(&pt, p, p + strlen((const char *)p), s,
		   s + strlen((const char *)s), b);
	if (rc < 0)
		sqlite3_result_error(ctx, "interrupted", -1);
	else
		sqlite3_result_int(ctx, rc);
}

static void fn_instr(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	int th = sqlite3_value_type(argv[0]), tn = sqlite3_value_type(argv[1]);
	int text = !(th == SQLITE_BLOB && tn == SQLITE_BLOB);
	const unsigned char *h, *n, *at;
	size_t nh, nn, from = 0;
	int64_t pos = 1;

	(void)argc;
	if (th == SQLITE_NULL || tn == SQLITE_NULL)
		return;
	h = text ? sqlite3_value_text(argv[0]) : sqlite3_value_blob(argv[0]);
	nh = (size_t)sqlite3_value_bytes(argv[0]);
	n = text ? sqlite3_value_text(argv[1]) : sqlite3_value_blob(argv[1]);
	nn = (size_t)sqlite3_value_bytes(argv[1]);
	if ((nn && !n) || (nh && !h)) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	if (!nn) {
		sqlite3_result_int(ctx, 1);
		return;
	}
	for (;;) {
		at = from < nh ? memmem(h + from, nh - from, n, nn) : NULL;
		if (!at) {
			sqlite3_result_int(ctx, 0);
			return;
		}
		/* Text matches at a character's start only: the first
		 * byte, or one that is not a continuation byte (SQLite's
		 * steps). */
		if (!text || at == h || (*at & 0xc0) != 0x80)
			break;
		from = (size_t)(at - h) + 1;
	}
	for (const unsigned char *q = h; q < at; q++)
		pos += !text || q == h || (*q & 0xc0) != 0x80;
	sqlite3_result_int64(ctx, pos);
}

static void fn_replace(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	sqlite3 *db = sqlite3_context_db_handle(ctx);
	const unsigned char *x, *y, *z, *at;
	size_t nx, ny, nz, count = 0, from, len;
	int64_t out;
	char *r;

	(void)argc;
	if (!(x = sqlite3_value_text(argv[0])))
		return;
	nx = (size_t)sqlite3_value_bytes(argv[0]);
	if (!(y = sqlite3_value_text(argv[1])))
		return;
	if (!y[0]) {
		sqlite3_result_value(ctx, argv[0]);
		return;
	}
	ny = (size_t)sqlite3_value_bytes(argv[1]);
	if (!(z = sqlite3_value_text(argv[2])))
		return;
	nz = (size_t)sqlite3_value_bytes(argv[2]);
	for (from = 0; from < nx && (at = memmem(x + from, nx - from, y, ny));
	     count++)
		from = (size_t)(at - x) + ny;
	out = (int64_t)nx + (int64_t)count * ((int64_t)nz - (int64_t)ny);
	if (out > sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1)) {
		sqlite3_result_error_toobig(ctx);
		return;
	}
	if (!(r = sqlite3_malloc64((sqlite3_uint64)out + 1))) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	len = 0;
	for (from = 0; from < nx && (at = memmem(x + from, nx - from, y, ny));
	     from = (size_t)(at - x) + ny) {
		memcpy(r + len, x + from, (size_t)(at - x) - from);
		len += (size_t)(at - x) - from;
		memcpy(r + len, z, nz);
		len += nz;
	}
	memcpy(r + len, x + from, nx - from);
	len += nx - from;
	r[len] = 0;
	sqlite3_result_text64(ctx, r, len, sqlite3_free, SQLITE_UTF8);
}

/* One character of trim's set: its bytes, and its place in the set
 * (SQLite takes the first that fits). */
struct tchar {
	const unsigned char *p;
	size_t len, first;
};

static int tchar_cmp(const void *a, const void *b)
{
	const struct tchar *x = a, *y = b;
	int c;

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	if ((c = memcmp(x->p, y->p, x->len)))
		return c;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* The first character of the set (by place) among those that are the
 * bytes at p (when !tail) or end at p + n (tail): its length, 0: none. */
static size_t set_fits(const struct tchar *set, size_t nset, const size_t *lens,
		       size_t nlens, const unsigned char *p, size_t n, int tail)
{
	size_t best = 0, best_first = SIZE_MAX;

	for (size_t i = 0; i < nlens && lens[i] <= n; i++) {
		struct tchar key = {tail ? p + n - lens[i] : p, lens[i], 0};
		size_t lo = 0, hi = nset;

		/* The first entry not below key (its lowest place). */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (tchar_cmp(&set[mid], &key) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < nset && set[lo].len == key.len &&
		    !memcmp(set[lo].p, key.p, key.len) &&
		    set[lo].first < best_first) {
			best = key.len;
			best_first = set[lo].first;
		}
	}
	return best;
}

static void fn_trim(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const struct bound *b = sqlite3_user_data(ctx);
	const unsigned char *x, *y, *ye;
	size_t nx, ny, nset = 0, nlens = 0, cut;
	struct tchar *set = NULL;
	size_t *lens = NULL;
	unsigned long steps = 0;

	(void)argc;
	if (sqlite3_value_type(argv[0]) == SQLITE_NULL)
		return;
	if (!(x = sqlite3_value_text(argv[0])))
		return;
	nx = (size_t)sqlite3_value_bytes(argv[0]);
	if (!(y = sqlite3_value_text(argv[1])))
		return;
	ny = strlen((const char *)y); /* to its NUL, as SQLite */
	ye = y + ny;
	if (ny) {
		set = sqlite3_malloc64(ny * sizeof(*set));
		lens = sqlite3_malloc64(ny * sizeof(*lens));
		if (!set || !lens)
			goto nomem;
	}
	for (const unsigned char *q = y; q < ye; q += set[nset++].len) {
		set[nset].p = q;
		set[nset].len = utf8_len(q, ye);
		set[nset].first = nset;
	}
	qsort(set, nset, sizeof(*set), tchar_cmp);
	for (size_t i = 0; i < nset; i++)
		if (!nlens || lens[nlens - 1] != set[i].len)
			lens[nlens++] = set[i].len; /* ascending */
	while ((b->kind & TRIM_LEFT) && nx &&
	       (cut = set_fits(set, nset, lens, nlens, x, nx, 0))) {
		x += cut;
		nx -= cut;
		if (++steps % SQLFUNCS_CHECK_STEPS == 0 && b->expired &&
		    b->expired(b->arg))
			goto expired;
	}
	while ((b->kind & TRIM_RIGHT) && nx &&
	       (cut = set_fits(set, nset, lens, nlens, x, nx, 1))) {
		nx -= cut;
		if (++steps % SQLFUNCS_CHECK_STEPS == 0 && b->expired &&
		    b->expired(b->arg))
			goto expired;
	}
	sqlite3_result_text64(ctx, (const char *)x, nx, SQLITE_TRANSIENT,
			      SQLITE_UTF8);
	goto out;
expired:
	sqlite3_result_error(ctx, "interrupted", -1);
	goto out;
nomem:
	sqlite3_result_error_nomem(ctx);
out:
	sqlite3_free(set);
	sqlite3_free(lens);
}

int sqlfuncs_register_bounded(struct sqlite3 *db, int (*expired)(void *),
			      void *arg)
{
	static const struct {
		const char *name;
		int nargs, kind;
		void (*fn)(sqlite3_context *, int, sqlite3_value **);
	} fns[] = {
		{"like", 2, K_LIKE, fn_like},
		{"like", 3, K_LIKE, fn_like},
		{"glob", 2, K_GLOB, fn_like},
		{"instr", 2, 0, fn_instr},
		{"replace", 3, 0, fn_replace},
		{"trim", 2, TRIM_LEFT | TRIM_RIGHT, fn_trim},
		{"ltrim", 2, TRIM_LEFT, fn_trim},
		{"rtrim", 2, TRIM_RIGHT, fn_trim},
	};
	int rc = SQLITE_OK;

	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(fns) / sizeof(*fns);
	     i++) {
		/* One copy per function, freed with it (by SQLite, when the
		 * connection closes or the function is replaced). */
		struct bound *b = sqlite3_malloc(sizeof(*b));

		if (!b)
			return SQLITE_NOMEM;
		b->expired = expired;
		b->arg = arg;
		b->kind = fns[i].kind;
		rc = sqlite3_create_function_v2(
			db, fns[i].name, fns[i].nargs,
			SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
			b, fns[i].fn, NULL, NULL, sqlite3_free);
	}
	return rc;
}
