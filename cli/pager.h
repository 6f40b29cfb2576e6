/*
 * pager: long output through a pager on a terminal, as git does.
 *
 * Where stdout is a terminal and the command's output may be long
 * (CMD_PAGED), stdout becomes a pipe into the pager: $PROBING_PAGER, else
 * $PAGER, else less where it is installed, with LESS=FRX when LESS is
 * unset (quit when it fits one screen, colours through, the screen kept
 * after).  An empty pager or "cat" means none; so do --no-pager and a
 * pager whose program is not found (its output is printed directly).  What
 * the command asks of its terminal keeps its answers: cli_isatty(stdout)
 * stays true and cli_term_width() the terminal's width.
 */
#ifndef CLI_PAGER_H
#define CLI_PAGER_H

/* Starts the pager when stdout is a terminal and one is wanted.  Never
 * fails: without a pager, stdout stays as it was. */
void cli_pager_start(void);

/* Ends the pager's input and waits for the pager to end (the user
 * leaving it).  Nothing when none was started. */
void cli_pager_end(void);

#endif
