/*
 * output: see output.h.
 */
#include "output.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define TABLE_FLOOR 10     /* columns a cell keeps when the table is cut */
#define TABLE_FLOOR_LAST 7 /* ... where that is not enough */
#define CELL_BUF 1024 /* bytes of one fitted cell: CLI_CELL_MAX * 6 + … */
#define BAD_CP 0xFFFFFFFFu

struct cli_table {
	int ncols;
	char **names;
	char **cells; /* nrows * ncols, row-major; NULL cells allowed */
	size_t nrows, cap;
	unsigned char *right; /* per column: COL_RIGHT, COL_KEY */
	int upper;
};

#define COL_RIGHT 1 /* right-aligned on a TTY */
#define COL_KEY 2   /* never cut to fit the terminal: the first column */

struct cli_table *cli_table_new(int ncols, const char *const *names)
{
	struct cli_table *t;

	if (ncols <= 0 || ncols > CLI_TABLE_COLS_MAX)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->names = calloc(ncols, sizeof(char *));
	t->right = calloc(ncols, 1);
	if (!t->names || !t->right)
		goto fail;
	t->right[0] = COL_KEY; /* the first column names the row */
	for (int i = 0; i < ncols; i++) {
		t->names[i] = strdup(names[i] ? names[i] : "");
		if (!t->names[i])
			goto fail;
	}
	return t;
fail:
	cli_table_free(t);
	return NULL;
}

void cli_table_free(struct cli_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	if (t->names)
		for (int i = 0; i < t->ncols; i++)
			free(t->names[i]);
	free(t->names);
	free(t->right);
	free(t);
}

int cli_table_add(struct cli_table *t, const char *const *cells)
{
	size_t base = t->nrows * (size_t)t->ncols;

	if (t->nrows >= CLI_TABLE_ROWS_MAX)
		return -1;
	if (t->nrows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **nc = realloc(t->cells, cap * t->ncols * sizeof(char *));
		if (!nc)
			return -1;
		t->cells = nc;
		t->cap = cap;
	}
	for (int i = 0; i < t->ncols; i++) {
		t->cells[base + i] = NULL;
		if (cells[i] && !(t->cells[base + i] = strdup(cells[i]))) {
			while (i-- > 0)
				free(t->cells[base + i]);
			return -1;
		}
	}
	t->nrows++;
	return 0;
}

int cli_table_rows(const struct cli_table *t)
{
	return (int)t->nrows;
}

void cli_table_align_right(struct cli_table *t, int col)
{
	if (col >= 0 && col < t->ncols)
		t->right[col] |= COL_RIGHT;
}

void cli_table_upper_header(struct cli_table *t)
{
	t->upper = 1;
}

/* The terminal behind a pager (cli_term_keep): its width, or 0. */
static int kept_width;

void cli_term_keep(int width)
{
	kept_width = width > 0 ? width : 80;
}

int cli_isatty(FILE *f)
{
	return (f == stdout && kept_width) || isatty(fileno(f));
}

int cli_color(void)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

	return cli_isatty(stdout) && !(no && *no) &&
	       !(term && !strcmp(term, "dumb"));
}

