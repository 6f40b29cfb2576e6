/*
 * pyafter: a call of the agent's once a module the program imports has
 * run, before its import returns.
 *
 * The agent never imports torch; it waits for the program to.  Looking
 * for the module now and then (the comm recorder's poll) leaves a window:
 * a DDP model made right after `import torch` gets no hook of ours, and is
 * never recorded.  A watch closes it: the recorder installs from the
 * importing thread as the module finishes, and its poll stays for what a
 * watch cannot see (a module imported before the watch, a finder of the
 * program's first on sys.meta_path).
 *
 * The watch is an object first on sys.meta_path (the program sees it
 * there, a probing.Watch; its code is C, so no frame of it shows in the
 * program's tracers) until pyafter_unwatch(); in a forked child it calls
 * nothing.
 *
 * Threads: with the GIL held; done runs in the thread that imports.
 */
#ifndef PYAFTER_H
#define PYAFTER_H

/* done(), with the GIL, once the module name has run in this process;
 * the watch replaces any earlier one (one watching the same is kept).  0,
 * or -1 (the watch not set: the caller's poll goes on). */
int pyafter_watch(const char *name, void (*done)(void));

/* No watch on sys.meta_path any more. */
void pyafter_unwatch(void);

#endif
