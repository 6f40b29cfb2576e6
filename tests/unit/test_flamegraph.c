/*
 * flamegraph and sampler_intern: interning, the four output formats on a
 * small known profile, escaping, caps.
 */
#include "flamegraph.h"
#include "sampler_intern.h"
#include "test.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>

static void test_map(void)
{
	struct sampler_map m = {0};
	uint32_t v = 0;

	CHECK(sampler_map_get(&m, 5, &v) == -ENOENT);
	for (uint64_t k = 1; k <= 100000; k++)
		CHECK(sampler_map_put(&m, k * 7919, (uint32_t)k) == 0);
	CHECK(m.n == 100000);
	CHECK(sampler_map_get(&m, 7919 * 500, &v) == 0 && v == 500);
	CHECK(sampler_map_put(&m, 7919 * 500, 1) == 0 && m.n == 100000);
	CHECK(sampler_map_get(&m, 7919 * 500, &v) == 0 && v == 1);
	CHECK(sampler_map_get(&m, 3, &v) == -ENOENT);
	CHECK(sampler_map_put(&m, 0, 1) == -EINVAL);
	sampler_map_release(&m);
}

static void test_intern(void)
{
	struct sampler_intern *in = sampler_intern_new();
	struct sampler_intern_counts c;
	uint32_t f1, f2, f3, fr1, fr2, s1, s2, s3, p, fr;
	enum sampler_kind k;
	const char *func, *file;
	uint64_t addr;
	int line;

	f1 = sampler_intern_func(in, SAMPLER_PY, "main", "a.py");
	f2 = sampler_intern_func(in, SAMPLER_PY, "f", "a.py");
	f3 = sampler_intern_func(in, SAMPLER_NATIVE, "f", "a.py");
	CHECK(f1 == 1 && f2 == 2 && f3 == 3);
	CHECK(sampler_intern_func(in, SAMPLER_PY, "f", "a.py") == f2);
	fr1 = sampler_intern_frame(in, f1, 10);
	fr2 = sampler_intern_frame(in, f2, 3);
	CHECK(fr1 == 1 && fr2 == 2);
	CHECK(sampler_intern_frame(in, f2, 3) == fr2);
	CHECK(sampler_intern_frame(in, f2, 4) == 3);
	CHECK(sampler_intern_frame(in, 0, 4) == 0);
	s1 = sampler_intern_stack(in, 0, fr1);
	s2 = sampler_intern_stack(in, s1, fr2);
	s3 = sampler_intern_stack(in, s1, fr1);
	CHECK(s1 == 1 && s2 == 2 && s3 == 3);
	CHECK(sampler_intern_stack(in, s1, fr2) == s2);
	CHECK(sampler_intern_stack(in, s2, 0) == s2);
	sampler_intern_counts(in, &c);
	CHECK(c.funcs == 3 && c.frames == 3 && c.stacks == 3 && c.full == 0);
	CHECK(sampler_intern_func_get(in, f3, &k, &func, &file) == 0);
	CHECK(k == SAMPLER_NATIVE);
	CHECK_STR(func, "f");
	CHECK_STR(file, "a.py");
	CHECK(sampler_intern_frame_get(in, fr2, &p, &line, &addr) == 0 &&
	      p == f2 && line == 3 && addr == 0);
	/* Native frames: by address. */
	fr = sampler_intern_native(in, 0x7f0012345678ULL);
	CHECK(fr == 4);
	CHECK(sampler_intern_native(in, 0x7f0012345678ULL) == fr);
	CHECK(sampler_intern_native(in, 0) == 0);
	CHECK(sampler_intern_frame_get(in, fr, &p, &line, &addr) == 0 &&
	      p == 0 && line == -1 && addr == 0x7f0012345678ULL);
	CHECK(sampler_intern_stack_get(in, s2, &p, &fr) == 0 && p == s1 &&
	      fr == fr2);
	CHECK(sampler_intern_stack_get(in, 4, &p, &fr) == -ENOENT);
	CHECK(sampler_intern_func_get(in, 0, &k, &func, &file) == -ENOENT);
	/* The stack cap: past it a stack interns as its parent. */
	{
		uint32_t last = 0, s = 0;

		for (uint32_t i = 0; i < SAMPLER_STACKS_MAX + 10; i++) {
			s = sampler_intern_stack(in, s1, 1000000 + i);
			if (s != s1)
				last = s;
		}
		sampler_intern_counts(in, &c);
		CHECK(last == SAMPLER_STACKS_MAX - 1);
		CHECK(c.stacks == SAMPLER_STACKS_MAX - 1);
		CHECK(c.full >= 10);
		CHECK(s == s1);
	}
	sampler_intern_free(in);
	sampler_intern_free(NULL);
}

