/*
 * The pure parts of inject/arch: the restart decision, the resume and
 * entry registers, and the shellcode layout of both architectures.  Built
 * on every host (and cross-built for aarch64 by scripts/test-all).  The
 * module sources are compiled in: the unit tests link only the project's
 * dap/sql libraries.
 */
#include "test.h"

#include <errno.h>
#include <stdint.h>

#include "../../inject/arch/arch.c"
#include "../../inject/arch/aarch64.c"
#include "../../inject/arch/x86_64.c"
#include "../../inject/tracee.c"

static void fill(struct inject_regs *r)
{
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < INJECT_REGS_WORDS; i++)
		r->w[i] = 0x1000 + (uint64_t)i;
}

static uint64_t lit(const uint8_t *buf, size_t off)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | buf[off + (size_t)i];
	return v;
}

static void test_restart_kind(void)
{
	CHECK(inject_restart_kind(-1, -512) == INJECT_RESUME);
	CHECK(inject_restart_kind(230, -512) == INJECT_RESTART);
	CHECK(inject_restart_kind(0, -513) == INJECT_RESTART);
	CHECK(inject_restart_kind(23, -514) == INJECT_RESTART);
	CHECK(inject_restart_kind(230, -516) == INJECT_RESTART_BLOCK);
	CHECK(inject_restart_kind(230, -515) == INJECT_RESUME);
	CHECK(inject_restart_kind(0, -4) == INJECT_RESUME); /* EINTR */
	CHECK(inject_restart_kind(0, 5) == INJECT_RESUME);
}

static void test_x86_resume(void)
{
	struct inject_regs r, out;

	fill(&r);
	r.w[X86_ORIG_RAX] = 230; /* clock_nanosleep */
	r.w[X86_RAX] = (uint64_t)-514;
	r.w[X86_RIP] = 0x7000102;
	inject_x86_64_resume(&r, &out);
	CHECK(out.w[X86_RIP] == 0x7000100);
	CHECK(out.w[X86_RAX] == 230);
	CHECK(out.w[X86_ORIG_RAX] == (uint64_t)-1);
	CHECK(out.w[X86_RDI] == r.w[X86_RDI] && out.w[X86_RSP] == r.w[X86_RSP]);

	r.w[X86_RAX] = (uint64_t)-516; /* a relative sleep */
	inject_x86_64_resume(&r, &out);
	CHECK(out.w[X86_RIP] == 0x7000100);
	CHECK(out.w[X86_RAX] == 219); /* restart_syscall */

	r.w[X86_RAX] = (uint64_t)-512;
	r.w[X86_ORIG_RAX] = 0; /* read */
	inject_x86_64_resume(&r, &out);
	CHECK(out.w[X86_RAX] == 0 && out.w[X86_RIP] == 0x7000100);

	r.w[X86_RAX] = 17; /* the call had returned: nothing to redo */
	inject_x86_64_resume(&r, &out);
	CHECK(out.w[X86_RAX] == 17 && out.w[X86_RIP] == 0x7000102);
	CHECK(out.w[X86_ORIG_RAX] == (uint64_t)-1);

	r.w[X86_ORIG_RAX] = (uint64_t)-1; /* user code with -512 as data */
	r.w[X86_RAX] = (uint64_t)-512;
	inject_x86_64_resume(&r, &out);
	CHECK(out.w[X86_RAX] == (uint64_t)-512 && out.w[X86_RIP] == 0x7000102);
}

static struct inject_shell shell(const struct inject_regs *resume)
{
	struct inject_shell s = {
		.code = 0x401000,
		.result = 0x602000,
		.dlopen = 0x7f0000001000,
		.dlerror = 0x7f0000002000,
		.errno_fn = 0x7f0000003000,
		.mode = INJECT_RTLD_NOW,
		.path = "/opt/probing/lib/libprobing.so",
		.xsave_size = 2696,
		.resume = resume,
	};
	return s;
}

static void test_x86_entry(void)
{
	struct inject_regs r, e;
	struct inject_shell s;

	fill(&r);
	r.w[X86_RSP] = 0x7ffd00001238;
	s = shell(&r);
	inject_x86_64_entry(&s, &e);
	CHECK(e.w[X86_RIP] == s.code);
	CHECK(e.w[X86_RSP] % 64 == 0);
	/* Below the red zone and the whole save area. */
	CHECK(e.w[X86_RSP] + 2696 <= r.w[X86_RSP] - 256);
	CHECK(r.w[X86_RSP] - e.w[X86_RSP] <= inject_arch_x86_64.stack_need(&s));
	CHECK(e.w[X86_ORIG_RAX] == (uint64_t)-1);
	CHECK(e.w[X86_FS_BASE] == r.w[X86_FS_BASE] &&
	      e.w[X86_CS] == r.w[X86_CS]);
}

