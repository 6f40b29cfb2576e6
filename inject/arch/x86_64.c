/*
 * inject_x86_64: registers, system call restart and the shellcode for
 * x86_64; see arch.h.
 *
 * Resume state.  At the interrupt stop of a thread that was sleeping in a
 * system call, the kernel has not yet decided about the restart: rax holds
 * -ERESTART*, orig_rax the call, rip the instruction after `syscall`.  If
 * the thread were simply released, arch_do_signal_or_restart() would see
 * no signal to handle and restart the call (rip -= 2, rax = orig_rax, or
 * restart_syscall for -ERESTART_RESTARTBLOCK).  The shellcode returns to
 * user space by itself, past that kernel code, so R' is that decision
 * taken by us: inject_x86_64_resume().  orig_rax = -1 in the entry
 * registers keeps the kernel from applying it a second time.
 *
 * Shellcode (rip-relative throughout; rbx holds the result area):
 *
 *   xor eax,eax; mov [rsp+512..575],rax   XSAVE header must be zero
 *   cld; mov eax,-1; mov edx,-1
 *   xsave64 [rsp]                         (fxsave64 without XSAVE)
 *   mov rbx,[rip+L_result]; mov dword [rbx],2     (STARTED)
 *   call [rip+L_errno]; mov [rbx+16],rax; mov eax,[rax]; mov [rbx+4],eax
 *   lea rdi,[rip+path]; mov esi,mode; call [rip+L_dlopen]
 *   mov [rbx+8],rax; test rax,rax; jnz after
 *   mov rax,[rip+L_dlerror]; test rax,rax; jz after; call rax
 *   test rax,rax; jz after
 *   lea rdi,[rbx+48]; mov ecx,255
 *   loop: mov dl,[rax]; mov [rdi],dl; test dl,dl; jz after
 *         inc rax; inc rdi; dec ecx; jnz loop
 *   mov byte [rdi],0
 *   after: mov rax,[rbx+16]; mov ecx,[rbx+4]; mov [rax],ecx
 *   mov dword [rbx],1                      (DONE)
 *   mov eax,-1; mov edx,-1; xrstor64 [rsp]
 *   push qword [rip+L_rflags]; popfq
 *   mov rsp,[rip+L_rsp]; mov r,[rip+L_r] for the 15 others
 *   jmp [rip+L_rip]
 *
 * The entry rsp is R'.rsp - 256 (past the 128-byte red zone) minus the
 * save area, aligned to 64: the save area is [rsp, rsp + size) and the
 * calls below it find rsp 16-byte aligned.
 */
#include "arch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tracee.h"

#define X86_CODE_MAX 384
/* clang-format off */
enum {
	XL_RAX, XL_RBX, XL_RCX, XL_RDX, XL_RSI, XL_RDI, XL_RBP, XL_RSP,
	XL_R8, XL_R9, XL_R10, XL_R11, XL_R12, XL_R13, XL_R14, XL_R15,
	XL_RIP, XL_RFLAGS, XL_DLOPEN, XL_DLERROR, XL_ERRNO, XL_RESULT, X86_NLIT
};
/* clang-format on */
#define X86_LIT_OFF X86_CODE_MAX
#define X86_PATH_OFF (X86_LIT_OFF + 8 * X86_NLIT)
#define X86_RED_ZONE 256
#define X86_FXSAVE_SIZE 512
#define X86_NR_RESTART 219

/* ---- resume and entry state (pure) ------------------------------------ */

void inject_x86_64_resume(const struct inject_regs *r, struct inject_regs *out)
{
	int64_t nr = (int64_t)r->w[X86_ORIG_RAX];

	*out = *r;
	switch (inject_restart_kind(nr, (int64_t)r->w[X86_RAX])) {
	case INJECT_RESTART:
		out->w[X86_RIP] -= 2; /* back onto `syscall` (0f 05) */
		out->w[X86_RAX] = (uint64_t)nr;
		break;
	case INJECT_RESTART_BLOCK:
		out->w[X86_RIP] -= 2;
		out->w[X86_RAX] = X86_NR_RESTART;
		break;
	case INJECT_RESUME:
		break;
	}
	out->w[X86_ORIG_RAX] = (uint64_t)-1;
	out->sysno = -1;
}

