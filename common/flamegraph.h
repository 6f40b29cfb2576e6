/*
 * flamegraph: a recorded profile rendered for people and their tools.
 *
 * The caller declares frames, stacks (trie nodes: parent + frame, as in
 * profile.stacks) and threads, adds samples, and renders one of:
 *
 *   folded      collapsed stacks, one "root;...;leaf count" line per
 *               distinct stack (flamegraph.pl, speedscope, inferno read it)
 *   speedscope  speedscope's file format (one sampled profile per thread)
 *   chrome      Chrome trace event JSON (object form): per thread, nested
 *               complete ("X") events rebuilt from the sample timeline,
 *               opens in Perfetto and chrome://tracing
 *   svg         an interactive flamegraph drawn here: hover for details,
 *               click to zoom, Ctrl-F or "Search" to highlight by regular
 *               expression with the matched share, Esc to reset
 *   instants    Chrome trace events to go into a larger trace
 *               (probing/trace): an instant ("i") event per sample on its
 *               thread's track, named by its innermost frame, its state
 *               in args, and its stack where it differs from the
 *               thread's sample before; each event written as ",\n{...}", no
 *               document around them.  Not a format users ask for by name
 *               (flamegraph_format_parse does not know it).
 *
 * A frame is shown as "func (file)" — "func (file:line)" with lines on —
 * where file is cut after site-packages/ or dist-packages/ when it has
 * one; a native frame as "symbol (library)".  Frames with the same label
 * merge.  With states on, idle and GIL-waiting samples end in a synthetic
 * "(idle)" or "(waiting for the GIL)" frame.
 *
 * Weights: a sample counts 1, or with opts.cpu the CPU time its thread
 * used since its previous sample (folded counts and SVG widths are then
 * microseconds of CPU, speedscope weights seconds of CPU); the Chrome
 * trace is a timeline and ignores weights.
 *
 * Caps: FLAMEGRAPH_SAMPLES_MAX samples (more: -E2BIG), stacks deeper than
 * FLAMEGRAPH_DEPTH_MAX lose their innermost frames, output larger than
 * FLAMEGRAPH_OUTPUT_MAX bytes fails with -E2BIG and a message.
 *
 * Single-threaded; pure (no Python, no SQLite).  Strings given are copied.
 */
#ifndef FLAMEGRAPH_H
#define FLAMEGRAPH_H

#include <stddef.h>
#include <stdint.h>

#define FLAMEGRAPH_SAMPLES_MAX 4000000
#define FLAMEGRAPH_DEPTH_MAX 2048
#define FLAMEGRAPH_OUTPUT_MAX (12u << 20)
#define FLAMEGRAPH_SVG_WIDTH 1200

enum flamegraph_format {
	FLAMEGRAPH_FOLDED,
	FLAMEGRAPH_SPEEDSCOPE,
	FLAMEGRAPH_CHROME,
	FLAMEGRAPH_SVG,
	FLAMEGRAPH_INSTANTS,
};

enum flamegraph_state {
	FLAMEGRAPH_RUNNING = 0, /* on CPU */
	FLAMEGRAPH_GIL_WAIT = 1,
	FLAMEGRAPH_IDLE = 2,
};

struct flamegraph_opts {
	int lines;	   /* a frame per line, not per function */
	int threads;	   /* folded, svg: a root frame per thread */
	int tasks;	   /* a sample that ran an asyncio task: its stack from
			      the task's coroutine on, under a frame "task
			      NAME" (flamegraph_sample_task) */
	int states;	   /* "(idle)" / "(waiting for the GIL)" leaves */
	double interval;   /* seconds a sample stands for (> 0) */
	int cpu;	   /* sample weights are microseconds of CPU time (the
			      thread's since its previous sample), not 1 */
	const char *title; /* svg title, speedscope name; may be NULL */
	long pid;	   /* chrome, instants: the process id */
	double origin;	   /* instants: Unix seconds of the trace's time 0 */
};

struct flamegraph;

/* NULL when out of memory. */
struct flamegraph *flamegraph_new(void);
void flamegraph_free(struct flamegraph *fg);

/* Declarations; ids as in profile.frames / profile.stacks (> 0).  native
 * frames: func is the symbol, file the library.  line -1: none.  Each
 * returns 0, -EINVAL (id 0) or -ENOMEM; declaring an id again replaces
 * it. */
int flamegraph_add_frame(struct flamegraph *fg, uint32_t id, const char *func,
			 const char *file, int line, int native);
int flamegraph_add_stack(struct flamegraph *fg, uint32_t id, uint32_t parent,
			 uint32_t frame);
int flamegraph_add_thread(struct flamegraph *fg, uint64_t thread_id,
			  long native_id, const char *name);

/* A sample of thread_id (declared or not) at ts (seconds) with stack
 * (0: empty) and weight (1, or microseconds of CPU with opts.cpu; capped
 * at UINT32_MAX).  Unknown stacks and frames render as "[unknown]".  0,
 * -ENOMEM or -E2BIG. */
int flamegraph_add_sample(struct flamegraph *fg, double ts, uint64_t thread_id,
			  uint32_t stack, enum flamegraph_state state,
			  uint64_t weight);

/* The sample added last ran an asyncio task: task_frame (a frame declared
 * with the task's name as func) and task_stack, the node of its stack
 * that is the task's coroutine (profile.samples' task_frame_id and
 * task_stack_id).  0, or -EINVAL when there is no sample or an id is 0. */
int flamegraph_sample_task(struct flamegraph *fg, uint32_t task_frame,
			   uint32_t task_stack);

size_t flamegraph_samples(const struct flamegraph *fg);

/*
 * Renders; *out is a NUL-terminated heap string the caller frees, *len its
 * length.  Returns 0, -ENOMEM, or -E2BIG past FLAMEGRAPH_OUTPUT_MAX, with
 * err.
 */
int flamegraph_render(struct flamegraph *fg, enum flamegraph_format format,
		      const struct flamegraph_opts *o, char **out, size_t *len,
		      char *err, size_t errlen);

/* "folded", "speedscope", "chrome", "svg" -> format; 0 or -EINVAL.
 * A sample's track in chrome and instants: its thread's native id, or
 * (none known) the low 31 bits of its thread_id. */
int flamegraph_format_parse(const char *name, enum flamegraph_format *out);
const char *flamegraph_format_name(enum flamegraph_format f);

#endif
