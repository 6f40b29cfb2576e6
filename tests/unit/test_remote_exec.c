/*
 * inject/remote_exec: the PEP 768 way's reading of a target it does not
 * trust, against a fake target — a file whose offsets stand for
 * addresses (read with pread, as /proc/PID/mem is) and a layout table of
 * the test's own: the version rule, the checks on _Py_DebugOffsets, the
 * walk to the main interpreter, and the loader's text, which the host's
 * python3 runs when there is one.
 */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../inject/remote_exec.c"

/* A layout of the test's own: field i at 24 + 8 i. */
static const struct inject_remote_layout fake_314 = {
	.hex = 0x030e00f0,
	.size = 24 + 8 * INJECT_RF_COUNT,
	.stop_bit = 0x20,
	.at = {24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128},
};
static const struct inject_remote_layout fake_315b2 = {
	.hex = 0x030f00b2,
	.size = 24 + 8 * INJECT_RF_COUNT,
	.stop_bit = 0x20,
	.at = {24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128},
};
const struct inject_remote_layout *const inject_remote_layouts[] = {
	&fake_314, &fake_315b2, NULL};
const size_t inject_remote_layouts_n = 2;

_Static_assert(INJECT_RF_COUNT == 14, "the fake layout names 14 fields");

/* The fake target's memory: a file; "addresses" are its offsets. */
#define RUNTIME 0x1000
#define INTERP 0x2000
#define INTERP2 0x3000
#define TSTATE 0x4000
#define MEM_SIZE 0x6000

static uint8_t mem[MEM_SIZE];

static void put64(uint64_t addr, uint64_t v)
{
	memcpy(mem + addr, &v, 8);
}

static void put_field(int i, uint64_t v)
{
	put64(RUNTIME + fake_314.at[i], v);
}

/* A consistent target: CPython 3.14.2, two interpreters (a
 * subinterpreter first), remote debugging on, our own pid as its main
 * thread. */
static void fake_target(void)
{
	memset(mem, 0, sizeof(mem));
	memcpy(mem + RUNTIME, "xdebugpy", 8);
	put64(RUNTIME + 8, 0x030e02f0);
	put_field(INJECT_RF_RUNTIME_SIZE, 0x800);
	put_field(INJECT_RF_INTERPRETERS_HEAD, 0x700);
	put_field(INJECT_RF_INTERP_SIZE, 0x400);
	put_field(INJECT_RF_INTERP_ID, 0x10);
	put_field(INJECT_RF_INTERP_NEXT, 0x18);
	put_field(INJECT_RF_THREADS_MAIN, 0x20);
	put_field(INJECT_RF_TSTATE_SIZE, 0x1000);
	put_field(INJECT_RF_TSTATE_NATIVE_ID, 0x30);
	put_field(INJECT_RF_EVAL_BREAKER, 0x38);
	put_field(INJECT_RF_SUPPORT, 0x100);
	put_field(INJECT_RF_ENABLED, 0x28);
	put_field(INJECT_RF_PENDING_CALL, 0);
	put_field(INJECT_RF_SCRIPT_PATH, 4);
	put_field(INJECT_RF_SCRIPT_PATH_SIZE, 512);
	put64(RUNTIME + 0x700, INTERP2); /* the newest interpreter first */
	put64(INTERP2 + 0x10, 1);
	put64(INTERP2 + 0x18, INTERP);
	put64(INTERP + 0x10, 0);
	put64(INTERP + 0x18, 0);
	put64(INTERP + 0x20, TSTATE);
	mem[INTERP + 0x28] = 1;
	put64(TSTATE + 0x30, (uint64_t)getpid());
}

/* An rx reading the fake memory through a file, as through /proc. */
static int open_fake(struct rx *r, struct inject_remote_result *res)
{
	char path[] = "/tmp/probing-test-remote-XXXXXX";
	int fd = mkstemp(path);

	memset(r, 0, sizeof(*r));
	memset(res, 0, sizeof(*res));
	if (fd < 0)
		return -1;
	unlink(path);
	CHECK(write(fd, mem, sizeof(mem)) == (ssize_t)sizeof(mem));
	r->pid = getpid();
	r->memfd = fd;
	r->runtime = RUNTIME;
	r->res = res;
	r->report_fd = -1;
	return 0;
}

/* read_offsets + find_main on the fake target as it is now. */
static int survey(char *err, size_t errlen)
{
	struct inject_remote_result res;
	struct rx r;
	int rc;

	if (open_fake(&r, &res))
		return -EIO;
	rc = read_offsets(&r, 0x030e, err, errlen);
	if (!rc)
		rc = find_main(&r, err, errlen);
	if (!rc)
		CHECK(r.interp == INTERP && r.tstate == TSTATE &&
		      res.tid == getpid());
	close(r.memfd);
	return rc;
}

