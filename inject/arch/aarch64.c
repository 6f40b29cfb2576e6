/*
 * inject_aarch64: registers, system call restart and the shellcode for
 * aarch64; see arch.h.  Compiled and unit-tested on every host; the live
 * part is built with the cross compiler here (scripts/test-all) and runs
 * only on aarch64.
 *
 * Resume state.  Unlike x86_64, arm64's do_signal() rewinds an
 * interrupted call *before* the interrupt stop: the tracer sees pc back on
 * the `svc #0` and x0 = orig_x0 — but not the return value, so it cannot
 * tell -ERESTART_RESTARTBLOCK (after the stop the kernel would also set
 * x8 = __NR_restart_syscall, so that a relative sleep resumes with the
 * time left) from the other restarts, nor from a thread that an interrupt
 * caught just before its svc.  So when the thread stands on an svc, we let
 * the kernel finish its decision: PTRACE_SYSCALL to the entry stop of the
 * call it really makes, whose registers (pc - 4) are R'.  The kernel shows
 * the stop's direction in x7 at syscall stops and puts the old x7 back
 * afterwards, so R'.x7 comes from the interrupt stop.
 *
 * Entry at a syscall-entry stop takes two ptrace calls: the registers
 * (NT_PRSTATUS), then "skip this call" (NT_ARM_SYSTEM_CALL = -1).  Should
 * the injector die between them the call would still run, from the entry
 * registers: so those carry x0..x5 = -1, which makes every call a thread
 * sleeps in (read, futex, clock_nanosleep, ppoll, pselect6, epoll_pwait,
 * wait4, accept4, ...) fail at once without effect; the shellcode then
 * runs and restarts the real call from R'.
 *
 * Shellcode (x19 = result area, x9 scratch; every register is restored):
 *
 *   stp q0,q1,[sp] .. stp q30,q31,[sp,#480]; fpsr, fpcr at [sp,#512]
 *   ldr x19,L_result; mov w9,#2; str w9,[x19]     (STARTED)
 *   ldr x9,L_errno; a64_blr x9; str x0,[x19,#16]; ldr w9,[x0]; str w9,[x19,#4]
 *   a64_adr x0,path; mov w1,mode; ldr x9,L_dlopen; a64_blr x9; str x0,[x19,#8]
 *   cbnz x0,after; ldr x9,L_dlerror; cbz x9,after; a64_blr x9; cbz x0,after
 *   add x1,x19,#48; mov x2,#255
 *   loop: ldrb w3,[x0],#1; strb w3,[x1],#1; cbz w3,after
 *         subs x2,x2,#1; b.ne loop; strb wzr,[x1]
 *   after: ldr x0,[x19,#16]; ldr w9,[x19,#4]; str w9,[x0]
 *   mov w9,#1; dmb ishst; str w9,[x19]            (DONE)
 *   ldp q0,q1,[sp] ..; msr fpsr; msr fpcr
 *   ldr x9,L_sp; mov sp,x9; ldr x9,L_nzcv; msr nzcv,x9
 *   ldr x0,L_x0 .. ldr x30,L_x30
 *   b resume_pc
 *
 * There is no way to branch to an arbitrary address on aarch64 without a
 * register, and every register may be live at an arbitrary stop, so the
 * last instruction is a direct b: the cave must be within +-128 MiB of
 * the resume pc (inject.c picks one that is).  Not preserved: SVE/SME
 * state beyond q0-q31 (a system call discards it anyway) and PSTATE.BTYPE
 * (cleared, so the cave's first instruction needs no BTI landing pad).
 */
#include "arch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tracee.h"

