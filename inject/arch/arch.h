/*
 * arch: what differs between processor architectures in an injection —
 * registers, the restart of an interrupted system call, and the shellcode
 * that calls dlopen() in the target and then gives the thread back exactly
 * as it was.
 *
 * Each architecture is one const struct inject_arch (inject_x86_64.c,
 * inject_aarch64.c).  The parts that touch a live thread (ptrace) are
 * compiled only on their own architecture; the pure parts (the resume
 * state, the shellcode builder) are compiled everywhere, so that the unit
 * tests of both run on any host (tests/unit/test_inject_arch.c).
 *
 * The shellcode ("the trampoline") lives in a code cave: the unused tail
 * of the last page of a library's executable segment, which is mapped but
 * never executed by the program.  Its layout, in that order:
 *
 *   [0, code_max)             instructions (position independent)
 *   [code_max, +8*nlit)       literals: the resume registers R', the
 *                             addresses of dlopen, dlerror,
 *                             __errno_location and of the result area
 *   [.., +strlen(path)+1)     the library path, NUL-terminated
 *
 * The result area (struct layout below, INJECT_RESULT_SIZE bytes) lives in
 * a data cave: the unused tail of the last page of a writable segment.
 * The shellcode is the only writer of the result area once the thread
 * runs it; the injector reads it through /proc/PID/mem.
 *
 * What the shellcode does, on every architecture:
 *   0. sets the result area's state to STARTED;
 *   1. saves the extended (FP/SIMD) state on the thread's own stack,
 *      below its red zone (the entry stack pointer is set by entry());
 *   2. saves errno (through __errno_location());
 *   3. calls dlopen(path, mode); stores the handle; when it is NULL calls
 *      dlerror() and copies at most INJECT_ERROR_MAX - 1 bytes of it;
 *   4. restores errno, sets the state to DONE (after a store barrier);
 *   5. restores the extended state, the flags, the stack pointer and every
 *      general register from the literals, and jumps to the resume pc —
 *      with no register used for the jump (x86_64: rip-relative indirect
 *      jmp; aarch64: a direct b, so the cave must be within 128 MiB).
 * No breakpoint, no help from the injector: once the thread is released
 * it finishes alone, even if the injector dies.
 */
#ifndef INJECT_ARCH_H
#define INJECT_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct inject_tracee;

/* ELF machine numbers (elf.h), repeated so this header stands alone. */
#define INJECT_EM_X86_64 62
#define INJECT_EM_AARCH64 183

/* The result area, at its address in the target. */
#define INJECT_RESULT_STATE 0	   /* u32: INJECT_STATE_* */
#define INJECT_RESULT_ERRNO 4	   /* u32: errno, saved and restored */
#define INJECT_RESULT_HANDLE 8	   /* u64: what dlopen returned */
#define INJECT_RESULT_ERRNO_PTR 16 /* u64: &errno of the thread */
#define INJECT_RESULT_MAGIC 24	   /* u64: INJECT_MAGIC, set by injector */
#define INJECT_RESULT_CODE 32	   /* u64: the code cave, set by injector */
#define INJECT_RESULT_INJECTOR 40  /* u32: the injector's pid */
#define INJECT_RESULT_ERROR 48	   /* char[INJECT_ERROR_MAX]: dlerror() */
#define INJECT_ERROR_MAX 256
#define INJECT_RESULT_SIZE (INJECT_RESULT_ERROR + INJECT_ERROR_MAX)
#define INJECT_MAGIC 0x31474e49424f5250ULL /* "PROBING1" little-endian */
/* The state word: the injector writes WRITTEN, the shellcode's first
 * store is STARTED, its last DONE. */
#define INJECT_STATE_WRITTEN 0
#define INJECT_STATE_DONE 1
#define INJECT_STATE_STARTED 2

/* dlopen mode: RTLD_NOW.  glibc < 2.34 without libdl mapped: the private
 * __libc_dlopen_mode, which wants __RTLD_DLOPEN as well. */
#define INJECT_RTLD_NOW 0x2
#define INJECT_RTLD_DLOPEN 0x80000000u

/* Registers of a stopped thread in the architecture's ptrace layout
 * (x86_64: struct user_regs_struct; aarch64: struct user_pt_regs), as
 * 64-bit words, plus aarch64's system call number (NT_ARM_SYSTEM_CALL). */
#define INJECT_REGS_WORDS 40
struct inject_regs {
	uint64_t w[INJECT_REGS_WORDS];
	int64_t sysno; /* aarch64: -1 when not in a system call */
};

/* x86_64: word indices of struct user_regs_struct. */
/* clang-format off */
enum {
	X86_R15, X86_R14, X86_R13, X86_R12, X86_RBP, X86_RBX, X86_R11,
	X86_R10, X86_R9, X86_R8, X86_RAX, X86_RCX, X86_RDX, X86_RSI,
	X86_RDI, X86_ORIG_RAX, X86_RIP, X86_CS, X86_EFLAGS, X86_RSP,
	X86_SS, X86_FS_BASE, X86_GS_BASE, X86_DS, X86_ES, X86_FS, X86_GS,
	X86_NWORDS
};
/* clang-format on */

/* aarch64: word indices of struct user_pt_regs (x0..x30 are 0..30). */
enum { A64_SP = 31, A64_PC = 32, A64_PSTATE = 33, A64_NWORDS = 34 };

/* What a stopped thread is doing, for the choice of a safe point. */
struct inject_where {
	uint64_t pc; /* where it will go on */
	int64_t nr;  /* the system call it is in or just left; -1: none */
	int restart; /* enum inject_restart of that system call */
};

/* What the kernel does with an interrupted system call when no signal
 * handler runs (arch/x86/kernel/signal.c, arch/arm64/kernel/signal.c). */
