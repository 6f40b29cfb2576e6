/*
 * flamegraph: the profile model, labels, the call tree and the folded
 * format.  See flamegraph.h; JSON formats in flamegraph_json.c, the SVG
 * in flamegraph_svg.c.
 */
#include "flamegraph.h"
#include "flamegraph_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS_MAX (1u << 20)
#define PATH_WALK_MAX (FLAMEGRAPH_DEPTH_MAX * 4) /* stops cycles */

/* ---- the model -------------------------------------------------------- */

struct flamegraph *flamegraph_new(void)
{
	struct flamegraph *fg = calloc(1, sizeof(*fg));

	if (!fg)
		return NULL;
	fg->path = malloc((PATH_WALK_MAX + 4) * sizeof(*fg->path));
	if (!fg->path) {
		free(fg);
		return NULL;
	}
	return fg;
}

static void names_reset(struct flamegraph *fg)
{
	for (size_t i = 0; i < fg->nnames; i++)
		free(fg->names[i].label);
	free(fg->names);
	fg->names = NULL;
	fg->nnames = fg->capnames = 0;
	sampler_map_release(&fg->name_map);
	free(fg->nodes);
	fg->nodes = NULL;
	fg->nnodes = fg->capnodes = 0;
	sampler_map_release(&fg->child_map);
	for (size_t i = 0; i < fg->nframes; i++)
		fg->frames[i].name = UINT32_MAX;
}

void flamegraph_free(struct flamegraph *fg)
{
	if (!fg)
		return;
	names_reset(fg);
	for (size_t i = 0; i < fg->nframes; i++) {
		free(fg->frames[i].func);
		free(fg->frames[i].file);
	}
	for (size_t i = 0; i < fg->nthreads; i++)
		free(fg->threads[i].name);
	free(fg->frames);
	free(fg->stacks);
	free(fg->threads);
	free(fg->samples);
	sampler_map_release(&fg->frame_map);
	sampler_map_release(&fg->stack_map);
	sampler_map_release(&fg->thread_map);
	free(fg->path);
	free(fg);
}

/* Makes room for one more element in *arr (of *cap); 0 or -ENOMEM. */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 256;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

#define GROW(fg, what)                                                         \
	grow((void **)&(fg)->what, &(fg)->cap##what, (fg)->n##what,            \
	     sizeof(*(fg)->what))

int flamegraph_add_frame(struct flamegraph *fg, uint32_t id, const char *func,
			 const char *file, int line, int native)
{
	struct fg_frame *f;
	char *fu, *fi;
	uint32_t idx;

	if (!id)
		return -EINVAL;
	fu = strdup(func ? func : "?");
	fi = strdup(file ? file : "");
	if (!fu || !fi)
		goto nomem;
	if (sampler_map_get(&fg->frame_map, id, &idx) == 0) {
		f = &fg->frames[idx];
		free(f->func);
		free(f->file);
	} else {
		if (GROW(fg, frames) < 0 ||
		    sampler_map_put(&fg->frame_map, id,
				    (uint32_t)fg->nframes) < 0)
			goto nomem;
		f = &fg->frames[fg->nframes++];
	}
	f->func = fu;
	f->file = fi;
	f->line = line;
	f->native = native;
	f->name = UINT32_MAX;
	return 0;
nomem:
	free(fu);
	free(fi);
	return -ENOMEM;
}

int flamegraph_add_stack(struct flamegraph *fg, uint32_t id, uint32_t parent,
			 uint32_t frame)
{
	uint32_t idx;

	if (!id)
		return -EINVAL;
	if (sampler_map_get(&fg->stack_map, id, &idx) < 0) {
		if (GROW(fg, stacks) < 0 ||
		    sampler_map_put(&fg->stack_map, id,
				    (uint32_t)fg->nstacks) < 0)
			return -ENOMEM;
		idx = (uint32_t)fg->nstacks++;
	}
	fg->stacks[idx].parent = parent;
	fg->stacks[idx].frame = frame;
	return 0;
}