#define A64_CODE_MAX 512
enum {
	AL_X0 = 0, /* .. AL_X0 + 30 */
	AL_SP = 31,
	AL_NZCV,
	AL_DLOPEN,
	AL_DLERROR,
	AL_ERRNO,
	AL_RESULT,
	A64_NLIT
};
#define A64_LIT_OFF A64_CODE_MAX
#define A64_PATH_OFF (A64_LIT_OFF + 8 * A64_NLIT)
#define A64_RED_ZONE 256 /* arm64 has no red zone; stay clear anyway */
#define A64_FP_AREA 528	 /* q0-q31, fpsr, fpcr */
#define A64_SVC0 0xd4000001u
#define A64_BTYPE (3ull << 10)
#define A64_NZCV_MASK 0xf0000000ull
#define A64_B_RANGE (128ll << 20)

/* ---- resume and entry state (pure) ------------------------------------ */

void inject_aarch64_resume(const struct inject_regs *ev,
			   const struct inject_regs *entry,
			   struct inject_regs *out)
{
	if (entry) {
		*out = *entry;
		out->w[A64_PC] -= 4; /* back onto the svc */
		out->w[7] = ev->w[7];
	} else {
		*out = *ev;
	}
	out->sysno = -1;
}

static uint64_t a64_entry_sp(const struct inject_shell *s)
{
	return (s->resume->w[A64_SP] - A64_RED_ZONE - A64_FP_AREA) &
	       ~(uint64_t)15;
}

void inject_aarch64_entry(const struct inject_shell *s, int at_syscall,
			  struct inject_regs *out)
{
	*out = *s->resume;
	out->w[A64_SP] = a64_entry_sp(s);
	out->w[A64_PC] = s->code;
	out->w[A64_PSTATE] &= ~A64_BTYPE;
	if (at_syscall)
		for (int i = 0; i < 6; i++)
			out->w[i] = (uint64_t)-1;
	out->sysno = -1;
}

static size_t a64_stack_need(const struct inject_shell *s)
{
	(void)s;
	return A64_RED_ZONE + A64_FP_AREA + 16;
}

/* ---- the shellcode builder (pure) ------------------------------------- */

struct abuf {
	uint8_t *p;
	size_t cap, len;
	int range; /* a branch or literal out of reach */
};

static void a64_w32(struct abuf *b, uint32_t v)
{
	for (int i = 0; i < 4; i++) {
		if (b->len < b->cap)
			b->p[b->len] = (uint8_t)(v >> (8 * i));
		b->len++;
	}
}

/* imm19 word offset from here to target (a byte offset in the code). */
static uint32_t a64_rel19(struct abuf *b, size_t target)
{
	int64_t d = ((int64_t)target - (int64_t)b->len) / 4;

	if (d < -(1 << 18) || d >= (1 << 18))
		b->range = 1;
	return (uint32_t)(d & 0x7ffff) << 5;
}

#define A64_SYSREG(o0, op1, crn, crm, op2)                                     \
	((uint32_t)((o0) << 14 | (op1) << 11 | (crn) << 7 | (crm) << 3 |       \
		    (op2))                                                     \
	 << 5)
#define A64_FPSR A64_SYSREG(1, 3, 4, 4, 1)
#define A64_FPCR A64_SYSREG(1, 3, 4, 4, 0)
#define A64_NZCV A64_SYSREG(1, 3, 4, 2, 0)
#define A64_X9 9
#define A64_X19 19
#define A64_SPR 31

static void a64_stp_q(struct abuf *b, int t1, int t2, int off)
{
	a64_w32(b, 0xad000000u | (uint32_t)((off / 16) & 0x7f) << 15 |
			   (uint32_t)t2 << 10 | A64_SPR << 5 | (uint32_t)t1);
}

static void a64_ldp_q(struct abuf *b, int t1, int t2, int off)
{
	a64_w32(b, 0xad400000u | (uint32_t)((off / 16) & 0x7f) << 15 |
			   (uint32_t)t2 << 10 | A64_SPR << 5 | (uint32_t)t1);
}

static void a64_ldst_x(struct abuf *b, int load, int t, int n, int off)
{
	a64_w32(b, (load ? 0xf9400000u : 0xf9000000u) |
			   (uint32_t)(off / 8) << 10 | (uint32_t)n << 5 |
			   (uint32_t)t);
}