static size_t x86_save_area(const struct inject_shell *s)
{
	size_t n = s->xsave_size ? s->xsave_size : X86_FXSAVE_SIZE;

	return (n + 63) & ~(size_t)63;
}

static size_t x86_stack_need(const struct inject_shell *s)
{
	return X86_RED_ZONE + x86_save_area(s) + 64;
}

void inject_x86_64_entry(const struct inject_shell *s, struct inject_regs *out)
{
	uint64_t sp = s->resume->w[X86_RSP] - X86_RED_ZONE - x86_save_area(s);

	*out = *s->resume;
	out->w[X86_RSP] = sp & ~(uint64_t)63;
	out->w[X86_RIP] = s->code;
	out->w[X86_ORIG_RAX] = (uint64_t)-1;
	out->sysno = -1;
}

/* ---- the shellcode builder (pure) ------------------------------------- */

struct xbuf {
	uint8_t *p;
	size_t cap, len;
};

static void x86_b1(struct xbuf *b, uint8_t v)
{
	if (b->len < b->cap)
		b->p[b->len] = v;
	b->len++;
}

static void x86_bn(struct xbuf *b, const uint8_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x86_b1(b, v[i]);
}

static void x86_b32(struct xbuf *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		x86_b1(b, (uint8_t)(v >> (8 * i)));
}

#define X86_OP(b, ...)                                                         \
	do {                                                                   \
		static const uint8_t op_[] = {__VA_ARGS__};                    \
		x86_bn(b, op_, sizeof(op_));                                   \
	} while (0)

/* Opcode bytes, then a disp32 to target (an offset in the shellcode)
 * relative to the end of the instruction, which has trail more bytes. */
static void x86_riprel(struct xbuf *b, const uint8_t *op, size_t n,
		       size_t target, size_t trail)
{
	x86_bn(b, op, n);
	x86_b32(b, (uint32_t)(int32_t)((int64_t)target -
				       (int64_t)(b->len + 4 + trail)));
}

#define X86_RIPREL(b, target, trail, ...)                                      \
	do {                                                                   \
		static const uint8_t op_[] = {__VA_ARGS__};                    \
		x86_riprel(b, op_, sizeof(op_), target, trail);                \
	} while (0)

/* x86_jcc rel32: cc 0x84 (jz) or 0x85 (jnz). */
static void x86_jcc(struct xbuf *b, uint8_t cc, size_t target)
{
	x86_b1(b, 0x0f);
	x86_b1(b, cc);
	x86_b32(b,
		(uint32_t)(int32_t)((int64_t)target - (int64_t)(b->len + 4)));
}

/* mov r64, [rip + literal]; reg is the hardware number (rax 0 .. r15 15). */
static void x86_load_lit(struct xbuf *b, int reg, int lit)
{
	uint8_t op[3] = {(uint8_t)(0x48 | (reg >= 8 ? 0x04 : 0)), 0x8b,
			 (uint8_t)(0x05 | ((reg & 7) << 3))};

	x86_riprel(b, op, 3, X86_LIT_OFF + 8 * (size_t)lit, 0);
}

enum { XLB_AFTER, XLB_LOOP, X86_NLABELS };