/* The index of thread_id, declared now when new; UINT32_MAX on failure. */
static uint32_t thread_index(struct flamegraph *fg, uint64_t thread_id)
{
	uint32_t idx;

	if (sampler_map_get(&fg->thread_map, thread_id + 1, &idx) == 0)
		return idx;
	if (fg->nthreads >= THREADS_MAX || GROW(fg, threads) < 0 ||
	    sampler_map_put(&fg->thread_map, thread_id + 1,
			    (uint32_t)fg->nthreads) < 0)
		return UINT32_MAX;
	idx = (uint32_t)fg->nthreads++;
	memset(&fg->threads[idx], 0, sizeof(fg->threads[idx]));
	fg->threads[idx].id = thread_id;
	return idx;
}

int flamegraph_add_thread(struct flamegraph *fg, uint64_t thread_id,
			  long native_id, const char *name)
{
	uint32_t idx = thread_index(fg, thread_id);
	char *n;

	if (idx == UINT32_MAX)
		return -ENOMEM;
	n = name ? strdup(name) : NULL;
	if (name && !n)
		return -ENOMEM;
	free(fg->threads[idx].name);
	fg->threads[idx].name = n;
	fg->threads[idx].native = native_id;
	return 0;
}

int flamegraph_add_sample(struct flamegraph *fg, double ts, uint64_t thread_id,
			  uint32_t stack, enum flamegraph_state state,
			  uint64_t weight)
{
	uint32_t t;
	struct fg_sample *s;

	if (fg->nsamples >= FLAMEGRAPH_SAMPLES_MAX)
		return -E2BIG;
	t = thread_index(fg, thread_id);
	if (t == UINT32_MAX || GROW(fg, samples) < 0)
		return -ENOMEM;
	s = &fg->samples[fg->nsamples++];
	s->ts = ts;
	s->stack = stack;
	s->task_frame = s->task_stack = 0;
	s->thread = t;
	s->weight = weight > UINT32_MAX ? UINT32_MAX : (uint32_t)weight;
	s->state = (uint8_t)(state <= FLAMEGRAPH_IDLE ? state
						       : FLAMEGRAPH_IDLE);
	return 0;
}

int flamegraph_sample_task(struct flamegraph *fg, uint32_t task_frame,
			   uint32_t task_stack)
{
	struct fg_sample *s;

	if (!fg->nsamples || !task_frame || !task_stack)
		return -EINVAL;
	s = &fg->samples[fg->nsamples - 1];
	s->task_frame = task_frame;
	s->task_stack = task_stack;
	return 0;
}

size_t flamegraph_samples(const struct flamegraph *fg)
{
	return fg->nsamples;
}

/* ---- labels and paths ------------------------------------------------- */

static uint64_t label_hash(const char *s, enum fg_kind kind)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)kind;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h ? h : 1;
}

uint32_t fg_name(struct flamegraph *fg, const char *label, enum fg_kind kind,
		 const char *func, const char *file, int line)
{
	/* Labels are told apart by a 64-bit hash: with fewer than a
	 * million labels a collision is as likely as a cosmic ray. */
	uint64_t h = label_hash(label, kind);
	struct fg_name *n;
	uint32_t idx;

	if (sampler_map_get(&fg->name_map, h, &idx) == 0)
		return idx;
	if (GROW(fg, names) < 0)
		return UINT32_MAX;
	n = &fg->names[fg->nnames];
	n->label = strdup(label);
	if (!n->label ||
	    sampler_map_put(&fg->name_map, h, (uint32_t)fg->nnames) < 0) {
		free(n->label);
		return UINT32_MAX;
	}
	n->func = func;
	n->file = file;
	n->line = line;
	n->kind = kind;
	return (uint32_t)fg->nnames++;
}

/* file without what comes before site-packages/ or dist-packages/. */
static const char *short_file(const char *file)
{
	static const char *const marks[] = {"site-packages/",
					    "dist-packages/"};
	const char *best = file;

	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
		const char *p = strstr(file, marks[i]);

		if (p && p[strlen(marks[i])])
			best = p + strlen(marks[i]);
	}
	return best;
}