static void test_version_rule(void)
{
	CHECK(inject_remote_layout_for(0x030e00f0) == &fake_314);
	CHECK(inject_remote_layout_for(0x030e0af0) == &fake_314);
	CHECK(inject_remote_layout_for(0x030e00a1) == NULL); /* 3.14.0a1 */
	CHECK(inject_remote_layout_for(0x030e01c1) == NULL); /* 3.14.1rc1 */
	CHECK(inject_remote_layout_for(0x030f00b2) == &fake_315b2);
	CHECK(inject_remote_layout_for(0x030f00b3) == NULL);
	CHECK(inject_remote_layout_for(0x030f00f0) == NULL);
	CHECK(inject_remote_layout_for(0x030d05f0) == NULL);
	CHECK(inject_remote_layout_for(0x1030e00f0ull) == NULL);
}

static void test_consistent_target(void)
{
	char err[512] = "";

	fake_target();
	CHECK(survey(err, sizeof(err)) == 0);
}

/* Each offset pushed out of its structure is refused, before any other
 * read of the target. */
static void test_offsets_outside_refused(void)
{
	static const struct {
		int field;
		uint64_t value;
	} bad[] = {
		{INJECT_RF_INTERPRETERS_HEAD, 0x7fc},
		{INJECT_RF_RUNTIME_SIZE, 1u << 30},
		{INJECT_RF_INTERP_ID, 0x400},
		{INJECT_RF_THREADS_MAIN, UINT64_MAX - 3},
		{INJECT_RF_ENABLED, 0x3fd},
		{INJECT_RF_TSTATE_NATIVE_ID, 0xffc},
		{INJECT_RF_EVAL_BREAKER, 0x3c}, /* misaligned */
		{INJECT_RF_SUPPORT, UINT64_MAX - 0x10},
		{INJECT_RF_PENDING_CALL, 0xf00},
		{INJECT_RF_PENDING_CALL, 2}, /* misaligned */
		{INJECT_RF_SCRIPT_PATH, 0xe00},
		{INJECT_RF_SCRIPT_PATH_SIZE, 1ull << 40},
		{INJECT_RF_SCRIPT_PATH_SIZE, 8},
	};
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fake_target();
		put_field(bad[i].field, bad[i].value);
		err[0] = '\0';
		CHECK(survey(err, sizeof(err)) == -ENOSYS);
		CHECK(strstr(err, "do not hold together") != NULL);
	}
}

static void test_cookie_and_version(void)
{
	char err[512];

	fake_target();
	mem[RUNTIME] = 'X';
	CHECK(survey(err, sizeof(err)) == -ENOSYS);
	fake_target();
	put64(RUNTIME + 8, 0x030d02f0); /* not what Py_Version said */
	CHECK(survey(err, sizeof(err)) == -ENOSYS);
	fake_target();
	put64(RUNTIME + 8, 0x030e00a3); /* a pre-release we have no layout for */
	CHECK(survey(err, sizeof(err)) == -ENOSYS);
	CHECK(strstr(err, "knows no PEP 768 layout") != NULL);
}

static void test_interpreter_walk(void)
{
	char err[512];

	/* A cycle without id 0: the walk ends (bounded), refused. */
	fake_target();
	put64(INTERP2 + 0x18, INTERP2);
	CHECK(survey(err, sizeof(err)) == -EAGAIN);
	/* Pointers that are none: misaligned, past the file, kernel. */
	fake_target();
	put64(RUNTIME + 0x700, INTERP2 + 4);
	CHECK(survey(err, sizeof(err)) == -EAGAIN);
	fake_target();
	put64(INTERP2 + 0x18, MEM_SIZE + 0x1000);
	CHECK(survey(err, sizeof(err)) == -EAGAIN);
	fake_target();
	put64(INTERP2 + 0x18, 0xffff800000000000ull);
	CHECK(survey(err, sizeof(err)) == -EAGAIN);
	/* No interpreter at all. */
	fake_target();
	put64(RUNTIME + 0x700, 0);
	CHECK(survey(err, sizeof(err)) == -EAGAIN);
	/* Remote debugging off. */
	fake_target();
	mem[INTERP + 0x28] = 0;
	CHECK(survey(err, sizeof(err)) == -ENOTSUP);
	CHECK(strstr(err, "remote debugging is off") != NULL);
	/* A main thread state that names no thread of ours. */
	fake_target();
	put64(TSTATE + 0x30, 0x7ffffff0);
	CHECK(survey(err, sizeof(err)) == -EAGAIN);
	fake_target();
	put64(INTERP + 0x20, 0);
	CHECK(survey(err, sizeof(err)) == -EAGAIN);
}