int cli_term_width(void)
{
	struct winsize ws;

	if (kept_width)
		return kept_width;
	if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

/* Decodes one UTF-8 sequence from s (n > 0 bytes).  Returns the bytes it
 * takes; *cp is BAD_CP for an invalid byte (which then takes one). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t c = s[0], min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if ((c & 0xE0) == 0xC0)
		len = 2, c &= 0x1F, min = 0x80;
	else if ((c & 0xF0) == 0xE0)
		len = 3, c &= 0x0F, min = 0x800;
	else if ((c & 0xF8) == 0xF0)
		len = 4, c &= 0x07, min = 0x10000;
	else
		goto bad;
	if (len > n)
		goto bad;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			goto bad;
		c = (c << 6) | (s[i] & 0x3F);
	}
	if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		goto bad;
	*cp = c;
	return len;
bad:
	*cp = BAD_CP;
	return 1;
}

/* Terminal columns of a printable code point. */
static int cp_width(uint32_t c)
{
	if ((c >= 0x0300 && c <= 0x036F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
	    (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x200B && c <= 0x200F) ||
	    (c >= 0x20D0 && c <= 0x20FF) || (c >= 0xFE00 && c <= 0xFE0F) ||
	    (c >= 0xFE20 && c <= 0xFE2F))
		return 0;
	if ((c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0x303E) ||
	    (c >= 0x3041 && c <= 0x33FF) || (c >= 0x3400 && c <= 0x4DBF) ||
	    (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xA000 && c <= 0xA4CF) ||
	    (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) ||
	    (c >= 0xFE30 && c <= 0xFE4F) || (c >= 0xFF00 && c <= 0xFF60) ||
	    (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
	    (c >= 0x1F900 && c <= 0x1F9FF) || (c >= 0x20000 && c <= 0x3FFFD))
		return 2;
	return 1;
}

size_t cli_text_width(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t w = 0;

	while (n > 0) {
		uint32_t c;
		size_t k = utf8_next(p, n, &c);
		if (c == BAD_CP)
			w += 1;
		else if (c >= 0x20 && c != 0x7F && !(c >= 0x80 && c < 0xA0))
			w += cp_width(c);
		p += k;
		n -= k;
	}
	return w;
}

/*
 * How the next unit of s shows on one terminal line: its text in rep
 * (NUL-terminated) and its columns in *cols.  Returns the bytes of s it
 * takes.
 */
static size_t render_unit(const unsigned char *s, size_t n, char rep[16],
			  size_t *cols)
{
	uint32_t c;
	size_t k = utf8_next(s, n, &c);

	if (c == BAD_CP) {
		snprintf(rep, 16, "\\x%02x", s[0]);
	} else if (c == '\n') {
		strcpy(rep, "\\n");
	} else if (c == '\t') {
		strcpy(rep, "\\t");
	} else if (c == '\r') {
		strcpy(rep, "\\r");
	} else if (c < 0x20 || c == 0x7F) {
		snprintf(rep, 16, "\\x%02x", (unsigned)c);
	} else if (c >= 0x80 && c < 0xA0) {
		snprintf(rep, 16, "\\u%04x", (unsigned)c);
	} else {
		memcpy(rep, s, k);
		rep[k] = '\0';
		*cols = cp_width(c);
		return k;
	}
	*cols = strlen(rep);
	return k;
}

char *cli_text_fit(const char *s, size_t max_cols, char *out, size_t outlen)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), total = 0, used = 0, cols = 0, room;
	char rep[16];
	int cut = 0;

	if (outlen == 0)
		return out;
	/* First pass: does all of it fit? */
	for (size_t i = 0; i < n;) {
		size_t w;
		i += render_unit(p + i, n - i, rep, &w);
		total += w;
		used += strlen(rep);
	}
	cut = (max_cols > 0 && total > max_cols) || used + 1 > outlen;
	/* Leave room for "…" (one column, three bytes) when cutting. */
	room = cut ? (max_cols > 0 ? max_cols - 1 : (size_t)-1) : (size_t)-1;
	used = 0;
	for (size_t i = 0; i < n;) {
		size_t w, len;
		size_t k = render_unit(p + i, n - i, rep, &w);
		len = strlen(rep);
		if (cols + w > room || used + len + (cut ? 4 : 1) > outlen)
			break;
		memcpy(out + used, rep, len);
		used += len;
		cols += w;
		i += k;
	}
	if (cut && used + 4 <= outlen) {
		memcpy(out + used, "\xE2\x80\xA6", 3);
		used += 3;
	}
	out[used] = '\0';
	return out;
}

void cli_csv_field(FILE *f, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* A JSON string; bytes that are not UTF-8 are taken as Latin-1. */
static void json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	fputc('"', f);
	while (n > 0) {
		uint32_t c;
		size_t k = utf8_next(p, n, &c);
		if (c == BAD_CP)
			fprintf(f, "\\u%04x", p[0]);
		else if (c == '"' || c == '\\')
			fprintf(f, "\\%c", (int)c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", (unsigned)c);
		else
			fwrite(p, 1, k, f);
		p += k;
		n -= k;
	}
	fputc('"', f);
}

static const char *cell(const struct cli_table *t, size_t row, int col)
{
	return t->cells[row * t->ncols + col];
}

static void header_text(const struct cli_table *t, int col, char *out,
			size_t outlen, size_t max_cols)
{
	cli_text_fit(t->names[col], max_cols, out, outlen);
	if (t->upper)
		for (char *q = out; *q; q++)
			*q = toupper((unsigned char)*q);
}

/* A cell on a line of its own kind: backslashes doubled, and every
 * control character (tab, newline and the ones a terminal would act on)
 * and byte that is not UTF-8 as render_unit escapes it. */
static void print_tsv_cell(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = s ? strlen(s) : 0, w;
	char rep[16];

	for (size_t i = 0; i < n;) {
		if (p[i] == '\\') {
			fputs("\\\\", f);
			i++;
			continue;
		}
		i += render_unit(p + i, n - i, rep, &w);
		fputs(rep, f);
	}
}

static void print_tsv(const struct cli_table *t, FILE *f)
{
	char buf[CELL_BUF];

	for (int c = 0; c < t->ncols; c++) {
		header_text(t, c, buf, sizeof(buf), 0);
		if (c)
			fputc('\t', f);
		print_tsv_cell(f, t->upper ? buf : t->names[c]);
	}
	fputc('\n', f);
	for (size_t r = 0; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			if (c)
				fputc('\t', f);
			print_tsv_cell(f, cell(t, r, c));
		}
		fputc('\n', f);
	}
}

static void print_csv(const struct cli_table *t, FILE *f)
{
	for (int c = 0; c < t->ncols; c++) {
		if (c)
			fputc(',', f);
		cli_csv_field(f, t->names[c]);
	}
	fputs("\r\n", f);
	for (size_t r = 0; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			if (c)
				fputc(',', f);
			cli_csv_field(f, cell(t, r, c));
		}
		fputs("\r\n", f);
	}
}