static uint32_t frame_name(struct flamegraph *fg, struct fg_frame *f)
{
	char label[2048];
	const char *file;

	if (f->name != UINT32_MAX)
		return f->name;
	if (f->native) {
		file = strrchr(f->file, '/');
		file = file ? file + 1 : f->file;
		/* "[libfoo.so]": a function without a symbol, named by its
		 * library already. */
		snprintf(label, sizeof(label),
			 *file && f->func[0] != '[' ? "%s (%s)" : "%s",
			 f->func, file);
	} else {
		file = short_file(f->file);
		if (fg->o->lines && f->line >= 0)
			snprintf(label, sizeof(label), "%s (%s:%d)", f->func,
				 file, f->line);
		else
			snprintf(label, sizeof(label), "%s (%s)", f->func,
				 file);
	}
	f->name = fg_name(fg, label, f->native ? FG_NATIVE : FG_PY, f->func,
			  f->file, fg->o->lines ? f->line : -1);
	return f->name;
}

static uint32_t unknown_name(struct flamegraph *fg)
{
	return fg_name(fg, "[unknown]", FG_UNKNOWN, NULL, NULL, -1);
}

/* "task NAME" of a sample's task frame. */
static uint32_t task_name(struct flamegraph *fg, uint32_t frame)
{
	char label[600];
	uint32_t nm;

	if (sampler_map_get(&fg->frame_map, frame, &nm) < 0)
		return fg_name(fg, "task [unknown]", FG_TASK, NULL, NULL, -1);
	snprintf(label, sizeof(label), "task %s", fg->frames[nm].func);
	return fg_name(fg, label, FG_TASK, NULL, NULL, -1);
}

size_t fg_path(struct flamegraph *fg, const struct fg_sample *s)
{
	uint32_t *p = fg->path, id = s->stack, idx, nm;
	/* With tasks: the walk ends at the task's coroutine. */
	uint32_t stop = fg->o->tasks && s->task_frame ? s->task_stack : 0;
	size_t n = 0, depth, start;
	int in_task = 0;

	/* Innermost first into p[2 ..], then reversed into place. */
	p += 2;
	while (id && n < PATH_WALK_MAX) {
		uint32_t name, at = id;

		if (sampler_map_get(&fg->stack_map, id, &idx) < 0) {
			p[n++] = unknown_name(fg);
			break;
		}
		if (sampler_map_get(&fg->frame_map, fg->stacks[idx].frame,
				    &nm) < 0)
			name = unknown_name(fg);
		else
			name = frame_name(fg, &fg->frames[nm]);
		id = fg->stacks[idx].parent;
		in_task = stop && at == stop;
		/* Native frames without a symbol ("[libfoo.so]") in a row
		 * are one: their return addresses say nothing more. */
		if (n && name == p[n - 1] && name != UINT32_MAX &&
		    fg->names[name].kind == FG_NATIVE &&
		    fg->names[name].label[0] == '[') {
			if (in_task)
				break;
			continue;
		}
		p[n++] = name;
		if (in_task)
			break;
	}
	for (size_t i = 0; i < n / 2; i++) {
		uint32_t t = p[i];

		p[i] = p[n - 1 - i];
		p[n - 1 - i] = t;
	}
	/* Too deep: keep the outer frames, they merge. */
	depth = n > FLAMEGRAPH_DEPTH_MAX ? FLAMEGRAPH_DEPTH_MAX : n;
	start = 2;
	if (in_task)
		fg->path[--start] = task_name(fg, s->task_frame);
	if (fg->o->threads) {
		const struct fg_thread *t = &fg->threads[s->thread];
		char label[512];

		if (t->name)
			snprintf(label, sizeof(label), "%s (thread %ld)",
				 t->name, t->native);
		else
			snprintf(label, sizeof(label), "thread %llu",
				 (unsigned long long)t->id);
		fg->path[--start] = fg_name(fg, label, FG_THREAD, NULL, NULL,
					    -1);
	}
	if (fg->o->states && s->state != FLAMEGRAPH_RUNNING)
		fg->path[2 + depth++] =
			s->state == FLAMEGRAPH_IDLE
				? fg_name(fg, "(idle)", FG_STATE, NULL, NULL,
					  -1)
				: fg_name(fg, "(waiting for the GIL)",
					  FG_STATE, NULL, NULL, -1);
	if (start != 0)
		memmove(fg->path, fg->path + start,
			(depth + 2 - start) * sizeof(*fg->path));
	n = depth + 2 - start;
	for (size_t i = 0; i < n; i++)
		if (fg->path[i] == UINT32_MAX)
			fg->err = -ENOMEM;
	return n;
}

