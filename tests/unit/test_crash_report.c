/*
 * crash_report, crash_sym and the CLI's reader (cli/render/report.h): a report
 * written by the signal-safe writer (into a pipe and a memory copy), with
 * escapes, a native stack of this program's own functions symbolized by
 * crash_sym, read back by cli_report_parse; a report cut short; the time
 * format; signal and code names; symbolizing from inside a SIGSEGV
 * handler on an alternate stack.
 */
#include "forensics/crash_report.h"
#include "forensics/crash_sym.h"
#include "render/report.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static struct crash_sym_cache cache;

__attribute__((noinline)) int crash_test_marker(int x)
{
	return x * 3 + 1;
}

static void test_time_format(void)
{
	char b[32];

	crash_time_format(0, 0, b);
	CHECK_STR(b, "1970-01-01T00:00:00.000Z");
	crash_time_format(951782400 + 86399, 999, b); /* 2000-02-29 */
	CHECK_STR(b, "2000-02-29T23:59:59.999Z");
	crash_time_format(1735787045, 678, b);
	CHECK_STR(b, "2025-01-02T03:04:05.678Z");
	crash_time_format(4102444800LL, 5, b);
	CHECK_STR(b, "2100-01-01T00:00:00.005Z");
}

static void test_names(void)
{
	CHECK_STR(crash_signal_name(SIGSEGV), "SIGSEGV");
	CHECK_STR(crash_signal_name(SIGABRT), "SIGABRT");
	CHECK(crash_signal_name(SIGUSR1) == NULL);
	CHECK_STR(crash_code_name(SIGSEGV, SEGV_MAPERR), "SEGV_MAPERR");
	CHECK_STR(crash_code_name(SIGFPE, FPE_INTDIV), "FPE_INTDIV");
	CHECK_STR(crash_code_name(SIGBUS, BUS_ADRERR), "BUS_ADRERR");
	CHECK_STR(crash_code_name(SIGABRT, SI_TKILL), "SI_TKILL");
	CHECK(crash_code_name(SIGSEGV, 99) == NULL);
}

static void test_symbolize_own_function(void)
{
	struct crash_sym s;
	uintptr_t ip = (uintptr_t)crash_test_marker + 2;

	crash_sym_begin(&cache);
	CHECK(crash_sym_lookup(&cache, ip, 0, &s) == 0);
	CHECK_STR(s.func, "crash_test_marker");
	CHECK(s.func_off == 2);
	CHECK(strstr(s.object, "test_crash_report") != NULL);
	/* A return address names its call site (ip - 1), shown as ip. */
	CHECK(crash_sym_lookup(&cache, ip, 1, &s) == 0);
	CHECK_STR(s.func, "crash_test_marker");
	CHECK(s.func_off == 2);
	/* libc's exported getpid. */
	CHECK(crash_sym_lookup(&cache, (uintptr_t)getpid + 1, 0, &s) == 0);
	CHECK(strstr(s.object, "libc") != NULL);
	CHECK(strstr(s.func, "getpid") != NULL);
	/* Nothing mapped there. */
	CHECK(crash_sym_lookup(&cache, 16, 0, &s) == -ENOENT);
	CHECK_STR(s.object, "");
	crash_sym_end(&cache);
}

/* Writes a whole report into fd and mem. */
static void write_sample(int fd, char *mem, size_t cap, int complete)
{
	struct crash_out o;
	uintptr_t ips[2] = {(uintptr_t)crash_test_marker + 1, 16};

	crash_out_init(&o);
	crash_out_fd(&o, fd);
	crash_out_mem(&o, mem, cap);
	crash_report_head(&o, "crash", "SIGSEGV (SEGV_MAPERR) at address 0x0");
	crash_report_key_int(&o, "signal", SIGSEGV);
	crash_report_key_int(&o, "thread", 77);
	crash_report_body(&o);
	crash_report_thread(&o, 77, 0x7f00aa, "main \"quoted\"",
			    "crashed main");
	crash_report_python(&o, NULL);
	crash_report_frame(&o, "f.<locals>.g", "/tmp/odd\tname\\x.py", 12);
	crash_report_frame(&o, "<module>", "/tmp/a\", line 3, in b.py", 3);
	crash_sym_begin(&cache);
	crash_report_native(&o, &cache, ips, 2, 1, 0);
	crash_sym_end(&cache);
	crash_report_thread_end(&o);
	if (!complete) {
		crash_out_flush(&o);
		return;
	}
	crash_report_thread(&o, 78, 0x7f00bb, NULL, "");
	crash_report_python(&o, NULL);
	crash_report_note(&o, "no Python frames");
	crash_report_thread_end(&o);
	crash_report_end(&o);
}