static void print_json(const struct cli_table *t, FILE *f)
{
	fputc('[', f);
	for (size_t r = 0; r < t->nrows; r++) {
		fputs(r ? ",\n  {" : "\n  {", f);
		for (int c = 0; c < t->ncols; c++) {
			const char *v = cell(t, r, c);
			if (c)
				fputs(", ", f);
			json_string(f, t->names[c]);
			fputs(": ", f);
			if (v)
				json_string(f, v);
			else
				fputs("null", f);
		}
		fputc('}', f);
	}
	fputs(t->nrows ? "\n]\n" : "]\n", f);
}

static void rule(FILE *f, const size_t *w, const unsigned char *hide,
		 int ncols, const char *l, const char *m, const char *r)
{
	int first = 1;

	fputs(l, f);
	for (int c = 0; c < ncols; c++) {
		if (hide[c])
			continue;
		if (!first)
			fputs(m, f);
		first = 0;
		for (size_t i = 0; i < w[c] + 2; i++)
			fputs("\xE2\x94\x80", f); /* ─ */
	}
	fputs(r, f);
	fputc('\n', f);
}

static void boxed_cell(FILE *f, const char *text, size_t width, int right)
{
	size_t pad = width - cli_text_width(text, strlen(text));

	fputs("\xE2\x94\x82 ", f); /* │ */
	if (right)
		fprintf(f, "%*s%s ", (int)pad, "", text);
	else
		fprintf(f, "%s%*s ", text, (int)pad, "");
}

/* Fits columns of natural widths nat into cols terminal columns (with the box's
 * "│ " and " " around each), hidden ones left out: the widest column
 * gives up a column at a time, down to its floor, until the table fits
 * or none can give (-1).  The widths into w. */
static int fit_widths(size_t *w, const size_t *nat, const size_t *floor,
		      const unsigned char *hide, int ncols, size_t cols)
{
	size_t total = 1;

	memcpy(w, nat, (size_t)ncols * sizeof(*w));
	for (int c = 0; c < ncols; c++)
		if (!hide[c])
			total += w[c] + 3;
	while (total > cols) {
		int widest = -1;

		for (int c = 0; c < ncols; c++)
			if (!hide[c] && w[c] > floor[c] &&
			    (widest < 0 || w[c] > w[widest]))
				widest = c;
		if (widest < 0)
			return -1;
		w[widest]--;
		total--;
	}
	return 0;
}

/* Does column c say nothing: rows, and every cell empty or "-"?  (NULL
 * says something: SQL's NULL.) */
static int blank_column(const struct cli_table *t, int c)
{
	for (size_t r = 0; r < t->nrows; r++) {
		const char *v = cell(t, r, c);

		if (!v || (*v && strcmp(v, "-")))
			return 0;
	}
	return t->nrows > 0;
}

/* "(to fit 80 columns, not shown: RANK, JOB (empty), MB; -f json shows
 * all)", cut to the terminal. */
static void say_hidden(const struct cli_table *t, FILE *f,
		       const unsigned char *hide, size_t cols)
{
	char line[CELL_BUF], name[CELL_BUF], fit[CELL_BUF];
	size_t len;
	int n = 0;

	len = (size_t)snprintf(line, sizeof(line),
			       "(to fit %zu columns, not shown:", cols);
	for (int c = 0; c < t->ncols && len < sizeof(line); c++) {
		if (!hide[c])
			continue;
		header_text(t, c, name, sizeof(name), CLI_CELL_MAX);
		len += (size_t)snprintf(line + len, sizeof(line) - len,
					"%s %s%s", n++ ? "," : "", name,
					hide[c] == 1 ? " (empty)" : "");
	}
	if (len < sizeof(line))
		snprintf(line + len, sizeof(line) - len,
			 "; -f json shows all)");
	fprintf(f, "%s\n", cli_text_fit(line, cols, fit, sizeof(fit)));
}