/*
 * A known profile: main -> f (7 running samples, line 5 and 6),
 * main -> g (3 running, 1 waiting for the GIL), main (2 idle), on two
 * threads.
 */
static struct flamegraph *sample_profile(void)
{
	struct flamegraph *fg = flamegraph_new();

	CHECK(flamegraph_add_frame(fg, 1, "main", "/x/a.py", 1, 0) == 0);
	CHECK(flamegraph_add_frame(fg, 2, "f", "/x/a.py", 5, 0) == 0);
	CHECK(flamegraph_add_frame(fg, 3, "g", "/usr/lib/python3/dist-packages/"
					      "m/b.py", 9, 0) == 0);
	CHECK(flamegraph_add_frame(fg, 4, "f", "/x/a.py", 6, 0) == 0);
	CHECK(flamegraph_add_frame(fg, 5, "sgemm", "/lib/libblas.so.3", -1,
				   1) == 0);
	CHECK(flamegraph_add_frame(fg, 0, "x", "y", 1, 0) == -EINVAL);
	CHECK(flamegraph_add_stack(fg, 1, 0, 1) == 0);
	CHECK(flamegraph_add_stack(fg, 2, 1, 2) == 0);
	CHECK(flamegraph_add_stack(fg, 3, 1, 3) == 0);
	CHECK(flamegraph_add_stack(fg, 4, 1, 4) == 0);
	CHECK(flamegraph_add_stack(fg, 5, 3, 5) == 0);
	CHECK(flamegraph_add_thread(fg, 100, 4242, "MainThread") == 0);
	CHECK(flamegraph_add_thread(fg, 200, 4243, "worker") == 0);
	for (int i = 0; i < 4; i++)
		CHECK(flamegraph_add_sample(fg, 10.0 + i * 0.01, 100, 2,
					    FLAMEGRAPH_RUNNING, 1) == 0);
	for (int i = 4; i < 7; i++)
		CHECK(flamegraph_add_sample(fg, 10.0 + i * 0.01, 100, 4,
					    FLAMEGRAPH_RUNNING, 1) == 0);
	for (int i = 0; i < 2; i++)
		CHECK(flamegraph_add_sample(fg, 10.0 + i * 0.01, 200, 3,
					    FLAMEGRAPH_RUNNING, 1) == 0);
	CHECK(flamegraph_add_sample(fg, 10.02, 200, 5, FLAMEGRAPH_RUNNING, 1) ==
	      0);
	CHECK(flamegraph_add_sample(fg, 10.03, 200, 3, FLAMEGRAPH_GIL_WAIT, 1) ==
	      0);
	for (int i = 4; i < 6; i++)
		CHECK(flamegraph_add_sample(fg, 10.0 + i * 0.01, 200, 1,
					    FLAMEGRAPH_IDLE, 1) == 0);
	CHECK(flamegraph_samples(fg) == 13);
	return fg;
}

static char *render(struct flamegraph *fg, enum flamegraph_format f,
		    const struct flamegraph_opts *o)
{
	char *out = NULL, err[256] = "";
	size_t len = 0;

	CHECK(flamegraph_render(fg, f, o, &out, &len, err, sizeof(err)) == 0);
	CHECK(out && strlen(out) == len);
	return out;
}