static void x86_emit(struct xbuf *b, const struct inject_shell *s,
		     size_t *label)
{
	/* Hardware register number -> literal slot, for the final loads. */
	static const int restore[][2] = {
		{0, XL_RAX},  {1, XL_RCX},  {2, XL_RDX},  {3, XL_RBX},
		{5, XL_RBP},  {6, XL_RSI},  {7, XL_RDI},  {8, XL_R8},
		{9, XL_R9},   {10, XL_R10}, {11, XL_R11}, {12, XL_R12},
		{13, XL_R13}, {14, XL_R14}, {15, XL_R15},
	};
	const size_t lit = X86_LIT_OFF;

	if (s->xsave_size) {
		/* xor eax,eax; mov [rsp+512..568],rax: the XSAVE header */
		X86_OP(b, 0x31, 0xc0);
		for (uint32_t off = 512; off < 576; off += 8) {
			X86_OP(b, 0x48, 0x89, 0x84, 0x24);
			x86_b32(b, off);
		}
	}
	/* cld; mov eax,-1; mov edx,-1; xsave64 [rsp] (or fxsave64) */
	X86_OP(b, 0xfc);
	X86_OP(b, 0xb8, 0xff, 0xff, 0xff, 0xff);
	X86_OP(b, 0xba, 0xff, 0xff, 0xff, 0xff);
	if (s->xsave_size)
		X86_OP(b, 0x48, 0x0f, 0xae, 0x24, 0x24);
	else
		X86_OP(b, 0x48, 0x0f, 0xae, 0x04, 0x24);
	/* mov rbx,[L_result]; mov dword [rbx],STARTED */
	x86_load_lit(b, 3, XL_RESULT);
	X86_OP(b, 0xc7, 0x03, INJECT_STATE_STARTED, 0, 0, 0);
	/* call [L_errno]; mov [rbx+16],rax; mov eax,[rax]; mov [rbx+4],eax */
	X86_RIPREL(b, lit + 8 * XL_ERRNO, 0, 0xff, 0x15);
	X86_OP(b, 0x48, 0x89, 0x43, INJECT_RESULT_ERRNO_PTR);
	X86_OP(b, 0x8b, 0x00);
	X86_OP(b, 0x89, 0x43, INJECT_RESULT_ERRNO);
	/* lea rdi,[path]; mov esi,mode; call [L_dlopen]; mov [rbx+8],rax */
	X86_RIPREL(b, X86_PATH_OFF, 0, 0x48, 0x8d, 0x3d);
	x86_b1(b, 0xbe);
	x86_b32(b, s->mode);
	X86_RIPREL(b, lit + 8 * XL_DLOPEN, 0, 0xff, 0x15);
	X86_OP(b, 0x48, 0x89, 0x43, INJECT_RESULT_HANDLE);
	/* test rax,rax; jnz after */
	X86_OP(b, 0x48, 0x85, 0xc0);
	x86_jcc(b, 0x85, label[XLB_AFTER]);
	/* mov rax,[L_dlerror]; test rax,rax; jz after; call rax */
	x86_load_lit(b, 0, XL_DLERROR);
	X86_OP(b, 0x48, 0x85, 0xc0);
	x86_jcc(b, 0x84, label[XLB_AFTER]);
	X86_OP(b, 0xff, 0xd0);
	/* test rax,rax; jz after; lea rdi,[rbx+48]; mov ecx,max */
	X86_OP(b, 0x48, 0x85, 0xc0);
	x86_jcc(b, 0x84, label[XLB_AFTER]);
	X86_OP(b, 0x48, 0x8d, 0x7b, INJECT_RESULT_ERROR);
	x86_b1(b, 0xb9);
	x86_b32(b, INJECT_ERROR_MAX - 1);
	/* loop: mov dl,[rax]; mov [rdi],dl; test dl,dl; jz after */
	label[XLB_LOOP] = b->len;
	X86_OP(b, 0x8a, 0x10);
	X86_OP(b, 0x88, 0x17);
	X86_OP(b, 0x84, 0xd2);
	x86_jcc(b, 0x84, label[XLB_AFTER]);
	/* inc rax; inc rdi; dec ecx; jnz loop; mov byte [rdi],0 */
	X86_OP(b, 0x48, 0xff, 0xc0);
	X86_OP(b, 0x48, 0xff, 0xc7);
	X86_OP(b, 0xff, 0xc9);
	x86_jcc(b, 0x85, label[XLB_LOOP]);
	X86_OP(b, 0xc6, 0x07, 0x00);
	/* after: mov rax,[rbx+16]; mov ecx,[rbx+4]; mov [rax],ecx */
	label[XLB_AFTER] = b->len;
	X86_OP(b, 0x48, 0x8b, 0x43, INJECT_RESULT_ERRNO_PTR);
	X86_OP(b, 0x8b, 0x4b, INJECT_RESULT_ERRNO);
	X86_OP(b, 0x89, 0x08);
	/* mov dword [rbx],DONE */
	X86_OP(b, 0xc7, 0x03, INJECT_STATE_DONE, 0, 0, 0);
	/* mov eax,-1; mov edx,-1; xrstor64 [rsp] (or fxrstor64) */
	X86_OP(b, 0xb8, 0xff, 0xff, 0xff, 0xff);
	X86_OP(b, 0xba, 0xff, 0xff, 0xff, 0xff);
	if (s->xsave_size)
		X86_OP(b, 0x48, 0x0f, 0xae, 0x2c, 0x24);
	else
		X86_OP(b, 0x48, 0x0f, 0xae, 0x0c, 0x24);
	/* push [L_rflags]; popfq; mov rsp,[L_rsp]; mov r,[L_r] ... */
	X86_RIPREL(b, lit + 8 * XL_RFLAGS, 0, 0xff, 0x35);
	X86_OP(b, 0x9d);
	x86_load_lit(b, 4, XL_RSP);
	for (size_t i = 0; i < sizeof(restore) / sizeof(restore[0]); i++)
		x86_load_lit(b, restore[i][0], restore[i][1]);
	/* jmp [L_rip] */
	X86_RIPREL(b, lit + 8 * XL_RIP, 0, 0xff, 0x25);
}