static void print_boxed(const struct cli_table *t, FILE *f)
{
	size_t *w = calloc(t->ncols, sizeof(size_t));
	size_t *floor = calloc(t->ncols, sizeof(size_t));
	size_t *nat = calloc(t->ncols, sizeof(size_t));
	unsigned char *hide = calloc(t->ncols, 1);
	size_t cols = (size_t)cli_term_width();
	char buf[CELL_BUF];

	if (!w || !floor || !nat || !hide) {
		free(w);
		free(floor);
		free(nat);
		free(hide);
		return;
	}
	for (int c = 0; c < t->ncols; c++) {
		header_text(t, c, buf, sizeof(buf), CLI_CELL_MAX);
		w[c] = cli_text_width(buf, strlen(buf));
		/* A column keeps TABLE_FLOOR columns, or its name's. */
		floor[c] = w[c] > TABLE_FLOOR ? w[c] : TABLE_FLOOR;
	}
	for (size_t r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++) {
			const char *v = cell(t, r, c);
			size_t cw;
			cli_text_fit(v ? v : "NULL", CLI_CELL_MAX, buf,
				     sizeof(buf));
			cw = cli_text_width(buf, strlen(buf));
			if (cw > w[c])
				w[c] = cw;
		}
	for (int c = 0; c < t->ncols; c++)
		if (floor[c] > w[c] || (t->right[c] & COL_KEY))
			floor[c] = w[c];
	memcpy(nat, w, (size_t)t->ncols * sizeof(*w));
	/* Still too wide: all but the key columns go down to
	 * TABLE_FLOOR_LAST (a pid, a rank, a small number stay whole). */
	if (fit_widths(w, nat, floor, hide, t->ncols, cols) < 0) {
		for (int c = 0; c < t->ncols; c++)
			if (!(t->right[c] & COL_KEY) &&
			    floor[c] > TABLE_FLOOR_LAST)
				floor[c] = TABLE_FLOOR_LAST;
		/* And a column that says nothing (every cell empty, "-"
		 * or NULL) gives its place up. */
		if (fit_widths(w, nat, floor, hide, t->ncols, cols) < 0)
			for (int c = 0; c < t->ncols; c++)
				hide[c] = !(t->right[c] & COL_KEY) &&
					  blank_column(t, c);
		/* Then the last columns go, named below the table. */
		for (int c = t->ncols - 1;
		     fit_widths(w, nat, floor, hide, t->ncols, cols) < 0 && c > 0;
		     c--)
			if (!hide[c] && !(t->right[c] & COL_KEY))
				hide[c] = 2;
	}
	rule(f, w, hide, t->ncols, "\xE2\x94\x8C", "\xE2\x94\xAC",
	     "\xE2\x94\x90");
	for (int c = 0; c < t->ncols; c++) {
		if (hide[c])
			continue;
		header_text(t, c, buf, sizeof(buf), w[c]);
		boxed_cell(f, buf, w[c], 0);
	}
	fputs("\xE2\x94\x82\n", f);
	if (t->nrows)
		rule(f, w, hide, t->ncols, "\xE2\x94\x9C", "\xE2\x94\xBC",
		     "\xE2\x94\xA4");
	for (size_t r = 0; r < t->nrows; r++) {
		for (int c = 0; c < t->ncols; c++) {
			const char *v = cell(t, r, c);

			if (hide[c])
				continue;
			cli_text_fit(v ? v : "NULL", w[c], buf, sizeof(buf));
			boxed_cell(f, buf, w[c], t->right[c] & COL_RIGHT);
		}
		fputs("\xE2\x94\x82\n", f);
	}
	rule(f, w, hide, t->ncols, "\xE2\x94\x94", "\xE2\x94\xB4",
	     "\xE2\x94\x98");
	for (int c = 0; c < t->ncols; c++)
		if (hide[c]) {
			say_hidden(t, f, hide, cols);
			break;
		}
	free(w);
	free(floor);
	free(nat);
	free(hide);
}

void cli_table_print(const struct cli_table *t, FILE *f, enum cli_format fmt,
		     int tty)
{
	switch (fmt) {
	case CLI_FORMAT_JSON:
		print_json(t, f);
		break;
	case CLI_FORMAT_CSV:
		print_csv(t, f);
		break;
	case CLI_FORMAT_AUTO:
	case CLI_FORMAT_TABLE:
		if (tty)
			print_boxed(t, f);
		else
			print_tsv(t, f);
		break;
	}
}