static void test_folded(void)
{
	struct flamegraph *fg = sample_profile();
	struct flamegraph_opts o = {.interval = 0.01};
	char *out;

	out = render(fg, FLAMEGRAPH_FOLDED, &o);
	/* f's two lines merge; dist-packages/ is cut; sorted by label. */
	CHECK_STR(out, "main (/x/a.py) 2\n"
		       "main (/x/a.py);f (/x/a.py) 7\n"
		       "main (/x/a.py);g (m/b.py) 3\n"
		       "main (/x/a.py);g (m/b.py);sgemm (libblas.so.3) 1\n");
	free(out);
	o.lines = 1;
	o.states = 1;
	o.threads = 1;
	out = render(fg, FLAMEGRAPH_FOLDED, &o);
	CHECK_STR(out,
		  "MainThread (thread 4242);main (/x/a.py:1);f (/x/a.py:5) 4\n"
		  "MainThread (thread 4242);main (/x/a.py:1);f (/x/a.py:6) 3\n"
		  "worker (thread 4243);main (/x/a.py:1);(idle) 2\n"
		  "worker (thread 4243);main (/x/a.py:1);g (m/b.py:9) 2\n"
		  "worker (thread 4243);main (/x/a.py:1);g (m/b.py:9);"
		  "(waiting for the GIL) 1\n"
		  "worker (thread 4243);main (/x/a.py:1);g (m/b.py:9);"
		  "sgemm (libblas.so.3) 1\n");
	free(out);
	flamegraph_free(fg);
}

static void test_folded_escapes_and_unknown(void)
{
	struct flamegraph *fg = flamegraph_new();
	struct flamegraph_opts o = {.interval = 0.01};
	char *out;

	flamegraph_add_frame(fg, 1, "a;b\nc", "f.py", 1, 0);
	flamegraph_add_stack(fg, 1, 0, 1);
	flamegraph_add_stack(fg, 2, 1, 99); /* frame 99 never declared */
	flamegraph_add_sample(fg, 1, 1, 1, FLAMEGRAPH_RUNNING, 1);
	flamegraph_add_sample(fg, 1, 1, 2, FLAMEGRAPH_RUNNING, 1);
	flamegraph_add_sample(fg, 1, 1, 77, FLAMEGRAPH_RUNNING, 1);
	flamegraph_add_sample(fg, 1, 1, 0, FLAMEGRAPH_RUNNING, 1);
	out = render(fg, FLAMEGRAPH_FOLDED, &o);
	CHECK_STR(out, "[unknown] 1\n"
		       "a:b c (f.py) 1\n"
		       "a:b c (f.py);[unknown] 1\n");
	free(out);
	flamegraph_free(fg);
}

static double json_num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *json_str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_speedscope(void)
{
	struct flamegraph *fg = sample_profile();
	struct flamegraph_opts o = {.interval = 0.01, .title = "t\"q",
				    .threads = 1, .states = 1};
	char *out = render(fg, FLAMEGRAPH_SPEEDSCOPE, &o);
	cJSON *doc = cJSON_Parse(out), *frames, *profiles, *p;
	double total = 0;
	int nframes;

	CHECK(doc != NULL);
	CHECK_STR(json_str(doc, "$schema"),
		  "https://www.speedscope.app/file-format-schema.json");
	CHECK_STR(json_str(doc, "name"), "t\"q");
	frames = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "shared"),
				     "frames");
	nframes = cJSON_GetArraySize(frames);
	/* main, f, g, sgemm, (idle), (waiting...): no thread frames. */
	CHECK(nframes == 6);
	profiles = cJSON_GetObjectItem(doc, "profiles");
	CHECK(cJSON_GetArraySize(profiles) == 2);
	cJSON_ArrayForEach(p, profiles)
	{
		const cJSON *samples = cJSON_GetObjectItem(p, "samples");
		const cJSON *weights = cJSON_GetObjectItem(p, "weights"), *w,
			    *s;

		CHECK_STR(json_str(p, "type"), "sampled");
		CHECK_STR(json_str(p, "unit"), "seconds");
		CHECK(cJSON_GetArraySize(samples) ==
		      cJSON_GetArraySize(weights));
		cJSON_ArrayForEach(w, weights) total += w->valuedouble;
		cJSON_ArrayForEach(s, samples)
		{
			const cJSON *i;

			cJSON_ArrayForEach(i, s)
				CHECK(i->valueint >= 0 && i->valueint < nframes);
		}
	}
	CHECK(fabs(total - 0.13) < 1e-9);
	/* MainThread: one run per stack (4 x f:5 then 3 x f:6 merge into
	 * one function-level stack). */
	p = cJSON_GetArrayItem(profiles, 0);
	CHECK_STR(json_str(p, "name"), "MainThread (thread 4242)");
	CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(p, "samples")) == 2);
	CHECK(fabs(json_num(p, "endValue") - 0.07) < 1e-9);
	CHECK(json_num(doc, "activeProfileIndex") == 0);
	cJSON_Delete(doc);
	free(out);
	flamegraph_free(fg);
}