static void a64_ldst_w(struct abuf *b, int load, int t, int n, int off)
{
	a64_w32(b, (load ? 0xb9400000u : 0xb9000000u) |
			   (uint32_t)(off / 4) << 10 | (uint32_t)n << 5 |
			   (uint32_t)t);
}

static void a64_ldr_lit(struct abuf *b, int t, int lit)
{
	a64_w32(b, 0x58000000u | a64_rel19(b, A64_LIT_OFF + 8 * (size_t)lit) |
			   (uint32_t)t);
}

static void a64_adr(struct abuf *b, int d, size_t target)
{
	int64_t imm = (int64_t)target - (int64_t)b->len;

	a64_w32(b, 0x10000000u | (uint32_t)(imm & 3) << 29 |
			   (uint32_t)((imm >> 2) & 0x7ffff) << 5 | (uint32_t)d);
}

static void a64_blr(struct abuf *b, int n)
{
	a64_w32(b, 0xd63f0000u | (uint32_t)n << 5);
}

/* cbz/cbnz: op 0xb4000000 cbz x, 0xb5000000 cbnz x, 0x34000000 cbz w. */
static void a64_cb(struct abuf *b, uint32_t op, int t, size_t target)
{
	a64_w32(b, op | a64_rel19(b, target) | (uint32_t)t);
}

enum { ALB_AFTER, ALB_LOOP, A64_NLABELS };