/* ---- the call tree ---------------------------------------------------- */

static uint32_t tree_child(struct flamegraph *fg, uint32_t node, uint32_t name)
{
	uint64_t key = ((uint64_t)node + 1) << 32 | name;
	uint32_t c;

	if (sampler_map_get(&fg->child_map, key, &c) == 0)
		return c;
	if (GROW(fg, nodes) < 0 ||
	    sampler_map_put(&fg->child_map, key, (uint32_t)fg->nnodes) < 0) {
		fg->err = -ENOMEM;
		return UINT32_MAX;
	}
	c = (uint32_t)fg->nnodes++;
	memset(&fg->nodes[c], 0, sizeof(fg->nodes[c]));
	fg->nodes[c].name = name;
	fg->nodes[c].parent = node;
	fg->nodes[c].depth = fg->nodes[node].depth + 1;
	fg->nodes[c].next = fg->nodes[node].first;
	fg->nodes[node].first = c;
	return c;
}

static int cmp_label(const void *a, const void *b, void *arg)
{
	struct flamegraph *fg = arg;
	const struct fg_node *x = &fg->nodes[*(const uint32_t *)a];
	const struct fg_node *y = &fg->nodes[*(const uint32_t *)b];

	return strcmp(fg->names[x->name].label, fg->names[y->name].label);
}

/* Builds the merged tree of all samples; children in label order. */
static int tree_build(struct flamegraph *fg)
{
	uint32_t *kids = NULL;
	size_t nkids;

	if (GROW(fg, nodes) < 0)
		return -ENOMEM;
	memset(&fg->nodes[0], 0, sizeof(fg->nodes[0]));
	fg->nodes[0].name = UINT32_MAX;
	fg->nnodes = 1;
	for (size_t i = 0; i < fg->nsamples && !fg->err; i++) {
		uint64_t w = fg->o->cpu ? fg->samples[i].weight : 1;
		size_t n;
		uint32_t node = 0;

		if (!w)
			continue;
		n = fg_path(fg, &fg->samples[i]);
		fg->nodes[0].total += w;
		for (size_t k = 0; k < n && !fg->err; k++) {
			node = tree_child(fg, node, fg->path[k]);
			if (node == UINT32_MAX)
				break;
			fg->nodes[node].total += w;
		}
		if (!fg->err)
			fg->nodes[node].self += w;
	}
	if (fg->err)
		return fg->err;
	/* Sort each node's children by label (flamegraph.pl's order). */
	kids = malloc((fg->nnodes ? fg->nnodes : 1) * sizeof(*kids));
	if (!kids)
		return -ENOMEM;
	for (size_t v = 0; v < fg->nnodes; v++) {
		nkids = 0;
		for (uint32_t c = fg->nodes[v].first; c; c = fg->nodes[c].next)
			kids[nkids++] = c;
		if (nkids < 2)
			continue;
		qsort_r(kids, nkids, sizeof(*kids), cmp_label, fg);
		fg->nodes[v].first = kids[0];
		for (size_t k = 0; k + 1 < nkids; k++)
			fg->nodes[kids[k]].next = kids[k + 1];
		fg->nodes[kids[nkids - 1]].next = 0;
	}
	free(kids);
	return 0;
}

/* A label as one folded field: no ';' (the separator), no line ends. */
static void folded_label(struct outbuf *b, const char *s)
{
	const char *run = s;

	for (; *s; s++) {
		if (*s != ';' && *s != '\n' && *s != '\r')
			continue;
		outbuf_putn(b, run, (size_t)(s - run));
		outbuf_putn(b, *s == ';' ? ":" : " ", 1);
		run = s + 1;
	}
	outbuf_putn(b, run, (size_t)(s - run));
}