static void test_round_trip(void)
{
	static char mem[65536], piped[65536];
	struct cli_report r;
	char err[128];
	int p[2];
	ssize_t n;

	CHECK(pipe(p) == 0);
	write_sample(p[1], mem, sizeof(mem), 1);
	close(p[1]);
	n = read(p[0], piped, sizeof(piped) - 1);
	close(p[0]);
	CHECK(n > 0);
	piped[n > 0 ? n : 0] = '\0';
	CHECK_STR(piped, mem); /* the fd and the memory copy agree */
	CHECK(cli_report_parse(mem, strlen(mem), &r, err, sizeof(err)) == 0);
	CHECK(r.version == 1 && r.complete && !r.truncated);
	CHECK_STR(cli_report_get(&r, "kind"), "crash");
	CHECK_STR(cli_report_get(&r, "signal"), "11");
	CHECK_STR(cli_report_get(&r, "reason"),
		  "SIGSEGV (SEGV_MAPERR) at address 0x0");
	CHECK(cli_report_get(&r, "executable") != NULL);
	CHECK(r.nthreads == 2);
	if (r.nthreads == 2) {
		struct cli_report_thread *t = &r.threads[0];

		CHECK(t->tid == 77);
		CHECK_STR(t->ident, "0x7f00aa");
		CHECK_STR(t->name, "main 'quoted'");
		CHECK_STR(t->flags, "crashed main");
		CHECK(t->npy == 2);
		CHECK_STR(t->py[0].func, "f.<locals>.g");
		CHECK_STR(t->py[0].file, "/tmp/odd\tname\\x.py");
		CHECK(t->py[0].line == 12);
		CHECK_STR(t->py[1].file, "/tmp/a\", line 3, in b.py");
		CHECK_STR(t->py[1].func, "<module>");
		CHECK(t->py[1].line == 3);
		CHECK(t->has_native && t->nnat == 2);
		if (t->nnat == 2) {
			CHECK(t->nat[0].index == 0);
			CHECK(!strncmp(t->nat[0].func, "crash_test_marker+0x",
				       20));
			CHECK(strstr(t->nat[0].object, "test_crash_report+") !=
			      NULL);
			CHECK(t->nat[1].func == NULL); /* nothing mapped */
			CHECK(!strcmp(t->nat[1].ip, "0x0000000000000010"));
		}
		t = &r.threads[1];
		CHECK(t->tid == 78 && t->npy == 0 && !t->has_native);
		CHECK(t->npy_notes == 1 &&
		      !strcmp(t->py_notes[0], "no Python frames"));
	}
	cli_report_release(&r);
}

static void test_cut_short_and_not_a_report(void)
{
	static char mem[65536];
	struct cli_report r;
	char err[128];

	write_sample(-1, mem, sizeof(mem), 0);
	CHECK(cli_report_parse(mem, strlen(mem), &r, err, sizeof(err)) == 0);
	CHECK(!r.complete && r.nthreads == 1);
	cli_report_release(&r);
	/* Only a few bytes of the writer's output fit the copy. */
	write_sample(-1, mem, 40, 1);
	CHECK(strlen(mem) == 39);
	CHECK(cli_report_parse(mem, strlen(mem), &r, err, sizeof(err)) == 0);
	CHECK(!r.complete && r.nthreads == 0);
	cli_report_release(&r);
	CHECK(cli_report_parse("hello\n", 6, &r, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not a Probing report") != NULL);
	cli_report_release(&r);
}

/* Symbolizing inside a SIGSEGV handler on a small alternate stack. */
static sigjmp_buf back;
static volatile uintptr_t bad_address = 16; /* not a constant: no warning */
static struct crash_sym in_handler;
static int handler_rc = -1;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	crash_sym_begin(&cache);
	handler_rc = crash_sym_lookup(&cache, (uintptr_t)crash_test_marker, 0,
				      &in_handler);
	crash_sym_end(&cache);
	siglongjmp(back, 1);
}

static void test_in_a_signal_handler(void)
{
	struct sigaction sa, old;
	stack_t ss, oldss;

	ss.ss_sp = mmap(NULL, 64 * 1024, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ss.ss_size = 64 * 1024;
	ss.ss_flags = 0;
	CHECK(sigaltstack(&ss, &oldss) == 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigaction(SIGSEGV, &sa, &old);
	if (!sigsetjmp(back, 1))
		*(volatile int *)bad_address = 1;
	sigaction(SIGSEGV, &old, NULL);
	sigaltstack(&oldss, NULL);
	munmap(ss.ss_sp, ss.ss_size);
	CHECK(handler_rc == 0);
	CHECK_STR(in_handler.func, "crash_test_marker");
}

TEST_MAIN(test_time_format, test_names, test_symbolize_own_function,
	  test_round_trip, test_cut_short_and_not_a_report,
	  test_in_a_signal_handler)
