/*
 * Runs the real shellcode of this machine's architecture in-process: every
 * general register, the flags and the vector registers are set to known
 * values (R'), the shellcode is entered on a scratch stack, calls a fake
 * dlopen that clobbers everything it may and changes errno, and must land
 * at R'.pc with every register as it was, errno restored, and the result
 * area filled.  aarch64: built with the cross compiler and run under qemu
 * by scripts/test-all.
 */
#include "test.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "../../inject/arch/arch.c"
#include "../../inject/arch/aarch64.c"
#include "../../inject/arch/x86_64.c"
#include "../../inject/tracee.c"

#if defined(__x86_64__) || defined(__aarch64__)

#define NVEC 32
/* Shared with the assembly below: global, so that the compiler cannot
 * assume the calls leave them alone. */
uint8_t probing_test_vec_in[NVEC][16];	/* loaded before entry */
uint8_t probing_test_vec_out[NVEC][16]; /* stored at the landing */
uint64_t probing_test_got[40];		/* general registers at the landing */
uint64_t probing_test_host_sp;		/* the C stack, across the call */
#define vec_in probing_test_vec_in
#define vec_out probing_test_vec_out
#define got probing_test_got
static const char *fake_path, *fake_error;
static int fake_mode, fake_calls;
static void *fake_return;

/* Clobbers what a C function may: vector registers, flags, errno. */
__attribute__((noinline)) static void clobber(void)
{
	volatile double d = 1.0;

	for (int i = 0; i < 100; i++)
		d = d * 1.0001 + 0.5;
	errno = 99;
}

static void *fake_dlopen(const char *path, int mode)
{
	fake_path = path;
	fake_mode = mode;
	fake_calls++;
	clobber();
	return fake_return;
}

static char *fake_dlerror(void)
{
	clobber();
	return (char *)fake_error;
}

#endif

#if defined(__x86_64__)
/* shell_call(entry, sp): saves the C context, loads xmm0-15, jumps.
 * shell_land: R'.rip; stores everything, restores the C context. */
void probing_shell_call(uint64_t entry, uint64_t sp);
void probing_shell_land(void);
__asm__(".text\n"
	".globl probing_shell_call\n"
	"probing_shell_call:\n"
	"  push %rbx\n push %rbp\n push %r12\n push %r13\n push %r14\n"
	"  push %r15\n"
	"  mov %rsp, probing_test_host_sp(%rip)\n"
	"  lea probing_test_vec_in(%rip), %rax\n"
	"  movdqu 0(%rax), %xmm0\n movdqu 16(%rax), %xmm1\n"
	"  movdqu 32(%rax), %xmm2\n movdqu 48(%rax), %xmm3\n"
	"  movdqu 64(%rax), %xmm4\n movdqu 80(%rax), %xmm5\n"
	"  movdqu 96(%rax), %xmm6\n movdqu 112(%rax), %xmm7\n"
	"  movdqu 128(%rax), %xmm8\n movdqu 144(%rax), %xmm9\n"
	"  movdqu 160(%rax), %xmm10\n movdqu 176(%rax), %xmm11\n"
	"  movdqu 192(%rax), %xmm12\n movdqu 208(%rax), %xmm13\n"
	"  movdqu 224(%rax), %xmm14\n movdqu 240(%rax), %xmm15\n"
	"  mov %rsi, %rsp\n"
	"  jmp *%rdi\n"
	".globl probing_shell_land\n"
	"probing_shell_land:\n"
	"  pushfq\n"
	"  popq probing_test_got+144(%rip)\n"
	"  mov %rax, probing_test_got+0(%rip)\n mov %rbx, probing_test_got+8(%rip)\n"
	"  mov %rcx, probing_test_got+16(%rip)\n mov %rdx, probing_test_got+24(%rip)\n"
	"  mov %rsi, probing_test_got+32(%rip)\n mov %rdi, probing_test_got+40(%rip)\n"
	"  mov %rbp, probing_test_got+48(%rip)\n mov %rsp, probing_test_got+56(%rip)\n"
	"  mov %r8, probing_test_got+64(%rip)\n mov %r9, probing_test_got+72(%rip)\n"
	"  mov %r10, probing_test_got+80(%rip)\n mov %r11, probing_test_got+88(%rip)\n"
	"  mov %r12, probing_test_got+96(%rip)\n mov %r13, probing_test_got+104(%rip)\n"
	"  mov %r14, probing_test_got+112(%rip)\n mov %r15, probing_test_got+120(%rip)\n"
	"  lea probing_test_vec_out(%rip), %rax\n"
	"  movdqu %xmm0, 0(%rax)\n movdqu %xmm1, 16(%rax)\n"
	"  movdqu %xmm2, 32(%rax)\n movdqu %xmm3, 48(%rax)\n"
	"  movdqu %xmm4, 64(%rax)\n movdqu %xmm5, 80(%rax)\n"
	"  movdqu %xmm6, 96(%rax)\n movdqu %xmm7, 112(%rax)\n"
	"  movdqu %xmm8, 128(%rax)\n movdqu %xmm9, 144(%rax)\n"
	"  movdqu %xmm10, 160(%rax)\n movdqu %xmm11, 176(%rax)\n"
	"  movdqu %xmm12, 192(%rax)\n movdqu %xmm13, 208(%rax)\n"
	"  movdqu %xmm14, 224(%rax)\n movdqu %xmm15, 240(%rax)\n"
	"  cld\n"
	"  mov probing_test_host_sp(%rip), %rsp\n"
	"  pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbp\n pop %rbx\n"
	"  ret\n");

