/*
 * flamegraph_impl: what flamegraph.c, flamegraph_json.c and
 * flamegraph_svg.c share.  Private to the flamegraph module.
 *
 * Render-time model: every frame gets a label (a "name", deduplicated),
 * every sample a path of names root first; folded and svg use the merged
 * call tree, speedscope and chrome the samples in (thread, time) order.
 */
#ifndef FLAMEGRAPH_IMPL_H
#define FLAMEGRAPH_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "flamegraph.h"
#include "outbuf.h"
#include "sampler_intern.h"

enum fg_kind { FG_PY, FG_NATIVE, FG_STATE, FG_THREAD, FG_TASK, FG_UNKNOWN };

struct fg_name {
	char *label; /* as shown */
	const char *func, *file; /* borrowed from the frame; NULL else */
	int line;
	enum fg_kind kind;
};

struct fg_frame {
	char *func, *file;
	int line, native;
	uint32_t name; /* this render's name, UINT32_MAX not yet */
};

struct fg_stack {
	uint32_t parent, frame;
};

struct fg_thread {
	uint64_t id;
	long native;
	char *name;
};

struct fg_sample {
	double ts;
	uint32_t stack, thread, weight;
	uint32_t task_frame, task_stack; /* 0: no task */
	uint8_t state;
};

struct fg_node {
	uint32_t name, parent, first, next; /* children: first, next */
	uint32_t depth;
	uint64_t total, self;
};

struct flamegraph {
	struct fg_frame *frames;
	size_t nframes, capframes;
	struct sampler_map frame_map; /* id -> index */
	struct fg_stack *stacks;
	size_t nstacks, capstacks;
	struct sampler_map stack_map;
	struct fg_thread *threads;
	size_t nthreads, capthreads;
	struct sampler_map thread_map; /* thread_id + 1 -> index */
	struct fg_sample *samples;
	size_t nsamples, capsamples;
	/* This render. */
	const struct flamegraph_opts *o;
	struct fg_name *names;
	size_t nnames, capnames;
	struct sampler_map name_map; /* label hash -> index */
	struct fg_node *nodes;	      /* [0] is the root */
	size_t nnodes, capnodes;
	struct sampler_map child_map; /* (node, name) -> child */
	uint32_t *path;		      /* FLAMEGRAPH_DEPTH_MAX * 4 + 4 */
	int err;
};

/* The path of sample s, root first, into fg->path; returns its length. */
size_t fg_path(struct flamegraph *fg, const struct fg_sample *s);

/* Name of a label (created when new); UINT32_MAX when out of memory. */
uint32_t fg_name(struct flamegraph *fg, const char *label, enum fg_kind kind,
		 const char *func, const char *file, int line);

int fg_render_speedscope(struct flamegraph *fg, struct outbuf *b);
int fg_render_chrome(struct flamegraph *fg, struct outbuf *b);
int fg_render_instants(struct flamegraph *fg, struct outbuf *b);
int fg_render_svg(struct flamegraph *fg, struct outbuf *b);

#endif