static void a64_emit(struct abuf *b, const struct inject_shell *s,
		     size_t *label, uint64_t resume_pc)
{
	const int x9 = A64_X9, x19 = A64_X19, sp = A64_SPR;
	int64_t d;

	/* stp q0,q1,[sp] .. stp q30,q31,[sp,#480] */
	for (int q = 0; q < 32; q += 2)
		a64_stp_q(b, q, q + 1, q * 16);
	/* mrs x9,fpsr; str x9,[sp,#512]; mrs x9,fpcr; str x9,[sp,#520] */
	a64_w32(b, 0xd5300000u | A64_FPSR | x9);
	a64_ldst_x(b, 0, x9, sp, 512);
	a64_w32(b, 0xd5300000u | A64_FPCR | x9);
	a64_ldst_x(b, 0, x9, sp, 520);
	/* ldr x19,L_result; mov w9,#STARTED; str w9,[x19] */
	a64_ldr_lit(b, x19, AL_RESULT);
	a64_w32(b, 0x52800000u | INJECT_STATE_STARTED << 5 | x9);
	a64_ldst_w(b, 0, x9, x19, INJECT_RESULT_STATE);
	/* ldr x9,L_errno; blr x9; str x0,[x19,#16]; ldr w9,[x0];
	 * str w9,[x19,#4] */
	a64_ldr_lit(b, x9, AL_ERRNO);
	a64_blr(b, x9);
	a64_ldst_x(b, 0, 0, x19, INJECT_RESULT_ERRNO_PTR);
	a64_ldst_w(b, 1, x9, 0, 0);
	a64_ldst_w(b, 0, x9, x19, INJECT_RESULT_ERRNO);
	/* adr x0,path; movz w1,#lo; movk w1,#hi,lsl #16; ldr x9,L_dlopen;
	 * blr x9; str x0,[x19,#8]; cbnz x0,after */
	a64_adr(b, 0, A64_PATH_OFF);
	a64_w32(b, 0x52800000u | (s->mode & 0xffff) << 5 | 1);
	a64_w32(b, 0x72a00000u | (s->mode >> 16) << 5 | 1);
	a64_ldr_lit(b, x9, AL_DLOPEN);
	a64_blr(b, x9);
	a64_ldst_x(b, 0, 0, x19, INJECT_RESULT_HANDLE);
	a64_cb(b, 0xb5000000u, 0, label[ALB_AFTER]);
	/* ldr x9,L_dlerror; cbz x9,after; blr x9; cbz x0,after */
	a64_ldr_lit(b, x9, AL_DLERROR);
	a64_cb(b, 0xb4000000u, x9, label[ALB_AFTER]);
	a64_blr(b, x9);
	a64_cb(b, 0xb4000000u, 0, label[ALB_AFTER]);
	/* add x1,x19,#48; movz x2,#255 */
	a64_w32(b, 0x91000000u | INJECT_RESULT_ERROR << 10 | x19 << 5 | 1);
	a64_w32(b, 0xd2800000u | (INJECT_ERROR_MAX - 1) << 5 | 2);
	/* loop: ldrb w3,[x0],#1; strb w3,[x1],#1; cbz w3,after;
	 * subs x2,x2,#1; b.ne loop; strb wzr,[x1] */
	label[ALB_LOOP] = b->len;
	a64_w32(b, 0x38401400u | 0 << 5 | 3);
	a64_w32(b, 0x38001400u | 1 << 5 | 3);
	a64_cb(b, 0x34000000u, 3, label[ALB_AFTER]);
	a64_w32(b, 0xf1000442u);
	a64_w32(b, 0x54000001u | a64_rel19(b, label[ALB_LOOP]));
	a64_w32(b, 0x3900003fu);
	/* after: ldr x0,[x19,#16]; ldr w9,[x19,#4]; str w9,[x0] */
	label[ALB_AFTER] = b->len;
	a64_ldst_x(b, 1, 0, x19, INJECT_RESULT_ERRNO_PTR);
	a64_ldst_w(b, 1, x9, x19, INJECT_RESULT_ERRNO);
	a64_ldst_w(b, 0, x9, 0, 0);
	/* mov w9,#DONE; dmb ishst; str w9,[x19] */
	a64_w32(b, 0x52800000u | INJECT_STATE_DONE << 5 | x9);
	a64_w32(b, 0xd5033abfu);
	a64_ldst_w(b, 0, x9, x19, INJECT_RESULT_STATE);
	/* ldp q0,q1,[sp] ..; ldr x9,[sp,#512]; msr fpsr,x9;
	 * ldr x9,[sp,#520]; msr fpcr,x9 */
	for (int q = 0; q < 32; q += 2)
		a64_ldp_q(b, q, q + 1, q * 16);
	a64_ldst_x(b, 1, x9, sp, 512);
	a64_w32(b, 0xd5100000u | A64_FPSR | x9);
	a64_ldst_x(b, 1, x9, sp, 520);
	a64_w32(b, 0xd5100000u | A64_FPCR | x9);
	/* ldr x9,L_sp; mov sp,x9; ldr x9,L_nzcv; msr nzcv,x9 */
	a64_ldr_lit(b, x9, AL_SP);
	a64_w32(b, 0x91000000u | x9 << 5 | sp);
	a64_ldr_lit(b, x9, AL_NZCV);
	a64_w32(b, 0xd5100000u | A64_NZCV | x9);
	/* ldr x0,L_x0 .. ldr x30,L_x30 */
	for (int r = 0; r <= 30; r++)
		a64_ldr_lit(b, r, AL_X0 + r);
	/* b resume_pc */
	d = (int64_t)resume_pc - (int64_t)(s->code + b->len);
	if (d < -A64_B_RANGE || d >= A64_B_RANGE)
		b->range = 1;
	a64_w32(b, 0x14000000u | (uint32_t)((d / 4) & 0x3ffffff));
}

static size_t a64_shell_size(size_t pathlen)
{
	return A64_PATH_OFF + pathlen + 1;
}