/* Hardware order of got[]: rax rbx rcx rdx rsi rdi rbp rsp r8..r15. */
static const int x86_index[16] = {
	X86_RAX, X86_RBX, X86_RCX, X86_RDX, X86_RSI, X86_RDI, X86_RBP, X86_RSP,
	X86_R8,	 X86_R9,  X86_R10, X86_R11, X86_R12, X86_R13, X86_R14, X86_R15};
#define NVEC_USED 16
#define FLAGS_MASK 0xcd5 /* CF PF AF ZF SF DF OF */
#define PC_INDEX X86_RIP
#define SP_INDEX X86_RSP
#define SP_SKEW 8
#endif

#if defined(__aarch64__)
void probing_shell_call(uint64_t entry, uint64_t sp);
void probing_shell_land(void);
__asm__(".text\n"
	".globl probing_shell_call\n"
	"probing_shell_call:\n"
	"  stp x29, x30, [sp, #-96]!\n"
	"  stp x19, x20, [sp, #16]\n stp x21, x22, [sp, #32]\n"
	"  stp x23, x24, [sp, #48]\n stp x25, x26, [sp, #64]\n"
	"  stp x27, x28, [sp, #80]\n"
	"  sub sp, sp, #64\n"
	"  stp d8, d9, [sp, #0]\n stp d10, d11, [sp, #16]\n"
	"  stp d12, d13, [sp, #32]\n stp d14, d15, [sp, #48]\n"
	"  adrp x9, probing_test_host_sp\n"
	"  add x9, x9, :lo12:probing_test_host_sp\n"
	"  mov x10, sp\n str x10, [x9]\n"
	"  adrp x9, probing_test_vec_in\n"
	"  add x9, x9, :lo12:probing_test_vec_in\n"
	"  ldp q0, q1, [x9, #0]\n ldp q2, q3, [x9, #32]\n"
	"  ldp q4, q5, [x9, #64]\n ldp q6, q7, [x9, #96]\n"
	"  ldp q8, q9, [x9, #128]\n ldp q10, q11, [x9, #160]\n"
	"  ldp q12, q13, [x9, #192]\n ldp q14, q15, [x9, #224]\n"
	"  ldp q16, q17, [x9, #256]\n ldp q18, q19, [x9, #288]\n"
	"  ldp q20, q21, [x9, #320]\n ldp q22, q23, [x9, #352]\n"
	"  ldp q24, q25, [x9, #384]\n ldp q26, q27, [x9, #416]\n"
	"  ldp q28, q29, [x9, #448]\n ldp q30, q31, [x9, #480]\n"
	"  mov sp, x1\n"
	"  br x0\n"
	".globl probing_shell_land\n"
	"probing_shell_land:\n"
	"  stp x0, x1, [sp, #-16]\n"
	"  adrp x0, probing_test_got\n"
	"  add x0, x0, :lo12:probing_test_got\n"
	"  stp x2, x3, [x0, #16]\n"
	"  ldp x2, x3, [sp, #-16]\n"
	"  stp x2, x3, [x0, #0]\n"
	"  mrs x1, nzcv\n str x1, [x0, #272]\n"
	"  stp x4, x5, [x0, #32]\n stp x6, x7, [x0, #48]\n"
	"  stp x8, x9, [x0, #64]\n stp x10, x11, [x0, #80]\n"
	"  stp x12, x13, [x0, #96]\n stp x14, x15, [x0, #112]\n"
	"  stp x16, x17, [x0, #128]\n stp x18, x19, [x0, #144]\n"
	"  stp x20, x21, [x0, #160]\n stp x22, x23, [x0, #176]\n"
	"  stp x24, x25, [x0, #192]\n stp x26, x27, [x0, #208]\n"
	"  stp x28, x29, [x0, #224]\n str x30, [x0, #240]\n"
	"  mov x1, sp\n str x1, [x0, #248]\n"
	"  mrs x1, fpsr\n str x1, [x0, #256]\n"
	"  mrs x1, fpcr\n str x1, [x0, #264]\n"
	"  adrp x0, probing_test_vec_out\n"
	"  add x0, x0, :lo12:probing_test_vec_out\n"
	"  stp q0, q1, [x0, #0]\n stp q2, q3, [x0, #32]\n"
	"  stp q4, q5, [x0, #64]\n stp q6, q7, [x0, #96]\n"
	"  stp q8, q9, [x0, #128]\n stp q10, q11, [x0, #160]\n"
	"  stp q12, q13, [x0, #192]\n stp q14, q15, [x0, #224]\n"
	"  stp q16, q17, [x0, #256]\n stp q18, q19, [x0, #288]\n"
	"  stp q20, q21, [x0, #320]\n stp q22, q23, [x0, #352]\n"
	"  stp q24, q25, [x0, #384]\n stp q26, q27, [x0, #416]\n"
	"  stp q28, q29, [x0, #448]\n stp q30, q31, [x0, #480]\n"
	"  adrp x9, probing_test_host_sp\n"
	"  add x9, x9, :lo12:probing_test_host_sp\n"
	"  ldr x10, [x9]\n mov sp, x10\n"
	"  ldp d8, d9, [sp, #0]\n ldp d10, d11, [sp, #16]\n"
	"  ldp d12, d13, [sp, #32]\n ldp d14, d15, [sp, #48]\n"
	"  add sp, sp, #64\n"
	"  ldp x19, x20, [sp, #16]\n ldp x21, x22, [sp, #32]\n"
	"  ldp x23, x24, [sp, #48]\n ldp x25, x26, [sp, #64]\n"
	"  ldp x27, x28, [sp, #80]\n"
	"  ldp x29, x30, [sp], #96\n"
	"  ret\n");