static int render_folded(struct flamegraph *fg, struct outbuf *b)
{
	uint32_t *stack, v;
	size_t depth = 0;
	int rc = tree_build(fg);

	if (rc)
		return rc;
	stack = malloc((FLAMEGRAPH_DEPTH_MAX + 4) * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	/* Depth first, children in order; a node's line when it has
	 * samples of its own. */
	v = fg->nodes[0].first;
	while (v && !b->err) {
		const struct fg_node *nd = &fg->nodes[v];

		stack[depth++] = v;
		if (nd->self) {
			for (size_t i = 0; i < depth; i++) {
				if (i)
					outbuf_putn(b, ";", 1);
				folded_label(
					b,
					fg->names[fg->nodes[stack[i]].name]
						.label);
			}
			outbuf_printf(b, " %llu\n", (unsigned long long)nd->self);
		}
		if (nd->first) {
			v = nd->first;
			continue;
		}
		/* Up until a node has a next sibling. */
		while (depth && !fg->nodes[stack[depth - 1]].next)
			depth--;
		if (!depth)
			break;
		v = fg->nodes[stack[depth - 1]].next;
		depth--;
	}
	free(stack);
	return 0;
}

/* ---- dispatch --------------------------------------------------------- */

int flamegraph_render(struct flamegraph *fg, enum flamegraph_format format,
		      const struct flamegraph_opts *o, char **out, size_t *len,
		      char *err, size_t errlen)
{
	struct flamegraph_opts def = {.interval = 0.01}, flat;
	struct outbuf b = {.max = FLAMEGRAPH_OUTPUT_MAX};
	int rc;

	*out = NULL;
	*len = 0;
	names_reset(fg);
	fg->err = 0;
	fg->o = o ? o : &def;
	switch (format) {
	case FLAMEGRAPH_FOLDED:
		rc = render_folded(fg, &b);
		break;
	case FLAMEGRAPH_SPEEDSCOPE:
	case FLAMEGRAPH_CHROME:
		/* Per-thread formats: no thread root frames. */
		flat = *fg->o;
		flat.threads = 0;
		fg->o = &flat;
		rc = format == FLAMEGRAPH_CHROME ? fg_render_chrome(fg, &b)
						 : fg_render_speedscope(fg, &b);
		break;
	case FLAMEGRAPH_INSTANTS:
		flat = *fg->o;
		flat.threads = 0;
		fg->o = &flat;
		rc = fg_render_instants(fg, &b);
		break;
	case FLAMEGRAPH_SVG:
		rc = tree_build(fg);
		if (!rc)
			rc = fg_render_svg(fg, &b);
		break;
	default:
		rc = -EINVAL;
	}
	if (!rc)
		rc = b.err ? b.err : fg->err;
	if (!rc && !b.p)
		outbuf_putn(&b, "", 0);
	rc = rc ? rc : b.err;
	if (rc) {
		if (rc == -E2BIG)
			snprintf(err, errlen,
				 "the %s output is larger than %u MiB: take a "
				 "shorter time window",
				 flamegraph_format_name(format),
				 FLAMEGRAPH_OUTPUT_MAX >> 20);
		else
			snprintf(err, errlen, "%s: %s",
				 flamegraph_format_name(format),
				 rc == -EINVAL ? "unknown format"
					       : "out of memory");
		free(b.p);
		names_reset(fg);
		return rc;
	}
	*out = b.p;
	*len = b.len;
	names_reset(fg);
	return 0;
}

static const char *const format_names[] = {
	[FLAMEGRAPH_FOLDED] = "folded",
	[FLAMEGRAPH_SPEEDSCOPE] = "speedscope",
	[FLAMEGRAPH_CHROME] = "chrome",
	[FLAMEGRAPH_SVG] = "svg",
};

int flamegraph_format_parse(const char *name, enum flamegraph_format *out)
{
	for (size_t i = 0; i < sizeof(format_names) / sizeof(*format_names);
	     i++)
		if (name && !strcmp(name, format_names[i])) {
			*out = (enum flamegraph_format)i;
			return 0;
		}
	return -EINVAL;
}

const char *flamegraph_format_name(enum flamegraph_format f)
{
	return (unsigned)f < sizeof(format_names) / sizeof(*format_names)
		       ? format_names[f]
		       : "?";
}
