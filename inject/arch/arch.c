/*
 * arch: the parts shared by every architecture; see arch.h.
 */
#include "arch.h"

/* include/linux/errno.h: kernel-internal, never meant for user space. */
#define K_ERESTARTSYS 512
#define K_ERESTARTNOINTR 513
#define K_ERESTARTNOHAND 514
#define K_ERESTART_RESTARTBLOCK 516

enum inject_restart inject_restart_kind(int64_t nr, int64_t ret)
{
	if (nr < 0)
		return INJECT_RESUME;
	switch (ret) {
	case -K_ERESTARTSYS:
	case -K_ERESTARTNOINTR:
	case -K_ERESTARTNOHAND:
		return INJECT_RESTART;
	case -K_ERESTART_RESTARTBLOCK:
		return INJECT_RESTART_BLOCK;
	default:
		return INJECT_RESUME;
	}
}

const struct inject_arch *inject_arch_native(void)
{
#if defined(__x86_64__)
	return &inject_arch_x86_64;
#elif defined(__aarch64__)
	return &inject_arch_aarch64;
#else
	return NULL;
#endif
}

const struct inject_arch *inject_arch_for(uint16_t machine)
{
	const struct inject_arch *a = inject_arch_native();

	return a && a->machine == machine ? a : NULL;
}