static void test_x86_layout(void)
{
	struct inject_regs r;
	struct inject_shell s;
	uint8_t buf[2048];
	char err[256];
	ssize_t n;
	int jmp = 0, xsave = 0;

	fill(&r);
	s = shell(&r);
	n = inject_arch_x86_64.shell_build(&s, buf, sizeof(buf), err,
					   sizeof(err));
	CHECK(n == (ssize_t)inject_arch_x86_64.shell_size(strlen(s.path)));
	CHECK(lit(buf, X86_LIT_OFF + 8 * XL_RIP) == r.w[X86_RIP]);
	CHECK(lit(buf, X86_LIT_OFF + 8 * XL_RSP) == r.w[X86_RSP]);
	CHECK(lit(buf, X86_LIT_OFF + 8 * XL_RFLAGS) == r.w[X86_EFLAGS]);
	CHECK(lit(buf, X86_LIT_OFF + 8 * XL_R15) == r.w[X86_R15]);
	CHECK(lit(buf, X86_LIT_OFF + 8 * XL_RAX) == r.w[X86_RAX]);
	CHECK(lit(buf, X86_LIT_OFF + 8 * XL_DLOPEN) == s.dlopen);
	CHECK(lit(buf, X86_LIT_OFF + 8 * XL_RESULT) == s.result);
	CHECK_STR((const char *)buf + X86_PATH_OFF, s.path);
	for (int i = 0; i + 6 <= X86_CODE_MAX; i++) {
		int32_t d;
		memcpy(&d, buf + i + 2, 4);
		/* jmp [rip+d] to the literal of rip: the last instruction. */
		if (buf[i] == 0xff && buf[i + 1] == 0x25 &&
		    i + 6 + d == X86_LIT_OFF + 8 * XL_RIP)
			jmp = 1;
		if (!memcmp(buf + i, "\x48\x0f\xae\x24\x24", 5))
			xsave = 1;
	}
	CHECK(jmp);
	CHECK(xsave);
	s.xsave_size = 0; /* FXSAVE */
	n = inject_arch_x86_64.shell_build(&s, buf, sizeof(buf), err,
					   sizeof(err));
	CHECK(n > 0);
	xsave = 0;
	for (int i = 0; i + 5 <= X86_CODE_MAX; i++)
		xsave |= !memcmp(buf + i, "\x48\x0f\xae\x04\x24", 5);
	CHECK(xsave);
	n = inject_arch_x86_64.shell_build(&s, buf, 100, err, sizeof(err));
	CHECK(n == -ENOSPC);
}

static void test_a64_resume(void)
{
	struct inject_regs ev, entry, out;

	fill(&ev);
	ev.w[A64_PC] = 0xffff80001000; /* on the svc, rewound */
	ev.w[7] = 0x77;
	ev.w[8] = 101; /* nanosleep */
	entry = ev;
	entry.w[A64_PC] += 4;
	entry.w[7] = 0;	  /* the stop's direction */
	entry.w[8] = 128; /* the kernel chose restart_syscall */
	inject_aarch64_resume(&ev, &entry, &out);
	CHECK(out.w[A64_PC] == 0xffff80001000);
	CHECK(out.w[7] == 0x77);
	CHECK(out.w[8] == 128);
	CHECK(out.sysno == -1);
	inject_aarch64_resume(&ev, NULL, &out);
	CHECK(out.w[A64_PC] == ev.w[A64_PC] && out.w[8] == 101);
}

static void test_a64_entry(void)
{
	struct inject_regs r, e;
	struct inject_shell s;

	fill(&r);
	r.w[A64_SP] = 0xfffff0001238;
	r.w[A64_PSTATE] = 0x60000000 | (3 << 10); /* Z C, BTYPE 3 */
	s = shell(&r);
	inject_aarch64_entry(&s, 0, &e);
	CHECK(e.w[A64_PC] == s.code);
	CHECK(e.w[A64_SP] % 16 == 0);
	CHECK(e.w[A64_SP] + 528 <= r.w[A64_SP] - 256);
	CHECK(e.w[A64_PSTATE] == 0x60000000);
	CHECK(e.w[0] == r.w[0] && e.w[5] == r.w[5]);
	inject_aarch64_entry(&s, 1, &e);
	for (int i = 0; i < 6; i++)
		CHECK(e.w[i] == (uint64_t)-1);
	CHECK(e.w[6] == r.w[6] && e.w[8] == r.w[8]);
}