static size_t x86_shell_size(size_t pathlen)
{
	return X86_PATH_OFF + pathlen + 1;
}

static void x86_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static ssize_t x86_shell_build(const struct inject_shell *s, uint8_t *buf,
			       size_t cap, char *err, size_t errlen)
{
	const struct inject_regs *r = s->resume;
	size_t label[X86_NLABELS] = {0}, pathlen = strlen(s->path);
	struct xbuf b = {buf, X86_CODE_MAX, 0};
	const uint64_t lit[X86_NLIT] = {
		[XL_RAX] = r->w[X86_RAX], [XL_RBX] = r->w[X86_RBX],
		[XL_RCX] = r->w[X86_RCX], [XL_RDX] = r->w[X86_RDX],
		[XL_RSI] = r->w[X86_RSI], [XL_RDI] = r->w[X86_RDI],
		[XL_RBP] = r->w[X86_RBP], [XL_RSP] = r->w[X86_RSP],
		[XL_R8] = r->w[X86_R8],	  [XL_R9] = r->w[X86_R9],
		[XL_R10] = r->w[X86_R10], [XL_R11] = r->w[X86_R11],
		[XL_R12] = r->w[X86_R12], [XL_R13] = r->w[X86_R13],
		[XL_R14] = r->w[X86_R14], [XL_R15] = r->w[X86_R15],
		[XL_RIP] = r->w[X86_RIP], [XL_RFLAGS] = r->w[X86_EFLAGS],
		[XL_DLOPEN] = s->dlopen,  [XL_DLERROR] = s->dlerror,
		[XL_ERRNO] = s->errno_fn, [XL_RESULT] = s->result,
	};

	if (cap < x86_shell_size(pathlen)) {
		snprintf(err, errlen, "shellcode needs %zu bytes, %zu given",
			 x86_shell_size(pathlen), cap);
		return -ENOSPC;
	}
	memset(buf, 0, x86_shell_size(pathlen));
	x86_emit(&b, s, label); /* pass 1: the labels */
	b.len = 0;
	x86_emit(&b, s, label); /* pass 2: the same bytes, with the jumps */
	if (b.len > X86_CODE_MAX) {
		snprintf(err, errlen, "shellcode is %zu bytes, over %d", b.len,
			 X86_CODE_MAX);
		return -ENOSPC;
	}
	for (int i = 0; i < X86_NLIT; i++)
		x86_put64(buf + X86_LIT_OFF + 8 * i, lit[i]);
	memcpy(buf + X86_PATH_OFF, s->path, pathlen + 1);
	return (ssize_t)x86_shell_size(pathlen);
}

/* clang-format off */
static const char *x86_syscall_name(int64_t nr)
{
	switch (nr) {
	case 0: return "read";
	case 1: return "write";
	case 7: return "poll";
	case 9: return "mmap";
	case 10: return "mprotect";
	case 11: return "munmap";
	case 12: return "brk";
	case 23: return "select";
	case 25: return "mremap";
	case 28: return "madvise";
	case 56: return "clone";
	case 57: return "fork";
	case 58: return "vfork";
	case 34: return "pause";
	case 35: return "nanosleep";
	case 43: return "accept";
	case 45: return "recvfrom";
	case 47: return "recvmsg";
	case 61: return "wait4";
	case 202: return "futex";
	case 219: return "restart_syscall";
	case 230: return "clock_nanosleep";
	case 232: return "epoll_wait";
	case 247: return "waitid";
	case 270: return "pselect6";
	case 271: return "ppoll";
	case 281: return "epoll_pwait";
	case 288: return "accept4";
	case 435: return "clone3";
	default: return NULL;
	}
}