/* The request: path, then flag, then the one byte of the eval breaker. */
static void test_request(void)
{
	struct inject_remote_result res;
	char err[512];
	struct rx r;
	uint8_t back[MEM_SIZE];

	fake_target();
	mem[TSTATE + 0x38] = 0x01;	/* a GIL drop request pending */
	mem[TSTATE + 0x39] = 0x77;	/* the instrumentation version */
	if (open_fake(&r, &res))
		return;
	CHECK(read_offsets(&r, 0x030e, err, sizeof(err)) == 0);
	CHECK(find_main(&r, err, sizeof(err)) == 0);
	snprintf(r.loader, sizeof(r.loader), "/tmp/probing-1-x.py");
	CHECK(ask(&r, err, sizeof(err)) == 0);
	CHECK(pread(r.memfd, back, sizeof(back), 0) == (ssize_t)sizeof(back));
	CHECK(!strcmp((char *)back + TSTATE + 0x104, "/tmp/probing-1-x.py"));
	CHECK(back[TSTATE + 0x100] == 1);
	CHECK(back[TSTATE + 0x38] == 0x21 && back[TSTATE + 0x39] == 0x77);
	/* Pending already: not overwritten. */
	snprintf(r.loader, sizeof(r.loader), "/tmp/other");
	CHECK(ask(&r, err, sizeof(err)) == -EBUSY);
	CHECK(pread(r.memfd, back, sizeof(back), 0) == (ssize_t)sizeof(back));
	CHECK(!strcmp((char *)back + TSTATE + 0x104, "/tmp/probing-1-x.py"));
	close(r.memfd);
}

static void test_report(void)
{
	struct inject_remote_result res;
	char err[512], text[256];
	struct rx r = {.pid = 1, .res = &res};

	memset(&res, 0, sizeof(res));
	snprintf(res.target_path, sizeof(res.target_path), "/lib/x.so");
	snprintf(text, sizeof(text), "loaded 42 3.250\n\nend\n");
	CHECK(outcome(&r, text, err, sizeof(err)) == 0);
	CHECK(res.tid == 42 && res.run_ms > 3.2 && res.run_ms < 3.3);
	snprintf(text, sizeof(text), "restarted 7 1\n\nend\n");
	CHECK(outcome(&r, text, err, sizeof(err)) == 0 && res.restarted);
	snprintf(text, sizeof(text),
		 "error 7 1\nOSError: no\x1b[31m such\nend\n");
	CHECK(outcome(&r, text, err, sizeof(err)) == -ELIBBAD);
	CHECK(strstr(err, "OSError: no [31m such") != NULL);
	snprintf(text, sizeof(text), "noctypes 7 1\nImportError: x\nend\n");
	CHECK(outcome(&r, text, err, sizeof(err)) == -ENOPKG);
	snprintf(text, sizeof(text), "norestart 7 1\n\nend\n");
	CHECK(outcome(&r, text, err, sizeof(err)) == -EALREADY);
	snprintf(text, sizeof(text), "whatever");
	CHECK(outcome(&r, text, err, sizeof(err)) == -EIO);
}

/* The loader, written for a library path full of bytes to escape, runs in
 * the host's python3 and reports the failed load of that very path. */
static void test_loader_runs(void)
{
	/* (Bytes that are no UTF-8 go through too: the e2e test loads
	 * from such a path; some ctypes' error texts lose them.) */
	static const char lib[] = "/nonexistent/it's a \\ \"dir\" \xc3\xa9/x.so";
	char dir[] = "/tmp/probing-test-loader-XXXXXX";
	char loader[128], report[128], cmd[512], buf[4096];
	char *text = malloc(LOADER_MAX * 5);
	int fd, status;
	ssize_t n;

	if (!text || !mkdtemp(dir)) {
		free(text);
		return;
	}
	snprintf(loader, sizeof(loader), "%s/l.py", dir);
	snprintf(report, sizeof(report), "%s/l.out", dir);
	CHECK(loader_text(lib, loader, report, 0, text, LOADER_MAX * 5) == 0);
	for (const char *c = text; *c; c++)
		CHECK(*c == '\n' || (*c >= 0x20 && *c < 0x7f));
	fd = open(loader, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
	/* Held open, as the injector does: the loader unlinks both files
	 * once it has written the report. */
	fd = open(report, O_RDONLY | O_CREAT | O_TRUNC, 0600);
	if (access("/usr/bin/python3", X_OK) == 0) {
		snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -I %s", loader);
		status = system(cmd);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		CHECK(access(loader, F_OK) < 0 && errno == ENOENT);
		CHECK(access(report, F_OK) < 0 && errno == ENOENT);
		n = fd < 0 ? -1 : pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		CHECK(!strncmp(buf, "error ", 6));
		/* The path came through whole: OSError names it. */
		CHECK(strstr(buf, "it's a \\ \"dir\" \xc3\xa9/x.so") != NULL);
		if (!strstr(buf, "it's a"))
			fprintf(stderr, "the report: %s\n", buf);
		CHECK(n > 4 && !strcmp(buf + n - 4, "end\n"));
	} else {
		printf("(no /usr/bin/python3: the loader's run not tested)\n");
	}
	if (fd >= 0)
		close(fd);
	unlink(loader);
	unlink(report);
	rmdir(dir);
	free(text);
}

TEST_MAIN(test_version_rule, test_consistent_target,
	  test_offsets_outside_refused, test_cookie_and_version,
	  test_interpreter_walk, test_request, test_report, test_loader_runs)