/* The target of the ldr-literal at word i of buf. */
static int ldr_target(const uint8_t *buf, int i, int *rt)
{
	uint32_t w;
	int32_t imm;

	memcpy(&w, buf + 4 * i, 4);
	if ((w & 0xff000000u) != 0x58000000u)
		return -1;
	imm = (int32_t)(w << 8) >> 13; /* imm19, sign-extended */
	*rt = (int)(w & 31);
	return 4 * i + 4 * imm;
}

static void test_a64_layout(void)
{
	struct inject_regs r;
	struct inject_shell s;
	uint8_t buf[2048];
	char err[256];
	ssize_t n;
	int restored[31] = {0}, nrestored = 0, last = -1;
	uint32_t w, first;

	fill(&r);
	r.w[A64_PC] = 0x400000;
	r.w[A64_PSTATE] = 0x90000000 | (1 << 10);
	s = shell(&r);
	n = inject_arch_aarch64.shell_build(&s, buf, sizeof(buf), err,
					    sizeof(err));
	CHECK(n == (ssize_t)inject_arch_aarch64.shell_size(strlen(s.path)));
	memcpy(&first, buf, 4);
	CHECK(first == 0xad0007e0u); /* stp q0, q1, [sp] */
	for (int i = 0; i < 31; i++)
		CHECK(lit(buf, A64_LIT_OFF + 8 * (AL_X0 + (size_t)i)) ==
		      r.w[i]);
	CHECK(lit(buf, A64_LIT_OFF + 8 * AL_SP) == r.w[A64_SP]);
	CHECK(lit(buf, A64_LIT_OFF + 8 * AL_NZCV) == 0x90000000);
	CHECK(lit(buf, A64_LIT_OFF + 8 * AL_RESULT) == s.result);
	CHECK_STR((const char *)buf + A64_PATH_OFF, s.path);
	/* Every x0..x30 is loaded from its own literal, at the end. */
	for (int i = 0; i < A64_CODE_MAX / 4; i++) {
		int rt, t = ldr_target(buf, i, &rt);
		if (t == A64_LIT_OFF + 8 * (AL_X0 + rt) && !restored[rt]) {
			restored[rt] = 1;
			nrestored++;
		}
		memcpy(&w, buf + 4 * i, 4);
		if (w)
			last = i;
	}
	CHECK(nrestored == 31);
	/* The last instruction: b to the resume pc. */
	memcpy(&w, buf + 4 * last, 4);
	CHECK((w & 0xfc000000u) == 0x14000000u);
	CHECK(s.code + 4 * (uint64_t)last +
		      (uint64_t)(((int64_t)(int32_t)(w << 6)) >> 4) ==
	      r.w[A64_PC]);
	/* Out of a direct branch's reach. */
	r.w[A64_PC] = 0x7f0000000000;
	n = inject_arch_aarch64.shell_build(&s, buf, sizeof(buf), err,
					    sizeof(err));
	CHECK(n == -ERANGE);
	CHECK(strstr(err, "128 MiB") != NULL);
}

static void test_tables(void)
{
	CHECK(inject_arch_for(INJECT_EM_X86_64) == inject_arch_native() ||
	      inject_arch_for(INJECT_EM_AARCH64) == inject_arch_native());
	CHECK_STR(inject_arch_x86_64.syscall_name(230), "clock_nanosleep");
	CHECK_STR(inject_arch_aarch64.syscall_name(115), "clock_nanosleep");
	CHECK(inject_arch_aarch64.syscall_name(9999) == NULL);
#if defined(__x86_64__)
	CHECK(inject_arch_x86_64.regs_get != NULL);
	CHECK(inject_arch_aarch64.regs_get == NULL);
#elif defined(__aarch64__)
	CHECK(inject_arch_aarch64.regs_get != NULL);
	CHECK(inject_arch_x86_64.regs_get == NULL);
#endif
}

TEST_MAIN(test_restart_kind, test_x86_resume, test_x86_entry, test_x86_layout,
	  test_a64_resume, test_a64_entry, test_a64_layout, test_tables)