static void a64_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static ssize_t a64_shell_build(const struct inject_shell *s, uint8_t *buf,
			       size_t cap, char *err, size_t errlen)
{
	const struct inject_regs *r = s->resume;
	size_t label[A64_NLABELS] = {0}, pathlen = strlen(s->path);
	struct abuf b = {buf, A64_CODE_MAX, 0, 0};
	uint64_t lit[A64_NLIT];

	if (cap < a64_shell_size(pathlen)) {
		snprintf(err, errlen, "shellcode needs %zu bytes, %zu given",
			 a64_shell_size(pathlen), cap);
		return -ENOSPC;
	}
	memset(buf, 0, a64_shell_size(pathlen));
	a64_emit(&b, s, label, r->w[A64_PC]);
	b.len = 0;
	b.range = 0;
	a64_emit(&b, s, label, r->w[A64_PC]);
	if (b.len > A64_CODE_MAX) {
		snprintf(err, errlen, "shellcode is %zu bytes, over %d", b.len,
			 A64_CODE_MAX);
		return -ENOSPC;
	}
	if (b.range) {
		snprintf(err, errlen,
			 "the resume pc 0x%llx is beyond a direct branch's "
			 "reach (128 MiB) from the code at 0x%llx",
			 (unsigned long long)r->w[A64_PC],
			 (unsigned long long)s->code);
		return -ERANGE;
	}
	for (int i = 0; i <= 30; i++)
		lit[AL_X0 + i] = r->w[i];
	lit[AL_SP] = r->w[A64_SP];
	lit[AL_NZCV] = r->w[A64_PSTATE] & A64_NZCV_MASK;
	lit[AL_DLOPEN] = s->dlopen;
	lit[AL_DLERROR] = s->dlerror;
	lit[AL_ERRNO] = s->errno_fn;
	lit[AL_RESULT] = s->result;
	for (int i = 0; i < A64_NLIT; i++)
		a64_put64(buf + A64_LIT_OFF + 8 * i, lit[i]);
	memcpy(buf + A64_PATH_OFF, s->path, pathlen + 1);
	return (ssize_t)a64_shell_size(pathlen);
}

/* clang-format off */
static const char *a64_syscall_name(int64_t nr)
{
	switch (nr) {
	case 22: return "epoll_pwait";
	case 63: return "read";
	case 64: return "write";
	case 72: return "pselect6";
	case 73: return "ppoll";
	case 98: return "futex";
	case 101: return "nanosleep";
	case 115: return "clock_nanosleep";
	case 128: return "restart_syscall";
	case 202: return "accept";
	case 207: return "recvfrom";
	case 212: return "recvmsg";
	case 214: return "brk";
	case 215: return "munmap";
	case 216: return "mremap";
	case 220: return "clone";
	case 222: return "mmap";
	case 226: return "mprotect";
	case 233: return "madvise";
	case 242: return "accept4";
	case 260: return "wait4";
	case 435: return "clone3";
	default: return NULL;
	}
}

/* clang-format on */

/* brk munmap mremap mmap mprotect madvise clone clone3 */
static const int a64_locked_syscalls[] = {214, 215, 216, 222, 226,
					  233, 220, 435, -1};

/* ---- the live thread (aarch64 only) ----------------------------------- */

#if defined(__aarch64__)
#include <asm/ptrace.h>
#include <elf.h>

#ifndef NT_ARM_SYSTEM_CALL
#define NT_ARM_SYSTEM_CALL 0x404
#endif

_Static_assert(sizeof(struct user_pt_regs) == A64_NWORDS * 8,
	       "user_pt_regs layout");

static int a64_regs_get(struct inject_tracee *t, struct inject_regs *r,
			char *err, size_t errlen)
{
	struct user_pt_regs u;
	int nr = -1;
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
	n = inject_tracee_getregset(t, NT_ARM_SYSTEM_CALL, &nr, sizeof(nr), err,
				    errlen);
	r->sysno = n == sizeof(nr) ? nr : -1;
	return 0;
}

static int a64_regs_set(struct inject_tracee *t, const struct inject_regs *r,
			char *err, size_t errlen)
{
	struct user_pt_regs u;

	memcpy(&u, r->w, sizeof(u));
	return inject_tracee_setregset(t, NT_PRSTATUS, &u, sizeof(u), err,
				       errlen);
}

