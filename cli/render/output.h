/*
 * output: tables for people and for programs.
 *
 * A struct cli_table is a list of column names and rows of cells, all
 * strings (NULL is a missing value: SQL NULL, JSON null).  It copies what it
 * is given.  cli_table_print() writes it in one of four forms:
 *
 *   table (TTY)   boxed with Unicode box-drawing characters; control
 *                 characters shown as escapes; cells wider than
 *                 CLI_CELL_MAX columns cut with "…"; and the whole fit
 *                 to the terminal's width (cli_term_width): the widest
 *                 columns cut first, each down to 10 columns (or its
 *                 name's width), then where that is not enough to 7,
 *                 and then columns that say nothing (every cell empty
 *                 or "-") are left out, then the last ones, named in a
 *                 line below; the first column (it names the row)
 *                 never.
 *   table (pipe)  the header and the rows as tab-separated lines;
 *                 backslashes and control characters in cells escaped
 *                 (\\ \t \n \r \x1b \u009b), bytes that are not UTF-8
 *                 as \xNN; never cut.
 *   json          an array of objects, one per row, keys the column names,
 *                 values strings or null.
 *   csv           RFC 4180: CRLF line ends, fields with , " CR or LF
 *                 quoted, quotes doubled; header first; NULL empty.
 *
 * Widths count columns, not bytes: one per UTF-8 code point, two for East
 * Asian wide ones, none for combining marks (cli_text_width).
 *
 * Caps: CLI_TABLE_ROWS_MAX rows, CLI_TABLE_COLS_MAX columns; adding more
 * fails and leaves the table as it was.
 */
#ifndef CLI_OUTPUT_H
#define CLI_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#define CLI_TABLE_COLS_MAX 256
#define CLI_TABLE_ROWS_MAX 1000000
#define CLI_CELL_MAX 60 /* columns of one cell on a TTY */

enum cli_format {
	CLI_FORMAT_AUTO = 0, /* table */
	CLI_FORMAT_TABLE,
	CLI_FORMAT_JSON,
	CLI_FORMAT_CSV,
};

struct cli_table;

/* A new table with ncols columns named names[] (copied).  NULL on
 * allocation failure or ncols out of range. */
struct cli_table *cli_table_new(int ncols, const char *const *names);
void cli_table_free(struct cli_table *t);

/* Appends a row of ncols cells (copied; a NULL cell is a missing value).
 * Returns 0, or -1 past CLI_TABLE_ROWS_MAX or on allocation failure. */
int cli_table_add(struct cli_table *t, const char *const *cells);

int cli_table_rows(const struct cli_table *t);

/* Right-aligns column col on a TTY (numbers). */
void cli_table_align_right(struct cli_table *t, int col);

/* Shows the column names in upper case in the two table forms (JSON keys
 * and the CSV header keep them as given). */
void cli_table_upper_header(struct cli_table *t);

/* Writes t to f in format fmt; tty chooses between the two table forms. */
void cli_table_print(const struct cli_table *t, FILE *f, enum cli_format fmt,
		     int tty);

/* Columns that the UTF-8 text s (n bytes) takes on a terminal. */
size_t cli_text_width(const char *s, size_t n);

/*
 * Copies s into out (outlen bytes) for one line on a terminal: control
 * characters as escapes (\n, \t, \x1b), cut at max_cols columns with "…"
 * when max_cols > 0.  Never splits a UTF-8 sequence.  Returns out.
 */
char *cli_text_fit(const char *s, size_t max_cols, char *out, size_t outlen);

/* Writes s to f as a CSV field (RFC 4180); NULL writes nothing. */
void cli_csv_field(FILE *f, const char *s);

/* True when f is a terminal. */
int cli_isatty(FILE *f);

/* Colour on stdout: a terminal (behind a pager too), NO_COLOR unset or
 * empty (https://no-color.org), TERM not "dumb". */
int cli_color(void);

/* The width of the terminal on stdout in columns (80 when unknown). */
int cli_term_width(void);

/* stdout is a pipe into a pager with a terminal of width columns behind
 * it: cli_isatty(stdout) answers true, cli_term_width() width. */
void cli_term_keep(int width);

#endif