static void test_chrome(void)
{
	struct flamegraph *fg = sample_profile();
	struct flamegraph_opts o = {.interval = 0.01, .pid = 77};
	char *out = render(fg, FLAMEGRAPH_CHROME, &o);
	cJSON *doc = cJSON_Parse(out), *ev;
	double main_dur = 0, f_dur = 0;
	int nx = 0, nthreads = 0;

	CHECK(doc != NULL);
	cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
	{
		const char *ph = json_str(ev, "ph");

		CHECK(json_num(ev, "pid") == 77);
		CHECK(ph && json_str(ev, "name"));
		if (ph && !strcmp(ph, "M") &&
		    !strcmp(json_str(ev, "name"), "thread_name"))
			nthreads++;
		if (!ph || strcmp(ph, "X"))
			continue;
		nx++;
		CHECK(json_num(ev, "ts") >= 0 && json_num(ev, "dur") >= 0);
		if (json_num(ev, "tid") == 4242 &&
		    !strcmp(json_str(ev, "name"), "main (/x/a.py)"))
			main_dur += json_num(ev, "dur");
		if (json_num(ev, "tid") == 4242 &&
		    !strcmp(json_str(ev, "name"), "f (/x/a.py)"))
			f_dur += json_num(ev, "dur");
	}
	CHECK(nthreads == 2);
	/* MainThread: one main and one f spanning 7 samples of 10 ms. */
	CHECK(fabs(main_dur - 70000) < 1);
	CHECK(fabs(f_dur - 70000) < 1);
	/* worker: main spans all, g twice (a GIL wait ends the first g...
	 * no: states off, the wait is g too), sgemm once. */
	CHECK(nx >= 5);
	cJSON_Delete(doc);
	free(out);
	flamegraph_free(fg);
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void test_svg(void)
{
	struct flamegraph *fg = sample_profile();
	struct flamegraph_opts o = {.interval = 0.01, .title = "a <b> & c"};
	char *out = render(fg, FLAMEGRAPH_SVG, &o);

	CHECK(strncmp(out, "<?xml", 5) == 0);
	CHECK(strstr(out, "data-total=\"13\"") != NULL);
	CHECK(strstr(out, "a &lt;b&gt; &amp; c") != NULL);
	/* main, f, g, sgemm: four frames. */
	CHECK(count(out, "<g class=\"f\"") == 4);
	CHECK(strstr(out, "data-n=\"f (/x/a.py)\" data-x=\"0\" data-w=\"7\" "
			  "data-d=\"2\"") != NULL);
	CHECK(strstr(out, "<title>main (/x/a.py) (13 samples, 100.00%)") !=
	      NULL);
	CHECK(count(out, "<script") == 1 && count(out, "]]>") == 1);
	CHECK(strstr(out, "</svg>\n") != NULL);
	free(out);
	flamegraph_free(fg);

	/* No samples: still a valid document. */
	fg = flamegraph_new();
	out = render(fg, FLAMEGRAPH_SVG, &o);
	CHECK(strstr(out, "No samples") && strstr(out, "</svg>"));
	free(out);
	flamegraph_free(fg);
}

static void test_cap(void)
{
	struct flamegraph *fg = flamegraph_new();
	char name[2048], *out = NULL, err[256] = "";
	size_t len;

	/* 8000 distinct stacks of 2 frames with 1000-byte names: about
	 * 16 MB of folded text. */
	memset(name, 'x', 1000);
	for (uint32_t i = 1; i <= 8000; i++) {
		snprintf(name + 1000, sizeof(name) - 1000, "%u", i);
		flamegraph_add_frame(fg, i, name, "f.py", 1, 0);
		flamegraph_add_stack(fg, i, 0, i);
		flamegraph_add_stack(fg, 100000 + i, i, i);
		flamegraph_add_sample(fg, 1, 1, 100000 + i, FLAMEGRAPH_RUNNING, 1);
	}
	CHECK(flamegraph_render(fg, FLAMEGRAPH_FOLDED, NULL, &out, &len, err,
				sizeof(err)) == -E2BIG);
	CHECK(out == NULL && strstr(err, "larger than"));
	flamegraph_free(fg);
}

static void test_cpu_weights(void)
{
	struct flamegraph *fg = flamegraph_new();
	struct flamegraph_opts o = {.interval = 0.01, .cpu = 1};
	char *out;
	cJSON *doc;
	double total = 0;
	const cJSON *w;

	flamegraph_add_frame(fg, 1, "main", "a.py", 1, 0);
	flamegraph_add_frame(fg, 2, "f", "a.py", 2, 0);
	flamegraph_add_stack(fg, 1, 0, 1);
	flamegraph_add_stack(fg, 2, 1, 2);
	/* f used 9 ms of CPU in two samples, main 1 ms, a sample with no
	 * CPU counts nothing. */
	flamegraph_add_sample(fg, 1.00, 7, 2, FLAMEGRAPH_RUNNING, 4000);
	flamegraph_add_sample(fg, 1.01, 7, 2, FLAMEGRAPH_RUNNING, 5000);
	flamegraph_add_sample(fg, 1.02, 7, 1, FLAMEGRAPH_RUNNING, 1000);
	flamegraph_add_sample(fg, 1.03, 7, 1, FLAMEGRAPH_IDLE, 0);
	out = render(fg, FLAMEGRAPH_FOLDED, &o);
	CHECK_STR(out, "main (a.py) 1000\nmain (a.py);f (a.py) 9000\n");
	free(out);
	out = render(fg, FLAMEGRAPH_SVG, &o);
	CHECK(strstr(out, "data-total=\"10000\"") != NULL);
	CHECK(strstr(out, "f (a.py) (9.000 ms of CPU, 90.00%)") != NULL);
	free(out);
	out = render(fg, FLAMEGRAPH_SPEEDSCOPE, &o);
	doc = cJSON_Parse(out);
	cJSON_ArrayForEach(w, cJSON_GetObjectItem(
				      cJSON_GetArrayItem(
					      cJSON_GetObjectItem(doc, "profiles"),
					      0),
				      "weights")) total += w->valuedouble;
	CHECK(fabs(total - 0.010) < 1e-9);
	cJSON_Delete(doc);
	free(out);
	/* Without cpu, the same samples count one each. */
	o.cpu = 0;
	out = render(fg, FLAMEGRAPH_FOLDED, &o);
	CHECK_STR(out, "main (a.py) 2\nmain (a.py);f (a.py) 2\n");
	free(out);
	flamegraph_free(fg);
}

/* Samples that ran an asyncio task: rooted at "task NAME" from the task's
 * coroutine on with tasks, whole without; a task node not in the stack
 * leaves the sample whole. */
static void test_tasks(void)
{
	struct flamegraph *fg = flamegraph_new();
	struct flamegraph_opts o = {.interval = 0.01};
	char *out;

	/* run_forever -> _run -> render -> crunch; _run -> select */
	CHECK(flamegraph_add_frame(fg, 1, "run_forever", "/a/base_events.py", 1,
				   0) == 0);
	CHECK(flamegraph_add_frame(fg, 2, "_run", "/a/events.py", 2, 0) == 0);
	CHECK(flamegraph_add_frame(fg, 3, "render", "/x/s.py", 3, 0) == 0);
	CHECK(flamegraph_add_frame(fg, 4, "crunch", "/x/s.py", 4, 0) == 0);
	CHECK(flamegraph_add_frame(fg, 5, "select", "/a/selectors.py", 5, 0) ==
	      0);
	CHECK(flamegraph_add_frame(fg, 9, "render-task", "", -1, 0) == 0);
	CHECK(flamegraph_add_stack(fg, 1, 0, 1) == 0);
	CHECK(flamegraph_add_stack(fg, 2, 1, 2) == 0);
	CHECK(flamegraph_add_stack(fg, 3, 2, 3) == 0);
	CHECK(flamegraph_add_stack(fg, 4, 3, 4) == 0);
	CHECK(flamegraph_add_stack(fg, 5, 1, 5) == 0);
	CHECK(flamegraph_sample_task(fg, 9, 3) == -EINVAL); /* no sample */
	for (int i = 0; i < 3; i++) {
		CHECK(flamegraph_add_sample(fg, 1.0, 7, 4, FLAMEGRAPH_RUNNING,
					    1) == 0);
		CHECK(flamegraph_sample_task(fg, 9, 3) == 0);
	}
	CHECK(flamegraph_add_sample(fg, 1.0, 7, 3, FLAMEGRAPH_RUNNING, 1) == 0);
	CHECK(flamegraph_sample_task(fg, 9, 3) == 0);
	CHECK(flamegraph_add_sample(fg, 1.0, 7, 5, FLAMEGRAPH_RUNNING, 1) == 0);
	/* A task node that is not in the sample's stack. */
	CHECK(flamegraph_add_sample(fg, 1.0, 7, 5, FLAMEGRAPH_RUNNING, 1) == 0);
	CHECK(flamegraph_sample_task(fg, 9, 3) == 0);
	CHECK(flamegraph_sample_task(fg, 0, 3) == -EINVAL);
	out = render(fg, FLAMEGRAPH_FOLDED, &o);
	CHECK_STR(out, "run_forever (/a/base_events.py);_run (/a/events.py);"
		       "render (/x/s.py) 1\n"
		       "run_forever (/a/base_events.py);_run (/a/events.py);"
		       "render (/x/s.py);crunch (/x/s.py) 3\n"
		       "run_forever (/a/base_events.py);select "
		       "(/a/selectors.py) 2\n");
	free(out);
	o.tasks = 1;
	o.threads = 1;
	CHECK(flamegraph_add_thread(fg, 7, 77, "MainThread") == 0);
	out = render(fg, FLAMEGRAPH_FOLDED, &o);
	CHECK_STR(out, "MainThread (thread 77);run_forever (/a/base_events.py);"
		       "select (/a/selectors.py) 2\n"
		       "MainThread (thread 77);task render-task;render "
		       "(/x/s.py) 1\n"
		       "MainThread (thread 77);task render-task;render "
		       "(/x/s.py);crunch (/x/s.py) 3\n");
	free(out);
	flamegraph_free(fg);
}

static void test_formats(void)
{
	enum flamegraph_format f;

	CHECK(flamegraph_format_parse("svg", &f) == 0 && f == FLAMEGRAPH_SVG);
	CHECK(flamegraph_format_parse("chrome", &f) == 0 &&
	      f == FLAMEGRAPH_CHROME);
	CHECK(flamegraph_format_parse("png", &f) == -EINVAL);
	CHECK(flamegraph_format_parse(NULL, &f) == -EINVAL);
	CHECK_STR(flamegraph_format_name(FLAMEGRAPH_SPEEDSCOPE), "speedscope");
}

TEST_MAIN(test_map, test_intern, test_folded, test_folded_escapes_and_unknown,
	  test_speedscope, test_chrome, test_svg, test_cap, test_cpu_weights,
	  test_tasks, test_formats)