static int a64_insn_at(struct inject_tracee *t, uint64_t pc, uint32_t *insn)
{
	char err[128];

	return inject_tracee_read(t, pc, insn, 4, err, sizeof(err));
}

static int a64_where(struct inject_tracee *t, const struct inject_regs *r,
		     struct inject_where *w, char *err, size_t errlen)
{
	uint32_t insn = 0;

	(void)err;
	(void)errlen;
	w->pc = r->w[A64_PC];
	w->nr = -1;
	w->restart = INJECT_RESUME;
	if (a64_insn_at(t, w->pc, &insn) == 0 && insn == A64_SVC0) {
		w->nr = (int64_t)r->w[8]; /* about to be (re)made */
		w->restart = INJECT_RESTART;
	} else if (a64_insn_at(t, w->pc - 4, &insn) == 0 && insn == A64_SVC0) {
		w->nr = (int64_t)r->w[8]; /* just returned */
	}
	return 0;
}

static int a64_resume(struct inject_tracee *t, const struct inject_regs *r,
		      struct inject_regs *out, char *err, size_t errlen)
{
	struct inject_regs e;
	uint32_t insn = 0;
	int rc;

	if (a64_insn_at(t, r->w[A64_PC], &insn) || insn != A64_SVC0) {
		inject_aarch64_resume(r, NULL, out);
		return 0;
	}
	/* On an svc: let the kernel finish its restart decision and make
	 * the call; its entry stop shows which call that is. */
	rc = inject_tracee_syscall(t, err, errlen);
	if (rc)
		return rc;
	if (t->stop != INJECT_STOP_SYSCALL_ENTRY) {
		snprintf(err, errlen, "a signal came before the system call");
		return -EAGAIN;
	}
	rc = a64_regs_get(t, &e, err, errlen);
	if (rc)
		return rc;
	if (e.w[A64_PC] != r->w[A64_PC] + 4) {
		snprintf(err, errlen,
			 "entry stop at 0x%llx, not after the "
			 "svc at 0x%llx",
			 (unsigned long long)e.w[A64_PC],
			 (unsigned long long)r->w[A64_PC]);
		return -EAGAIN;
	}
	inject_aarch64_resume(r, &e, out);
	return 0;
}

static int a64_enter(struct inject_tracee *t, const struct inject_shell *s,
		     char *err, size_t errlen)
{
	int at_syscall = t->stop == INJECT_STOP_SYSCALL_ENTRY;
	struct inject_regs e, before;
	int skip = -1, rc;

	rc = a64_regs_get(t, &before, err, errlen);
	if (rc)
		return rc;
	inject_aarch64_entry(s, at_syscall, &e);
	rc = a64_regs_set(t, &e, err, errlen);
	if (rc || !at_syscall)
		return rc;
	rc = inject_tracee_setregset(t, NT_ARM_SYSTEM_CALL, &skip, sizeof(skip),
				     err, errlen);
	if (rc) {
		char e2[128];
		a64_regs_set(t, &before, e2, sizeof(e2));
	}
	return rc;
}
#define A64_LIVE(x) x
#else
#define A64_LIVE(x) NULL
#endif

const struct inject_arch inject_arch_aarch64 = {
	.name = "aarch64",
	.machine = INJECT_EM_AARCH64,
	.locked_syscalls = a64_locked_syscalls,
	.syscall_name = a64_syscall_name,
	.shell_size = a64_shell_size,
	.shell_build = a64_shell_build,
	.stack_need = a64_stack_need,
	.xsave_size = NULL,
	.regs_get = A64_LIVE(a64_regs_get),
	.regs_set = A64_LIVE(a64_regs_set),
	.where = A64_LIVE(a64_where),
	.resume = A64_LIVE(a64_resume),
	.enter = A64_LIVE(a64_enter),
};