enum inject_restart {
	INJECT_RESUME = 0,	  /* not in a syscall, or it returned */
	INJECT_RESTART = 1,	  /* -ERESTARTSYS/NOINTR/NOHAND: run again */
	INJECT_RESTART_BLOCK = 2, /* -ERESTART_RESTARTBLOCK: restart_syscall */
};

/*
 * The kind of restart for a thread stopped in system call nr (< 0: none)
 * whose return value register holds ret.  Pure; both architectures.
 */
enum inject_restart inject_restart_kind(int64_t nr, int64_t ret);

/* What the shellcode needs; every address is in the target. */
struct inject_shell {
	uint64_t code;	     /* where the shellcode will be written */
	uint64_t result;     /* the result area (data cave) */
	uint64_t dlopen;     /* dlopen, or __libc_dlopen_mode */
	uint64_t dlerror;    /* 0 when the target has none */
	uint64_t errno_fn;   /* __errno_location */
	uint32_t mode;	     /* INJECT_RTLD_NOW [| INJECT_RTLD_DLOPEN] */
	const char *path;    /* the library, as the target sees it */
	uint32_t xsave_size; /* x86_64: XSAVE area bytes; 0: FXSAVE */
	const struct inject_regs *resume; /* R': where the thread goes on */
};

struct inject_arch {
	const char *name;
	uint16_t machine; /* INJECT_EM_* */
	/* System calls that libc makes with the malloc or loader locks
	 * held: malloc's mmap, munmap, mprotect, brk, mremap, madvise, and
	 * fork's clone (fork takes every arena lock around it).  -1 ended. */
	const int *locked_syscalls;
	/* Name of system call nr for messages, or NULL. */
	const char *(*syscall_name)(int64_t nr);
	/* Bytes the shellcode takes for a path of pathlen bytes (without
	 * the NUL); the same for any address. */
	size_t (*shell_size)(size_t pathlen);
	/*
	 * Writes the shellcode for s into buf (at least shell_size()
	 * bytes).  Returns its length, or -ERANGE (aarch64: the resume pc is
	 * out of a direct branch's reach from s->code) or -ENOSPC with a
	 * message in err.
	 */
	ssize_t (*shell_build)(const struct inject_shell *s, uint8_t *buf,
			       size_t cap, char *err, size_t errlen);
	/* Bytes of stack, below the resume stack pointer, that the
	 * shellcode needs before its calls (red zone, save area). */
	size_t (*stack_need)(const struct inject_shell *s);

	/* The rest touches a live thread; NULL when compiled for another
	 * architecture. */

	/* x86_64: the XSAVE area size for the features the OS enabled, 0
	 * when it does not use XSAVE (FXSAVE then); NULL elsewhere. */
	uint32_t (*xsave_size)(void);
	/* Reads / writes the registers of the stopped thread t. */
	int (*regs_get)(struct inject_tracee *t, struct inject_regs *r,
			char *err, size_t errlen);
	int (*regs_set)(struct inject_tracee *t, const struct inject_regs *r,
			char *err, size_t errlen);
	/* Where the thread stopped with registers r is: pc, system call. */
	int (*where)(struct inject_tracee *t, const struct inject_regs *r,
		     struct inject_where *w, char *err, size_t errlen);
	/*
	 * Computes R', the registers that continue the thread exactly as the
	 * kernel would have after this stop with no handler run (the
	 * interrupted system call restarted), for the shellcode to jump to.
	 * x86_64: pure.  aarch64: may move the thread from the interrupt stop
	 * to the entry stop of the restarted system call (see
	 * inject_aarch64.c).  On failure the thread is as it was (and may be
	 * detached from wherever it is).
	 */
	int (*resume)(struct inject_tracee *t, const struct inject_regs *r,
		      struct inject_regs *resume, char *err, size_t errlen);
	/*
	 * Sends the stopped thread into the shellcode at s->code: the
	 * registers of R' with the pc, the stack pointer (R'.sp minus
	 * stack_need, aligned) and "no system call" changed.  After it
	 * returns 0, releasing the thread in any way (detach, or the
	 * injector's death) runs the shellcode.  On failure the registers are
	 * as before.
	 */
	int (*enter)(struct inject_tracee *t, const struct inject_shell *s,
		     char *err, size_t errlen);
};

extern const struct inject_arch inject_arch_x86_64;
extern const struct inject_arch inject_arch_aarch64;

/* The architecture this program is built for, or NULL when it has none. */
const struct inject_arch *inject_arch_native(void);

/* The arch for an ELF machine, or NULL. */
const struct inject_arch *inject_arch_for(uint16_t machine);

/* --- pure functions, exported for the unit tests --------------------- */

/* x86_64: R' from the registers r read at an interrupt stop. */
void inject_x86_64_resume(const struct inject_regs *r, struct inject_regs *out);

/* x86_64: the entry registers for s (from *s->resume). */
void inject_x86_64_entry(const struct inject_shell *s, struct inject_regs *out);

/*
 * aarch64: R' from the registers at the interrupt stop (ev) and, when the
 * thread was moved on to the entry stop of its restarted system call, the
 * registers there (entry, else NULL): pc back onto the svc, x7 from ev
 * (the kernel shows the stop's direction in x7 at syscall stops).
 */
void inject_aarch64_resume(const struct inject_regs *ev,
			   const struct inject_regs *entry,
			   struct inject_regs *out);

/* aarch64: the entry registers for s; at a syscall-entry stop the
 * argument registers x0..x5 are set to -1 (see inject_aarch64.c). */
void inject_aarch64_entry(const struct inject_shell *s, int at_syscall,
			  struct inject_regs *out);

#endif