/* clang-format on */

/* mmap mprotect munmap brk mremap madvise clone fork vfork clone3 */
static const int x86_locked_syscalls[] = {9,  10, 11, 12,  25, 28,
					  56, 57, 58, 435, -1};

/* ---- the live thread (x86_64 only) ------------------------------------ */

#if defined(__x86_64__)
#include <cpuid.h>
#include <elf.h>
#include <stddef.h>
#include <sys/user.h>

_Static_assert(sizeof(struct user_regs_struct) == X86_NWORDS * 8,
	       "user_regs_struct layout");
_Static_assert(offsetof(struct user_regs_struct, orig_rax) == X86_ORIG_RAX * 8,
	       "orig_rax index");
_Static_assert(offsetof(struct user_regs_struct, rsp) == X86_RSP * 8,
	       "rsp index");
_Static_assert(offsetof(struct user_regs_struct, gs) == X86_GS * 8, "gs index");

static int x86_regs_get(struct inject_tracee *t, struct inject_regs *r,
			char *err, size_t errlen)
{
	struct user_regs_struct u;
	ssize_t n = inject_tracee_getregset(t, NT_PRSTATUS, &u, sizeof(u), err,
					    errlen);

	if (n < 0)
		return (int)n;
	if (n != sizeof(u)) {
		snprintf(err, errlen,
			 "NT_PRSTATUS: %zd bytes (a 32-bit "
			 "thread?)",
			 n);
		return -ENOEXEC;
	}
	memset(r, 0, sizeof(*r));
	memcpy(r->w, &u, sizeof(u));
	r->sysno = (int64_t)r->w[X86_ORIG_RAX];
	return 0;
}

static int x86_regs_set(struct inject_tracee *t, const struct inject_regs *r,
			char *err, size_t errlen)
{
	struct user_regs_struct u;

	memcpy(&u, r->w, sizeof(u));
	return inject_tracee_setregset(t, NT_PRSTATUS, &u, sizeof(u), err,
				       errlen);
}

static int x86_where(struct inject_tracee *t, const struct inject_regs *r,
		     struct inject_where *w, char *err, size_t errlen)
{
	(void)t;
	(void)err;
	(void)errlen;
	w->pc = r->w[X86_RIP];
	w->nr = (int64_t)r->w[X86_ORIG_RAX];
	if (w->nr < 0)
		w->nr = -1;
	w->restart = inject_restart_kind(w->nr, (int64_t)r->w[X86_RAX]);
	return 0;
}

static int x86_resume(struct inject_tracee *t, const struct inject_regs *r,
		      struct inject_regs *out, char *err, size_t errlen)
{
	(void)t;
	(void)err;
	(void)errlen;
	inject_x86_64_resume(r, out);
	return 0;
}

static int x86_enter(struct inject_tracee *t, const struct inject_shell *s,
		     char *err, size_t errlen)
{
	struct inject_regs e;

	inject_x86_64_entry(s, &e);
	/* One call: before it the thread is untouched, after it the thread
	 * runs the shellcode whoever releases it. */
	return x86_regs_set(t, &e, err, errlen);
}

/* The XSAVE area for every feature the OS enabled (XCR0), or 0 when the
 * OS does not use XSAVE (then FXSAVE). */
static uint32_t x86_xsave_size(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))
		return 0; /* no OSXSAVE */
	if (__get_cpuid_max(0, NULL) < 0xd)
		return 0;
	__cpuid_count(0xd, 0, a, b, c, d);
	return b >= 576 ? b : 0;
}
#define X86_LIVE(x) x
#else
#define X86_LIVE(x) NULL
#endif

const struct inject_arch inject_arch_x86_64 = {
	.name = "x86_64",
	.machine = INJECT_EM_X86_64,
	.locked_syscalls = x86_locked_syscalls,
	.syscall_name = x86_syscall_name,
	.shell_size = x86_shell_size,
	.shell_build = x86_shell_build,
	.stack_need = x86_stack_need,
	.xsave_size = X86_LIVE(x86_xsave_size),
	.regs_get = X86_LIVE(x86_regs_get),
	.regs_set = X86_LIVE(x86_regs_set),
	.where = X86_LIVE(x86_where),
	.resume = X86_LIVE(x86_resume),
	.enter = X86_LIVE(x86_enter),
};