#define NVEC_USED 32
#define PC_INDEX A64_PC
#define SP_INDEX A64_SP
#define SP_SKEW 0
#endif

#if defined(__x86_64__) || defined(__aarch64__)

static uint8_t stack_area[256 * 1024] __attribute__((aligned(64)));
static uint8_t result[INJECT_RESULT_SIZE] __attribute__((aligned(8)));

/* An executable page within a direct branch of the landing pad. */
static uint8_t *code_page(void)
{
	uintptr_t near = (uintptr_t)probing_shell_land & ~(uintptr_t)0xfff;

	for (uintptr_t d = 16 << 20; d <= 96 << 20; d += 16 << 20) {
		void *p = mmap((void *)(near + d), 16384,
			       PROT_READ | PROT_WRITE | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			continue;
		if ((uintptr_t)p - near < (100u << 20) ||
		    near - (uintptr_t)p < (100u << 20))
			return p;
		munmap(p, 16384);
	}
	return NULL;
}

static const struct inject_arch *arch(void)
{
	return inject_arch_native();
}

static void run(int succeed, uint32_t xsave_size, const char *error)
{
	struct inject_regs r, e;
	struct inject_shell s;
	uint8_t *page = code_page();
	char err[256];
	ssize_t n;
	uint64_t handle;

	CHECK(page != NULL);
	if (!page)
		return;
	memset(&r, 0, sizeof(r));
	memset(got, 0, sizeof(got));
	memset(vec_out, 0, sizeof(vec_out));
	memset(result, 0, sizeof(result));
	for (int v = 0; v < NVEC; v++)
		for (int b = 0; b < 16; b++)
			vec_in[v][b] = (uint8_t)(v * 16 + b + 1);
#if defined(__x86_64__)
	for (int i = 0; i < 16; i++)
		r.w[x86_index[i]] = 0x0101010101010101ULL * (uint64_t)(i + 1);
	r.w[X86_EFLAGS] = 0x202 | 0x1 | 0x4 | 0x40 | 0x80 | 0x400 | 0x800;
#else
	for (int i = 0; i <= 30; i++)
		r.w[i] = 0x0101010101010101ULL * (uint64_t)(i + 1);
	r.w[A64_PSTATE] = 0xa0000000; /* N C */
#endif
	/* x86_64: mid-function, rsp 8 off 16-byte alignment; aarch64 sp is
	 * 16-aligned wherever it is used. */
	r.w[SP_INDEX] = (uint64_t)(uintptr_t)(stack_area + sizeof(stack_area) -
					      4096 + SP_SKEW);
	r.w[PC_INDEX] = (uint64_t)(uintptr_t)probing_shell_land;
	s = (struct inject_shell){
		.code = (uint64_t)(uintptr_t)page,
		.result = (uint64_t)(uintptr_t)result,
		.dlopen = (uint64_t)(uintptr_t)fake_dlopen,
		.dlerror = (uint64_t)(uintptr_t)fake_dlerror,
		.errno_fn = (uint64_t)(uintptr_t)__errno_location,
		.mode = INJECT_RTLD_NOW,
		.path = "/some/where/libprobing.so",
		.xsave_size = xsave_size,
		.resume = &r,
	};
	n = arch()->shell_build(&s, page, 16384, err, sizeof(err));
	CHECK(n > 0);
	if (n <= 0) {
		fprintf(stderr, "%s\n", err);
		return;
	}
	__builtin___clear_cache((char *)page, (char *)page + n);
#if defined(__x86_64__)
	inject_x86_64_entry(&s, &e);
#else
	inject_aarch64_entry(&s, 0, &e);
#endif
	fake_return = succeed ? (void *)0x1234 : NULL;
	fake_error = error;
	fake_calls = 0;
	errno = 42;
	probing_shell_call(e.w[PC_INDEX], e.w[SP_INDEX]);
	CHECK(errno == 42); /* restored after fake_dlopen set 99 */
	CHECK(fake_calls == 1);
	CHECK_STR(fake_path, s.path);
	CHECK(fake_mode == INJECT_RTLD_NOW);
#if defined(__x86_64__)
	for (int i = 0; i < 16; i++)
		CHECK(got[i] == r.w[x86_index[i]]);
	CHECK((got[18] & FLAGS_MASK) == (r.w[X86_EFLAGS] & FLAGS_MASK));
#else
	for (int i = 0; i <= 30; i++)
		CHECK(got[i] == r.w[i]);
	CHECK(got[31] == r.w[A64_SP]);
	CHECK(got[34] == 0xa0000000); /* nzcv */
#endif
	for (int v = 0; v < NVEC_USED; v++)
		CHECK(!memcmp(vec_in[v], vec_out[v], 16));
	memcpy(&handle, result + INJECT_RESULT_HANDLE, 8);
	CHECK(result[INJECT_RESULT_STATE] == INJECT_STATE_DONE);
	CHECK(handle == (succeed ? 0x1234 : 0));
	if (succeed || !error) {
		CHECK(result[INJECT_RESULT_ERROR] == 0);
	} else {
		char want[INJECT_ERROR_MAX];
		snprintf(want, sizeof(want), "%s", error); /* cut like it */
		CHECK_STR((const char *)result + INJECT_RESULT_ERROR, want);
	}
	munmap(page, 16384);
}

static uint32_t xsave(void)
{
	return arch()->xsave_size ? arch()->xsave_size() : 0;
}

static void test_dlopen_ok(void)
{
	run(1, xsave(), "unused");
}

static void test_dlopen_fails(void)
{
	run(0, xsave(), "fake: cannot open shared object file");
	run(0, xsave(), NULL); /* dlerror() gave nothing */
}

static void test_fxsave(void)
{
#if defined(__x86_64__)
	run(1, 0, "unused");
	run(0, 0, "fake: no");
#endif
}

static void test_long_error_is_cut(void)
{
	static char longmsg[1000];

	memset(longmsg, 'x', sizeof(longmsg) - 1);
	run(0, xsave(), longmsg);
	CHECK(strlen((const char *)result + INJECT_RESULT_ERROR) ==
	      INJECT_ERROR_MAX - 1);
}

TEST_MAIN(test_dlopen_ok, test_dlopen_fails, test_fxsave,
	  test_long_error_is_cut)

#else
static void test_nothing(void)
{
	CHECK(1);
}
TEST_MAIN(test_nothing)
#endif
